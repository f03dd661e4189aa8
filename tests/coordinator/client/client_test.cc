#include "coordinator/client/client.h"

#include <gtest/gtest.h>

#include <thread>

#include "tests/coordinator/client/fake_coordinator.h"
#include "tests/support/free_port.h"

namespace bmad::client {
namespace {

using namespace std::chrono_literals;
using proto::FinishReason;
using testing::ChunkFor;
using testing::FakeCoordinator;

proto::Submit SubmitOf(std::string prompt, uint32_t max_tokens = 16) {
  proto::Submit s;
  s.prompt_text = std::move(prompt);
  s.sampling.max_tokens = max_tokens;
  return s;
}

std::unique_ptr<Client> ConnectTo(const FakeCoordinator& fake) {
  auto client = Client::Connect(fake.endpoint());
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return std::move(client).value();
}

bool IsCancel(const proto::Message& m) { return std::holds_alternative<proto::Cancel>(m); }

// Accepts every Submit as request 7 and streams "Hel", "lo", "!" (the last with usage).
void StreamHello(FakeCoordinator& fake, const std::string& peer, const proto::Message& m) {
  const auto* s = std::get_if<proto::Submit>(&m);
  if (!s) return;
  fake.Send(peer, proto::Accepted{s->client_request_id, 7, 4});
  fake.Send(peer, ChunkFor(*s, 7, 0, 0, {10, 11}, "Hel"));
  fake.Send(peer, ChunkFor(*s, 7, 1, 2, {12}, "lo"));
  proto::TokenChunk last = ChunkFor(*s, 7, 2, 3, {13}, "!", FinishReason::kLength);
  last.usage = {4, 4, 0};
  fake.Send(peer, last);
}

TEST(ClientTest, StreamsChunksInOrderUntilTheFinishReason) {
  FakeCoordinator fake(StreamHello);
  auto client = ConnectTo(fake);
  std::vector<uint32_t> sequences;
  std::string streamed;
  auto r = client->Generate(SubmitOf("hi"),
                            [&](const proto::TokenChunk& c) {
                              sequences.push_back(c.sequence);
                              streamed += c.text;
                            },
                            5s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->text, "Hello!");
  EXPECT_EQ(streamed, "Hello!");
  EXPECT_EQ(sequences, (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(r->token_ids, (std::vector<uint32_t>{10, 11, 12, 13}));
  EXPECT_EQ(r->request_id, 7u);
  EXPECT_EQ(r->prompt_tokens, 4u);
  EXPECT_EQ(r->finish_reason, FinishReason::kLength);
  EXPECT_EQ(r->usage.completion_tokens, 4u);
  EXPECT_EQ(r->chunks, 3u);
  EXPECT_EQ(r->ignored_frames, 0u);
  EXPECT_GE(r->first_token_s, 0.0);
  EXPECT_LE(r->first_token_s, r->total_s);
  EXPECT_FALSE(r->client_request_id.empty()) << "Generate names requests that have no id";

  // The Submit reached the coordinator as sent, with the generated id.
  auto received = fake.Received();
  ASSERT_FALSE(received.empty());
  const auto& submit = std::get<proto::Submit>(received.front());
  EXPECT_EQ(submit.prompt_text, "hi");
  EXPECT_EQ(submit.client_request_id, r->client_request_id);
}

TEST(ClientTest, OneClientRunsRequestsOneAfterAnother) {
  FakeCoordinator fake(StreamHello);
  auto client = ConnectTo(fake);
  auto first = client->Generate(SubmitOf("a"), nullptr, 5s);
  auto second = client->Generate(SubmitOf("b"), nullptr, 5s);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_NE(first->client_request_id, second->client_request_id);
  EXPECT_EQ(second->text, "Hello!");
}

TEST(ClientTest, AnErrorBeforeAcceptedComesBackWithTheServersCode) {
  FakeCoordinator fake([](FakeCoordinator& f, const std::string& peer, const proto::Message& m) {
    if (const auto* s = std::get_if<proto::Submit>(&m)) {
      f.Send(peer, proto::ErrorMessage{StatusCode::kResourceExhausted, "overloaded", 0,
                                       s->client_request_id, 250});
    }
  });
  auto client = ConnectTo(fake);
  auto r = client->Generate(SubmitOf("x"), nullptr, 5s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("overloaded"), std::string::npos);
  EXPECT_NE(r.status().message().find("retry after 250 ms"), std::string::npos);
}

TEST(ClientTest, AnErrorMidStreamEndsTheRequest) {
  FakeCoordinator fake([](FakeCoordinator& f, const std::string& peer, const proto::Message& m) {
    if (const auto* s = std::get_if<proto::Submit>(&m)) {
      f.Send(peer, proto::Accepted{s->client_request_id, 9, 1});
      f.Send(peer, ChunkFor(*s, 9, 0, 0, {1}, "a"));
      f.Send(peer, proto::ErrorMessage{StatusCode::kUnavailable, "replica lost", 9, "", 0});
    }
  });
  auto client = ConnectTo(fake);
  std::string streamed;
  auto r = client->Generate(SubmitOf("x"), [&](const proto::TokenChunk& c) { streamed += c.text; },
                            5s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(r.status().message(), "replica lost");
  EXPECT_EQ(streamed, "a");
}

TEST(ClientTest, AChunkFinishingWithErrorTakesItsReasonFromTheErrorMessage) {
  FakeCoordinator fake([](FakeCoordinator& f, const std::string& peer, const proto::Message& m) {
    if (const auto* s = std::get_if<proto::Submit>(&m)) {
      f.Send(peer, ChunkFor(*s, 3, 0, 0, {}, "", FinishReason::kError));
      f.Send(peer, proto::ErrorMessage{StatusCode::kInternal, "kernel failed", 3,
                                       s->client_request_id, 0});
    }
  });
  auto client = ConnectTo(fake);
  auto r = client->Generate(SubmitOf("x"), nullptr, 5s);
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_EQ(r.status().message(), "kernel failed");
}

TEST(ClientTest, AChunkFinishingWithErrorAndNoErrorMessageIsStillAnError) {
  FakeCoordinator fake([](FakeCoordinator& f, const std::string& peer, const proto::Message& m) {
    if (const auto* s = std::get_if<proto::Submit>(&m)) {
      f.Send(peer, ChunkFor(*s, 3, 0, 0, {5}, "z", FinishReason::kError));
    }
  });
  auto client = ConnectTo(fake);
  auto r = client->Generate(SubmitOf("x"), nullptr, 2s);
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_NE(r.status().message().find("finish reason 'error'"), std::string::npos);
}

TEST(ClientTest, ChunksOutOfOrderAreDataLossAndTheRequestIsCancelled) {
  FakeCoordinator fake([](FakeCoordinator& f, const std::string& peer, const proto::Message& m) {
    if (const auto* s = std::get_if<proto::Submit>(&m)) {
      f.Send(peer, proto::Accepted{s->client_request_id, 5, 1});
      f.Send(peer, ChunkFor(*s, 5, 0, 0, {1}, "a"));
      f.Send(peer, ChunkFor(*s, 5, 2, 2, {3}, "c"));  // chunk 1 skipped
      f.Send(peer, ChunkFor(*s, 5, 1, 1, {2}, "b", FinishReason::kStop));
    }
  });
  auto client = ConnectTo(fake);
  auto r = client->Generate(SubmitOf("x"), nullptr, 5s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("chunk 2"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("out of order"), std::string::npos);
  EXPECT_TRUE(fake.WaitFor(
      [](const proto::Message& m) { return IsCancel(m) && std::get<proto::Cancel>(m).request_id == 5; },
      2s));
}

TEST(ClientTest, ATokenOffsetThatSkipsTokensIsDataLoss) {
  FakeCoordinator fake([](FakeCoordinator& f, const std::string& peer, const proto::Message& m) {
    if (const auto* s = std::get_if<proto::Submit>(&m)) {
      f.Send(peer, ChunkFor(*s, 5, 0, 0, {1, 2}, "ab"));
      f.Send(peer, ChunkFor(*s, 5, 1, 3, {4}, "d", FinishReason::kStop));
    }
  });
  auto client = ConnectTo(fake);
  auto r = client->Generate(SubmitOf("x"), nullptr, 5s);
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("token offset 3"), std::string::npos);
}

TEST(ClientTest, MoreTokensThanMaxTokensIsDataLoss) {
  FakeCoordinator fake([](FakeCoordinator& f, const std::string& peer, const proto::Message& m) {
    if (const auto* s = std::get_if<proto::Submit>(&m)) {
      for (uint32_t i = 0; i < 5; ++i) f.Send(peer, ChunkFor(*s, 5, i, i, {i}, "t"));
    }
  });
  auto client = ConnectTo(fake);
  auto r = client->Generate(SubmitOf("x", /*max_tokens=*/3), nullptr, 5s);
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("more than max_tokens (3)"), std::string::npos);
}

TEST(ClientTest, SilenceIsDeadlineExceededAndSendsCancel) {
  FakeCoordinator fake([](FakeCoordinator& f, const std::string& peer, const proto::Message& m) {
    if (const auto* s = std::get_if<proto::Submit>(&m)) {
      f.Send(peer, proto::Accepted{s->client_request_id, 42, 2});
      f.Send(peer, ChunkFor(*s, 42, 0, 0, {1}, "a"));
      // ... and then nothing.
    }
  });
  auto client = ConnectTo(fake);
  // Silence of 1 s: long enough for the token to arrive first on a loaded machine.
  const auto start = std::chrono::steady_clock::now();
  auto r = client->Generate(SubmitOf("x"), nullptr, 1s);
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(r.status().message().find("1 tokens so far"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("no answer from the coordinator"), std::string::npos) << r.status().message();
  EXPECT_GE(waited, 1s);
  EXPECT_LT(waited, 5s);
  EXPECT_TRUE(fake.WaitFor(
      [](const proto::Message& m) {
        return IsCancel(m) && std::get<proto::Cancel>(m).request_id == 42 &&
               !std::get<proto::Cancel>(m).client_request_id.empty();
      },
      2s));
}

TEST(ClientTest, ARepeatedAcceptedIsNotProgress) {
  // Accepted again and again, and no token: the request is silent all the same.
  FakeCoordinator fake([](FakeCoordinator& f, const std::string& peer, const proto::Message& m) {
    if (const auto* s = std::get_if<proto::Submit>(&m)) {
      for (int i = 0; i < 50; ++i) {
        f.Send(peer, proto::Accepted{s->client_request_id, 42, 2});
        std::this_thread::sleep_for(50ms);
      }
    }
  });
  auto client = ConnectTo(fake);
  const auto start = std::chrono::steady_clock::now();
  auto r = client->Generate(SubmitOf("x"), nullptr, 200ms);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  // Accepted and silent: queued, and the message says so (it said "no answer from the
  // coordinator", which had answered).
  EXPECT_NE(r.status().message().find("accepted the request but sent no token in 200 ms"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("it is queued while no replica is live or free"), std::string::npos)
      << r.status().message();
  // Before the repeats end (2.5 s): they did not restart the 200 ms silence timeout.
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

TEST(ClientTest, GarbageAndOtherRequestsMessagesAreSkipped) {
  FakeCoordinator fake([](FakeCoordinator& f, const std::string& peer, const proto::Message& m) {
    if (const auto* s = std::get_if<proto::Submit>(&m)) {
      f.SendRaw(peer, {"definitely not cap'n proto"});
      f.SendRaw(peer, {"two", "frames"});
      proto::Submit other = *s;
      other.client_request_id = "someone-else";
      f.Send(peer, ChunkFor(other, 99, 0, 0, {7}, "NO", FinishReason::kStop));
      f.Send(peer, proto::ClusterStatus{});
      f.Send(peer, ChunkFor(*s, 1, 0, 0, {1}, "ok", FinishReason::kStop));
    }
  });
  auto client = ConnectTo(fake);
  auto r = client->Generate(SubmitOf("x"), nullptr, 5s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->text, "ok");
  EXPECT_EQ(r->ignored_frames, 4u);
}

TEST(ClientTest, OnlyGarbageTimesOutAndSaysWhatWasIgnored) {
  FakeCoordinator fake([](FakeCoordinator& f, const std::string& peer, const proto::Message& m) {
    if (std::holds_alternative<proto::Submit>(m)) f.SendRaw(peer, {"garbage"});
  });
  auto client = ConnectTo(fake);
  auto r = client->Generate(SubmitOf("x"), nullptr, 1s);  // time for the garbage to arrive first
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(r.status().message().find("ignored 1 frames"), std::string::npos) << r.status().message();
}

TEST(ClientTest, ACancelFlagCancelsTheRequest) {
  FakeCoordinator fake([](FakeCoordinator& f, const std::string& peer, const proto::Message& m) {
    if (const auto* s = std::get_if<proto::Submit>(&m)) f.Send(peer, proto::Accepted{s->client_request_id, 8, 1});
  });
  auto client = ConnectTo(fake);
  std::atomic<bool> cancel{false};
  std::thread canceller([&] {
    std::this_thread::sleep_for(100ms);
    cancel.store(true);
  });
  auto r = client->Generate(SubmitOf("x"), nullptr, 10s, &cancel);
  canceller.join();
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled);
  EXPECT_TRUE(fake.WaitFor(IsCancel, 2s));
}

TEST(ClientTest, ALateChunkOfAnAbandonedRequestDoesNotDisturbTheNext) {
  std::atomic<int> submits{0};
  FakeCoordinator fake([&](FakeCoordinator& f, const std::string& peer, const proto::Message& m) {
    const auto* s = std::get_if<proto::Submit>(&m);
    if (!s) return;
    if (submits.fetch_add(1) == 0) return;  // the first request gets no answer in time
    proto::Submit first = *s;
    first.client_request_id = std::get<proto::Submit>(f.Received().front()).client_request_id;
    f.Send(peer, ChunkFor(first, 1, 0, 0, {1}, "late", FinishReason::kStop));
    f.Send(peer, ChunkFor(*s, 2, 0, 0, {2}, "fresh", FinishReason::kStop));
  });
  auto client = ConnectTo(fake);
  EXPECT_EQ(client->Generate(SubmitOf("a"), nullptr, 100ms).status().code(),
            StatusCode::kDeadlineExceeded);
  auto r = client->Generate(SubmitOf("b"), nullptr, 5s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->text, "fresh");
}

TEST(ClientTest, QueryStatusReturnsTheClusterStatus) {
  proto::ClusterStatus status;
  status.model_name = "tiny";
  status.queued = 2;
  proto::ReplicaInfo replica;
  replica.replica_id = "r0";
  replica.live = true;
  replica.load.running = 3;
  status.replicas.push_back(replica);
  FakeCoordinator fake([&](FakeCoordinator& f, const std::string& peer, const proto::Message& m) {
    if (std::holds_alternative<proto::StatusQuery>(m)) {
      f.SendRaw(peer, {"noise"});
      f.Send(peer, status);
    }
  });
  auto client = ConnectTo(fake);
  auto r = client->QueryStatus(5s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, status);
}

TEST(ClientTest, QueryStatusErrorsAndSilence) {
  FakeCoordinator refusing([](FakeCoordinator& f, const std::string& peer, const proto::Message&) {
    f.Send(peer, proto::ErrorMessage{StatusCode::kFailedPrecondition, "starting up", 0, "", 0});
  });
  auto client = ConnectTo(refusing);
  auto r = client->QueryStatus(5s);
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.status().message(), "starting up");

  FakeCoordinator silent(nullptr);
  auto quiet_client = ConnectTo(silent);
  EXPECT_EQ(quiet_client->QueryStatus(100ms).status().code(), StatusCode::kDeadlineExceeded);
}

TEST(ClientTest, BadEndpointsAndAbsentCoordinators) {
  EXPECT_EQ(Client::Connect("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Client::Connect("bogus://x").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Client::Connect("tcp://127.0.0.1:notaport").status().code(), StatusCode::kInvalidArgument);
  // Said as what it is, not as a coordinator that never answers.
  for (const char* bad : {"tcp://127.0.0.1:99999", "127.0.0.1:0", "tcp://127.0.0.1:*", "garbage"}) {
    const Status s = Client::Connect(bad).status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(s.message().rfind(std::string("coordinator endpoint '") + bad + "': ", 0), 0u) << s.message();
  }

  // Nobody listens there: the request cannot even be sent.
  auto client = Client::Connect("127.0.0.1:" + std::to_string(bmad::testing::PickFreePort()));
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_EQ((*client)->endpoint().rfind("tcp://", 0), 0u);
  auto r = (*client)->Generate(SubmitOf("x"), nullptr, 150ms);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ((*client)->QueryStatus(100ms).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ((*client)->Generate(SubmitOf("x"), nullptr, 0ms).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace bmad::client
