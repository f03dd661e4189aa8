// The coordinator relays a request's prompt log-probabilities in prompt order, each position
// once: a migrated request's new replica scores the prompt again, and what the client has is
// dropped. An in-process coordinator on 127.0.0.1 with fake replicas and a socket client.
#include <gtest/gtest.h>

#include <httplib.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "tests/coordinator/server/replica_loss_fixture.h"

namespace bmad::coord {
namespace {

using namespace std::chrono_literals;

proto::Assign AssignReceivedBy(const FakeReplica& replica) {
  proto::Assign assign;
  for (const proto::Message& m : replica.received()) {
    if (const auto* as = std::get_if<proto::Assign>(&m)) assign = *as;
  }
  return assign;
}

// Prompt positions [first, first + count), log-probability -position each.
proto::TokenChunk ScoredPositions(uint64_t id, uint32_t assignment, uint32_t first, uint32_t count) {
  proto::TokenChunk chunk;
  chunk.request_id = id;
  chunk.assignment = assignment;
  chunk.prompt_logprob_offset = first;
  for (uint32_t p = first; p < first + count; ++p) {
    chunk.prompt_logprobs.push_back(-static_cast<float>(p));
    chunk.prompt_ranks.push_back(p);
    chunk.prompt_top_token_ids.push_back(100 + p);
    chunk.prompt_top_logprobs.push_back(-0.5f);
  }
  return chunk;
}

// Submits a 6-token prompt (token ids 1..6) asking for its log-probabilities with `alternatives`;
// the coordinator's request id (0 when not accepted).
uint64_t SubmitScored(zmq::socket_t& client, const std::string& client_id, int32_t alternatives, bool stream) {
  proto::Submit s;
  s.client_request_id = client_id;
  s.prompt_is_tokens = true;
  s.prompt_tokens = {1, 2, 3, 4, 5, 6};
  s.sampling.max_tokens = 4;
  s.sampling.prompt_logprobs = alternatives;
  s.stream = stream;
  EXPECT_TRUE(proto::SendMessage(client, s).ok());
  auto accepted = proto::ReceiveMessage(client, false);
  if (!accepted || !accepted->message.ok() || !std::holds_alternative<proto::Accepted>(*accepted->message)) {
    ADD_FAILURE() << "not accepted";
    return 0;
  }
  return std::get<proto::Accepted>(*accepted->message).request_id;
}

proto::TokenChunk ReceiveClientChunk(zmq::socket_t& client) {
  auto in = proto::ReceiveMessage(client, false);
  EXPECT_TRUE(in && in->message.ok());
  if (!in || !in->message.ok() || !std::holds_alternative<proto::TokenChunk>(*in->message)) return {};
  return std::get<proto::TokenChunk>(*in->message);
}

TEST_F(ReplicaLossTest, PromptLogprobsReachTheClientOnceInOrderAcrossAMigration) {
  auto a = Replica("a");
  ASSERT_TRUE(a->Register());
  const uint64_t id = SubmitScored(client_, "scored", 1, /*stream=*/true);
  a->Receive(2s);
  ASSERT_EQ(a->Assigned(), std::vector<uint64_t>{id});
  const proto::Assign first = AssignReceivedBy(*a);
  EXPECT_EQ(first.sampling.prompt_logprobs, 1);  // the replica is asked for them

  a->Send(ScoredPositions(id, first.assignment, 1, 3));  // positions 1..3
  proto::TokenChunk got = ReceiveClientChunk(client_);
  EXPECT_EQ(got.prompt_logprob_offset, 1u);
  EXPECT_EQ(got.prompt_logprobs, (std::vector<float>{-1, -2, -3}));
  EXPECT_EQ(got.prompt_top_token_ids, (std::vector<uint32_t>{101, 102, 103}));

  // a goes down; b scores the prompt from the start: positions 1..3 are dropped, 4..5 pass.
  auto b = Replica("b");
  ASSERT_TRUE(b->Register());
  a->Send(proto::Shutdown{"replica a was stopped"});
  for (int i = 0; i < 50 && b->Assigned().empty(); ++i) b->Receive(100ms);
  ASSERT_EQ(b->Assigned(), std::vector<uint64_t>{id});
  const proto::Assign moved = AssignReceivedBy(*b);
  b->Send(ScoredPositions(id, moved.assignment, 1, 2));  // nothing new: not sent on
  b->Send(ScoredPositions(id, moved.assignment, 3, 3));  // 3 dropped, 4 and 5 new
  got = ReceiveClientChunk(client_);
  EXPECT_EQ(got.prompt_logprob_offset, 4u);
  EXPECT_EQ(got.prompt_logprobs, (std::vector<float>{-4, -5}));
  EXPECT_EQ(got.prompt_ranks, (std::vector<uint32_t>{4, 5}));
  EXPECT_EQ(got.prompt_top_token_ids, (std::vector<uint32_t>{104, 105}));
  EXPECT_EQ(got.prompt_top_logprobs, (std::vector<float>{-0.5f, -0.5f}));

  // Then its tokens, to the end.
  proto::TokenChunk last;
  last.request_id = id;
  last.assignment = moved.assignment;
  last.token_ids = {9};
  last.text = "z";
  last.finish_reason = proto::FinishReason::kLength;
  b->Send(last);
  got = ReceiveClientChunk(client_);
  EXPECT_EQ(got.token_ids, (std::vector<uint32_t>{9}));
  EXPECT_TRUE(got.prompt_logprobs.empty());
  EXPECT_EQ(got.finish_reason, proto::FinishReason::kLength);
}

TEST_F(ReplicaLossTest, AGapInThePromptLogprobsSendsTheRequestAgain) {
  auto a = Replica("a");
  ASSERT_TRUE(a->Register());
  const uint64_t id = SubmitScored(client_, "gap", 0, /*stream=*/true);
  a->Receive(2s);
  const proto::Assign first = AssignReceivedBy(*a);
  a->Send(ScoredPositions(id, first.assignment, 3, 2));  // positions 1 and 2 never came
  // Other messages (the old copy's cancel) may come first: read until a second Assign, 5 s at most.
  for (int i = 0; i < 50 && a->Assigned().size() < 2; ++i) a->Receive(100ms);
  ASSERT_EQ(a->Assigned().size(), 2u);
  // Taken back and assigned again (here to a, the only replica) under a new assignment.
  const proto::Assign again = AssignReceivedBy(*a);
  EXPECT_NE(again.assignment, first.assignment);
  EXPECT_EQ(again.request_id, id);
}

TEST_F(ReplicaLossTest, ANonStreamingClientGetsThePromptLogprobsWithItsOneChunk) {
  auto a = Replica("a");
  ASSERT_TRUE(a->Register());
  const uint64_t id = SubmitScored(client_, "whole", 1, /*stream=*/false);
  a->Receive(2s);
  const proto::Assign assign = AssignReceivedBy(*a);
  a->Send(ScoredPositions(id, assign.assignment, 1, 2));
  proto::TokenChunk last = ScoredPositions(id, assign.assignment, 3, 1);
  last.token_ids = {9};
  last.text = "z";
  last.finish_reason = proto::FinishReason::kLength;
  a->Send(last);
  const proto::TokenChunk got = ReceiveClientChunk(client_);
  EXPECT_EQ(got.finish_reason, proto::FinishReason::kLength);
  EXPECT_EQ(got.prompt_logprob_offset, 1u);
  EXPECT_EQ(got.prompt_logprobs, (std::vector<float>{-1, -2, -3}));
  EXPECT_EQ(got.prompt_top_token_ids, (std::vector<uint32_t>{101, 102, 103}));
  EXPECT_EQ(got.token_ids, (std::vector<uint32_t>{9}));
}

TEST_F(ReplicaLossTest, WithSeveralChoicesOnlyThePromptsFirstScoresItAndEveryChoiceShowsIt) {
  auto a = Replica("a");
  ASSERT_TRUE(a->Register());
  std::string body;
  std::jthread post([&] {
    httplib::Client http("127.0.0.1", server_->http_port());
    http.set_read_timeout(10, 0);
    auto res = http.Post("/v1/completions",
                         R"({"prompt": [1, 2, 3, 4, 5, 6], "n": 3, "max_tokens": 1, "prompt_logprobs": 1})",
                         "application/json");
    if (res && res->status == 200) body = res->body;
  });
  for (int i = 0; i < 50 && a->Assigned().size() < 3; ++i) a->Receive(100ms);
  ASSERT_EQ(a->Assigned().size(), 3u);
  int scoring = 0;
  for (const proto::Message& m : a->received()) {
    const auto* assign = std::get_if<proto::Assign>(&m);
    if (assign == nullptr) continue;
    proto::TokenChunk last;
    if (assign->sampling.prompt_logprobs >= 0) {
      ++scoring;
      EXPECT_EQ(assign->sampling.prompt_logprobs, 1);
      last = ScoredPositions(assign->request_id, assign->assignment, 1, 5);
    }
    last.request_id = assign->request_id;
    last.assignment = assign->assignment;
    last.token_ids = {9};
    last.text = "z";
    last.finish_reason = proto::FinishReason::kLength;
    a->Send(last);
  }
  EXPECT_EQ(scoring, 1) << "each choice scored the same prompt";
  post.join();
  ASSERT_FALSE(body.empty()) << "no answer";
  const nlohmann::json response = nlohmann::json::parse(body);
  ASSERT_EQ(response["choices"].size(), 3u) << body;
  for (const nlohmann::json& choice : response["choices"]) {
    const nlohmann::json& positions = choice["prompt_logprobs"];
    ASSERT_EQ(positions.size(), 6u) << body;
    EXPECT_TRUE(positions[0].is_null());
    for (int p = 1; p < 6; ++p) {
      EXPECT_FLOAT_EQ(positions[p][std::to_string(p + 1)]["logprob"].get<float>(), -static_cast<float>(p)) << body;
    }
  }
}

}  // namespace
}  // namespace bmad::coord
