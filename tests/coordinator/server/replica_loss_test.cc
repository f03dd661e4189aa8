// Requests whose replica vanishes without a word (its process killed): the coordinator learns
// it when a send to it fails, and what it does then must not touch requests that are ending.
// And requests a replica refuses as full: offered again after a back-off, within their queue
// deadline. An in-process coordinator on 127.0.0.1 (ephemeral ports) with fake replicas and a
// socket client.
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>
#include <zmq.hpp>

#include "common/proto/frames.h"
#include "coordinator/server/coordinator_server.h"
#include "tests/coordinator/server/fake_replica.h"
#include "tests/coordinator/server/in_process_coordinator.h"
#include "tests/support/process.h"
#include "tests/support/tcp_proxy.h"

namespace bmad::coord {
namespace {

using namespace std::chrono_literals;

class ReplicaLossTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerConfig c = LoopbackCoordinatorConfig(64);
    c.coordinator.liveness_timeout_ms = liveness_timeout_ms_;
    c.parallel.step_timeout_ms = step_timeout_ms_;
    c.coordinator.queue_timeout_ms = queue_timeout_ms_;
    if (long_tail_min_samples_ > 0) c.router.long_tail_min_samples = long_tail_min_samples_;
    CoordinatorRunOptions o;
    o.max_run_ms = 60000;
    auto server = CoordinatorServer::Create(c, o);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    run_ = std::thread([this] { (void)server_->Run(); });
    client_.set(zmq::sockopt::linger, 0);
    client_.set(zmq::sockopt::rcvtimeo, 10000);
    client_.connect(server_->client_endpoint());
  }
  void TearDown() override {
    if (server_) server_->RequestStop();
    if (run_.joinable()) run_.join();
  }

  std::unique_ptr<FakeReplica> Replica(const std::string& id) {
    return std::make_unique<FakeReplica>(ctx_, server_->worker_endpoint(), id);
  }
  // Submits a token prompt (short by default); the coordinator's request id.
  uint64_t Submit(const std::string& client_id, size_t prompt_tokens = 3) {
    proto::Submit s;
    s.client_request_id = client_id;
    s.prompt_is_tokens = true;
    for (size_t i = 0; i < prompt_tokens; ++i) s.prompt_tokens.push_back(static_cast<uint32_t>(1 + i));
    s.sampling.max_tokens = 4;
    EXPECT_TRUE(proto::SendMessage(client_, s).ok());
    auto in = proto::ReceiveMessage(client_, false);
    if (!in || !in->message.ok() || !std::holds_alternative<proto::Accepted>(*in->message)) {
      ADD_FAILURE() << "not accepted";
      return 0;
    }
    return std::get<proto::Accepted>(*in->message).request_id;
  }
  double Metric(const std::string& series) { return CoordinatorMetric(server_->http_port(), series); }

  int64_t queue_timeout_ms_ = 60000;
  // Long: a vanished replica is found by a failed send only.
  int64_t liveness_timeout_ms_ = 60000;
  int64_t step_timeout_ms_ = 30000;
  int64_t long_tail_min_samples_ = 0;  // > 0: the router's, instead of the default
  zmq::context_t ctx_;
  std::unique_ptr<CoordinatorServer> server_;
  std::thread run_;
  zmq::socket_t client_{ctx_, zmq::socket_type::dealer};
};

TEST_F(ReplicaLossTest, ACancelThatFindsItsReplicaGoneSendsTheRequestNowhere) {
  auto a = Replica("a");
  ASSERT_TRUE(a->Register());
  const uint64_t id = Submit("x");
  a->Receive(2s);
  ASSERT_EQ(a->Assigned(), std::vector<uint64_t>{id});
  auto b = Replica("b");
  ASSERT_TRUE(b->Register());
  a->Vanish();
  // The coordinator's socket sees the connection close (b's stays open). The sleep covers a
  // reset, which leaves no half-closed connection to wait for.
  std::this_thread::sleep_for(300ms);
  ASSERT_TRUE(WaitForAcceptedConnections(server_->worker_endpoint(), 1, 10s));

  // The cancel's message to "a" fails: "a" is dead and what it ran moves, but not this request.
  proto::Cancel cancel;
  cancel.client_request_id = "x";
  ASSERT_TRUE(proto::SendMessage(client_, cancel).ok());
  auto answer = proto::ReceiveMessage(client_, false);
  ASSERT_TRUE(answer && answer->message.ok());
  ASSERT_TRUE(std::holds_alternative<proto::TokenChunk>(*answer->message));
  EXPECT_EQ(std::get<proto::TokenChunk>(*answer->message).finish_reason, proto::FinishReason::kCancelled);
  b->Receive(500ms);
  EXPECT_TRUE(b->Assigned().empty()) << "the cancelled request was dispatched to b";
  EXPECT_EQ(Metric("bmad_coordinator_requests_finished_total{status=\"cancelled\"}"), 1.0);
  EXPECT_EQ(Metric("bmad_coordinator_replica_up{pool=\"normal\",replica=\"a\"}"), 0.0);
  EXPECT_EQ(Metric("bmad_coordinator_replica_up{pool=\"normal\",replica=\"b\"}"), 1.0);
}

TEST_F(ReplicaLossTest, AReplicaThatSaysItIsGoingDownHasItsRequestsMovedAtOnce) {
  // A worker stopped before its requests finished (a second SIGTERM) sends a Shutdown: its
  // requests move now, with the tokens already streamed, not after the liveness timeout (60 s).
  auto a = Replica("a");
  ASSERT_TRUE(a->Register());
  const uint64_t id = Submit("x");
  a->Receive(2s);
  ASSERT_EQ(a->Assigned(), std::vector<uint64_t>{id});
  proto::Assign assign;
  for (const proto::Message& m : a->received()) {
    if (const auto* as = std::get_if<proto::Assign>(&m)) assign = *as;
  }
  proto::TokenChunk chunk;
  chunk.request_id = id;
  chunk.assignment = assign.assignment;
  chunk.token_ids = {7, 8};
  chunk.text = "ab";
  a->Send(chunk);
  auto streamed = proto::ReceiveMessage(client_, false);
  ASSERT_TRUE(streamed && streamed->message.ok());
  ASSERT_TRUE(std::holds_alternative<proto::TokenChunk>(*streamed->message));
  auto b = Replica("b");
  ASSERT_TRUE(b->Register());

  a->Send(proto::Shutdown{"replica a was stopped before 1 running request(s) finished"});
  b->Receive(5s);
  ASSERT_EQ(b->Assigned(), std::vector<uint64_t>{id}) << "the request did not move";
  const proto::Assign* moved = nullptr;
  for (const proto::Message& m : b->received()) {
    if (const auto* as = std::get_if<proto::Assign>(&m)) moved = as;
  }
  ASSERT_NE(moved, nullptr);
  EXPECT_EQ(moved->generated_tokens, (std::vector<uint32_t>{7, 8}));
  EXPECT_NE(moved->assignment, assign.assignment);
  // The gauges follow on the coordinator's next tick.
  EXPECT_TRUE(testing::WaitFor([&] { return Metric("bmad_coordinator_replica_up{pool=\"normal\",replica=\"a\"}") == 0.0; },
                      5s));
}

TEST_F(ReplicaLossTest, PromptsAreHeldToTheContextTheLiveReplicasRegistered) {
  // A worker whose KV cache holds fewer tokens than the model's context registers that shorter
  // context; the coordinator used to check only the model's (512), accept a longer prompt, and
  // the worker refused it after it was accepted.
  auto small = Replica("small");
  ASSERT_TRUE(small->Register(/*context_length=*/64));
  auto submit = [&](size_t prompt_tokens, uint32_t max_tokens) {
    proto::Submit s;
    s.client_request_id = "c" + std::to_string(prompt_tokens) + "-" + std::to_string(max_tokens);
    s.prompt_is_tokens = true;
    s.prompt_tokens.assign(prompt_tokens, 5);
    s.sampling.max_tokens = max_tokens;
    EXPECT_TRUE(proto::SendMessage(client_, s).ok());
    auto in = proto::ReceiveMessage(client_, false);
    EXPECT_TRUE(in && in->message.ok());
    return in && in->message.ok() ? std::move(*in->message) : proto::Message{};
  };
  proto::Message too_long = submit(100, 4);
  ASSERT_TRUE(std::holds_alternative<proto::ErrorMessage>(too_long));
  const auto& error = std::get<proto::ErrorMessage>(too_long);
  EXPECT_EQ(error.code, StatusCode::kOutOfRange);
  EXPECT_NE(error.message.find("the prompt has 100 tokens; the replicas' context length is 64"), std::string::npos)
      << error.message;
  proto::Message over = submit(40, 30);
  ASSERT_TRUE(std::holds_alternative<proto::ErrorMessage>(over));
  EXPECT_NE(std::get<proto::ErrorMessage>(over).message.find("plus max_tokens (30) exceed the context"),
            std::string::npos);
  // What fits is served; a chat request without max_tokens gets the room left in the replicas'
  // context (its answer never comes: the fake replica does not generate).
  EXPECT_TRUE(std::holds_alternative<proto::Accepted>(submit(40, 24)));
  std::thread chat([&] {
    httplib::Client http("127.0.0.1", server_->http_port());
    http.set_read_timeout(1, 0);
    EXPECT_FALSE(http.Post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "Hi"}]})",
                           "application/json"));
  });
  chat.join();
  std::vector<uint32_t> lengths;  // prompt plus max_tokens of each assignment
  EXPECT_TRUE(testing::WaitFor([&] {
    small->Receive(50ms);
    return small->Assigned().size() >= 2;
  }, 5s));
  for (const proto::Message& m : small->received()) {
    if (const auto* a = std::get_if<proto::Assign>(&m)) {
      lengths.push_back(static_cast<uint32_t>(a->prompt_tokens.size()) + a->sampling.max_tokens);
    }
  }
  EXPECT_EQ(lengths, (std::vector<uint32_t>{64, 64}));
}

TEST_F(ReplicaLossTest, ARequestGoesOnlyToReplicasWhoseContextHoldsIt) {
  // Pools of different KV caches: a request that only the larger context holds used to be
  // routed anywhere, and a small replica refused it.
  auto small = Replica("small");
  ASSERT_TRUE(small->Register(/*context_length=*/64));
  auto large = Replica("large");
  ASSERT_TRUE(large->Register(/*context_length=*/512));
  std::vector<uint64_t> long_ids, short_ids;
  for (int i = 0; i < 6; ++i) {
    long_ids.push_back(Submit("long" + std::to_string(i), /*prompt_tokens=*/100));
    short_ids.push_back(Submit("short" + std::to_string(i)));
  }
  // The Assigns travel on other connections than the Accepted answers: wait for all of them.
  EXPECT_TRUE(testing::WaitFor([&] {
    small->Receive(50ms);
    large->Receive(50ms);
    return small->Assigned().size() + large->Assigned().size() >= 12;
  }, 5s));
  for (uint64_t id : small->Assigned()) {
    EXPECT_EQ(std::find(long_ids.begin(), long_ids.end(), id), long_ids.end()) << "request " << id << " went to small";
  }
  EXPECT_EQ(small->Assigned().size() + large->Assigned().size(), 12u);
}

TEST_F(ReplicaLossTest, TheMetricsPortIsReadyWhileAReplicaIsLive) {
  auto ready = [&] {
    httplib::Client client("127.0.0.1", server_->metrics_port());
    auto res = client.Get("/ready");
    return res ? res->status : -1;
  };
  EXPECT_EQ(ready(), 503);
  auto a = Replica("a");
  ASSERT_TRUE(a->Register());
  EXPECT_TRUE(testing::WaitFor([&] { return ready() == 200; }, 5s));
  // The replica goes: a send to it fails when a request is dispatched there, once the
  // coordinator's socket has seen the connection close.
  a->Vanish();
  std::this_thread::sleep_for(300ms);
  ASSERT_TRUE(WaitForAcceptedConnections(server_->worker_endpoint(), 0, 10s));
  Submit("x");
  EXPECT_TRUE(testing::WaitFor([&] { return ready() == 503; }, 5s));
}

TEST_F(ReplicaLossTest, ASecondProcessUnderALiveReplicasIdWaitsAndTakesNothing) {
  auto a = Replica("a");
  ASSERT_TRUE(a->Register());
  const uint64_t id = Submit("x");
  a->Receive(2s);
  ASSERT_EQ(a->Assigned(), std::vector<uint64_t>{id});
  // Another process given the same id: told to wait ("unavailable"), not refused (a refusal
  // makes a worker exit) and not let in (that would move a's request away from it).
  auto copy = std::make_unique<FakeReplica>(ctx_, server_->worker_endpoint(), "a", /*incarnation=*/2);
  EXPECT_FALSE(copy->Register());
  ASSERT_FALSE(copy->received().empty());
  const auto* wait = std::get_if<proto::ErrorMessage>(&copy->received().back());
  ASSERT_NE(wait, nullptr) << proto::MessageName(copy->received().back());
  EXPECT_EQ(wait->code, StatusCode::kUnavailable);
  EXPECT_NE(wait->message.find("replica id 'a' is held by a live process"), std::string::npos) << wait->message;
  EXPECT_EQ(Metric("bmad_coordinator_migrations_total"), 0.0);
  // a still serves it: its chunk is taken, and the client gets it.
  proto::TokenChunk chunk;
  chunk.request_id = id;
  chunk.assignment = std::get<proto::Assign>(a->received().back()).assignment;
  chunk.token_ids = {7};
  chunk.text = "hi";
  chunk.finish_reason = proto::FinishReason::kLength;
  a->Send(chunk);
  auto answer = proto::ReceiveMessage(client_, false);
  ASSERT_TRUE(answer && answer->message.ok());
  ASSERT_TRUE(std::holds_alternative<proto::TokenChunk>(*answer->message)) << proto::MessageName(*answer->message);
  EXPECT_EQ(std::get<proto::TokenChunk>(*answer->message).text, "hi");
}

TEST_F(ReplicaLossTest, AProcessThatLostItsIdIsToldToStopWhatItStillComputes) {
  // A process paused past the liveness timeout while another took its replica id comes back
  // still computing the requests that were moved away from it. Its chunks were dropped without
  // a word, so it went on to max_tokens, holding KV memory, while it waited to register.
  auto a = Replica("a");
  ASSERT_TRUE(a->Register());
  const uint64_t id = Submit("x");
  a->Receive(2s);
  ASSERT_EQ(a->Assigned(), std::vector<uint64_t>{id});
  // The old process, on a connection no replica is registered under.
  auto old = std::make_unique<FakeReplica>(ctx_, server_->worker_endpoint(), "a", /*incarnation=*/7);
  proto::TokenChunk chunk;
  chunk.request_id = id;
  chunk.token_ids = {7};
  chunk.text = "stale";
  old->Send(chunk);
  ASSERT_TRUE(testing::WaitFor([&] {
    old->Receive(50ms);
    for (const proto::Message& m : old->received()) {
      if (const auto* c = std::get_if<proto::WorkerCancel>(&m); c && c->request_id == id) return true;
    }
    return false;
  }, 5s)) << "the orphan copy was never cancelled";
  // Nothing of it reached the client, and the live replica's copy goes on.
  client_.set(zmq::sockopt::rcvtimeo, 200);
  EXPECT_FALSE(proto::ReceiveMessage(client_, false).has_value());
  a->Receive(200ms);
  for (const proto::Message& m : a->received()) EXPECT_FALSE(std::holds_alternative<proto::WorkerCancel>(m));
  chunk.assignment = std::get<proto::Assign>(a->received().back()).assignment;
  chunk.text = "live";
  chunk.finish_reason = proto::FinishReason::kLength;
  a->Send(chunk);  // it ends (the coordinator's stop need not wait for it)
  client_.set(zmq::sockopt::rcvtimeo, 5000);
  auto answer = proto::ReceiveMessage(client_, false);
  ASSERT_TRUE(answer && answer->message.ok());
  ASSERT_TRUE(std::holds_alternative<proto::TokenChunk>(*answer->message)) << proto::MessageName(*answer->message);
  EXPECT_EQ(std::get<proto::TokenChunk>(*answer->message).text, "live");
}

TEST_F(ReplicaLossTest, AWorkerOfAnotherProtocolVersionIsToldSoInItsOwnVersion) {
  // It used to get no answer at all: it waited for ever, logging that the coordinator did not
  // answer, while the coordinator logged every one of its messages as undecodable.
  const uint16_t theirs = proto::kProtocolVersion + 1;
  zmq::socket_t worker(ctx_, zmq::socket_type::dealer);
  worker.set(zmq::sockopt::linger, 0);
  worker.set(zmq::sockopt::rcvtimeo, 5000);
  worker.connect(server_->worker_endpoint());
  proto::Register reg;
  reg.info.replica_id = "future";
  reg.incarnation = 1;
  ASSERT_TRUE(proto::SendEncoded(worker, proto::EncodeStamped(reg, theirs)).ok());
  zmq::message_t frame;
  ASSERT_TRUE(worker.recv(frame, zmq::recv_flags::none)) << "no answer";
  EXPECT_EQ(proto::EnvelopeVersion(frame.data(), frame.size()), std::optional<uint16_t>(theirs));
  const proto::Message want = proto::RegisterAck{
      false, "this coordinator speaks protocol version " + std::to_string(proto::kProtocolVersion) +
                 ", the worker " + std::to_string(theirs) + ": run the same bmad release on both"};
  EXPECT_EQ(frame.to_string(), proto::EncodeStamped(want, theirs));
  // The same from a client.
  zmq::socket_t client(ctx_, zmq::socket_type::dealer);
  client.set(zmq::sockopt::linger, 0);
  client.set(zmq::sockopt::rcvtimeo, 5000);
  client.connect(server_->client_endpoint());
  proto::Submit submit;
  submit.prompt_is_tokens = true;
  submit.prompt_tokens = {1};
  ASSERT_TRUE(proto::SendEncoded(client, proto::EncodeStamped(submit, theirs)).ok());
  ASSERT_TRUE(client.recv(frame, zmq::recv_flags::none)) << "no answer";
  EXPECT_EQ(proto::EnvelopeVersion(frame.data(), frame.size()), std::optional<uint16_t>(theirs));
  EXPECT_NE(frame.to_string().find("use a client of the same bmad release"), std::string::npos);
}

TEST_F(ReplicaLossTest, AReplicaReconnectingUnderItsRoutingIdIsHeardOnTheNewConnection) {
  // A partition: the old connection goes silent but stays open on the coordinator's side (its
  // FIN was lost), and the worker, whose ZeroMQ heartbeats timed out, connects again under the
  // same routing id. The coordinator used to keep the old connection for that id and ignore
  // every message on the new one, for good: the replica was cut off until restarted.
  const std::string endpoint = server_->worker_endpoint();
  bmad::testing::TcpProxy relay(std::stoi(endpoint.substr(endpoint.rfind(':') + 1)));
  ASSERT_GT(relay.port(), 0);
  const std::string relayed = "tcp://127.0.0.1:" + std::to_string(relay.port());
  auto before = std::make_unique<FakeReplica>(ctx_, relayed, "a");
  ASSERT_TRUE(before->Register());
  relay.Freeze();  // the old connection: open, silent
  auto after = std::make_unique<FakeReplica>(ctx_, relayed, "a");  // the same routing id
  EXPECT_TRUE(after->Register()) << "the coordinator never answered the reconnected replica";
  EXPECT_EQ(relay.accepted(), 2);
  // And it is served there.
  const uint64_t id = Submit("x");
  after->Receive(2s);
  EXPECT_EQ(after->Assigned(), std::vector<uint64_t>{id});
}

// The Assigns of request `id` that `replica` has received, in order.
std::vector<proto::Assign> AssignsOf(const FakeReplica& replica, uint64_t id) {
  std::vector<proto::Assign> out;
  for (const proto::Message& m : replica.received()) {
    if (const auto* a = std::get_if<proto::Assign>(&m); a && a->request_id == id) out.push_back(*a);
  }
  return out;
}

// Waits (up to 5 s) until `replica` has received `count` Assigns of request `id`.
bool WaitForAssigns(FakeReplica& replica, uint64_t id, size_t count) {
  return testing::WaitFor([&] {
    replica.Receive(50ms);
    return AssignsOf(replica, id).size() >= count;
  }, 5s);
}

proto::Heartbeat Beat(const std::string& replica, std::vector<uint64_t> held, std::optional<uint32_t> taken,
                      std::vector<uint32_t> numbers = {}, std::optional<uint32_t> seen = std::nullopt) {
  return proto::Heartbeat{replica,           {}, std::move(held), taken.value_or(0), taken.has_value(), std::move(numbers),
                          seen.value_or(0), seen.has_value()};
}

TEST_F(ReplicaLossTest, ARequestItsReplicaTookButNoLongerHoldsIsAssignedAgain) {
  // Its last chunk was lost on the way (a connection cut and made again): without this the
  // request waited for it, and its client with it, for ever.
  auto a = Replica("a");
  ASSERT_TRUE(a->Register());
  const uint64_t x = Submit("x");
  const uint64_t y = Submit("y");
  ASSERT_TRUE(WaitForAssigns(*a, x, 1) && WaitForAssigns(*a, y, 1));
  const proto::Assign ax = AssignsOf(*a, x)[0];
  const proto::Assign ay = AssignsOf(*a, y)[0];
  EXPECT_EQ(ay.assignment, ax.assignment + 1) << "one numbering for every Assign";
  proto::TokenChunk chunk;
  chunk.request_id = x;
  chunk.assignment = ax.assignment;
  chunk.token_ids = {7, 8};
  chunk.text = "ab";
  a->Send(chunk);

  // Heartbeats that have not taken x's Assign yet (none taken, or a number from before this
  // registration) say nothing about it, nor does one that holds both.
  a->Send(Beat("a", {}, std::nullopt));
  a->Send(Beat("a", {}, ax.assignment - 1));
  a->Send(Beat("a", {x, y}, ay.assignment));
  a->Receive(300ms);
  EXPECT_EQ(AssignsOf(*a, x).size(), 1u);
  EXPECT_EQ(AssignsOf(*a, y).size(), 1u);

  // Taken up to x's number and holding neither: x is lost; y, assigned later, may still be on
  // its way, and stays.
  a->Send(Beat("a", {}, ax.assignment));
  ASSERT_TRUE(WaitForAssigns(*a, x, 2)) << "x was not assigned again";
  const proto::Assign again = AssignsOf(*a, x)[1];
  EXPECT_EQ(again.generated_tokens, (std::vector<uint32_t>{7, 8})) << "it continues from what the client has";
  EXPECT_EQ(again.assignment, ay.assignment + 1);
  // The replica was told to drop any copy it still had, before the new Assign.
  const std::vector<proto::Message>& got = a->received();
  const auto cancel = std::find_if(got.begin(), got.end(), [&](const proto::Message& m) {
    const auto* c = std::get_if<proto::WorkerCancel>(&m);
    return c && c->request_id == x;
  });
  ASSERT_NE(cancel, got.end());
  EXPECT_LT(cancel - got.begin(), std::find(got.begin(), got.end(), proto::Message{again}) - got.begin());
  EXPECT_EQ(AssignsOf(*a, y).size(), 1u);
  EXPECT_EQ(Metric("bmad_coordinator_migrations_total"), 1.0);
}

TEST_F(ReplicaLossTest, AnOlderCopyUnderTheSameIdDoesNotHideALostAssign) {
  // The replica still runs the request's first copy (it was taken for dead and given the request
  // back), but the new Assign was lost: the id alone looked held, and the old copy ran on with
  // every chunk dropped while the client waited.
  auto a = Replica("a");
  ASSERT_TRUE(a->Register());
  const uint64_t x = Submit("x");
  ASSERT_TRUE(WaitForAssigns(*a, x, 1));
  const uint32_t first = AssignsOf(*a, x)[0].assignment;
  const uint64_t y = Submit("y");  // a later Assign it did take
  ASSERT_TRUE(WaitForAssigns(*a, y, 1));
  const uint32_t later = AssignsOf(*a, y)[0].assignment;
  // Held under its own number: nothing happens.
  a->Send(Beat("a", {x, y}, later, {first, later}));
  a->Receive(300ms);
  EXPECT_EQ(AssignsOf(*a, x).size(), 1u);
  // Under another number (a copy from before): x is lost.
  a->Send(Beat("a", {x, y}, later, {first - 7, later}));
  ASSERT_TRUE(WaitForAssigns(*a, x, 2));
  EXPECT_EQ(AssignsOf(*a, y).size(), 1u);
}

TEST_F(ReplicaLossTest, ARequestMakingProgressMayBeLostAgain) {
  // Only losses in a row fail a request: each cut connection costs a long stream one loss.
  auto a = Replica("a");
  ASSERT_TRUE(a->Register());
  const uint64_t x = Submit("x");
  for (uint32_t lost = 0; lost < 6; ++lost) {
    ASSERT_TRUE(WaitForAssigns(*a, x, lost + 1)) << "after " << lost << " losses";
    const proto::Assign current = AssignsOf(*a, x).back();
    proto::TokenChunk chunk;
    chunk.request_id = x;
    chunk.assignment = current.assignment;
    chunk.token_offset = lost;
    chunk.token_ids = {7};
    chunk.text.assign(1, 'a');  // (not = "a": g++ 12 warns falsely, -Wrestrict)
    a->Send(chunk);
    a->Send(Beat("a", {}, current.assignment));
  }
  ASSERT_TRUE(WaitForAssigns(*a, x, 7)) << "it failed after losses with progress between";
  EXPECT_EQ(AssignsOf(*a, x).back().generated_tokens.size(), 6u);
}

TEST_F(ReplicaLossTest, ChunksWithAHoleBetweenThemSendTheRequestBackFromWhatTheClientHas) {
  auto a = Replica("a");
  ASSERT_TRUE(a->Register());
  const uint64_t x = Submit("x");
  ASSERT_TRUE(WaitForAssigns(*a, x, 1));
  const proto::Assign first = AssignsOf(*a, x)[0];
  proto::TokenChunk chunk;
  chunk.request_id = x;
  chunk.assignment = first.assignment;
  chunk.token_ids = {7, 8};
  chunk.text = "ab";
  a->Send(chunk);
  chunk.token_offset = 4;  // tokens 2 and 3 never came
  chunk.token_ids = {11};
  chunk.text = "e";
  a->Send(chunk);
  ASSERT_TRUE(WaitForAssigns(*a, x, 2));
  EXPECT_EQ(AssignsOf(*a, x)[1].generated_tokens, (std::vector<uint32_t>{7, 8}));
}

TEST_F(ReplicaLossTest, ARequestLostAgainAndAgainFailsNamingWhy) {
  auto a = Replica("a");
  ASSERT_TRUE(a->Register());
  const uint64_t x = Submit("x");
  for (size_t lost = 0; lost < 4; ++lost) {
    ASSERT_TRUE(WaitForAssigns(*a, x, lost + 1)) << "after " << lost << " losses";
    a->Send(Beat("a", {}, AssignsOf(*a, x).back().assignment));
  }
  std::optional<proto::ErrorMessage> error;
  for (int i = 0; i < 10 && !error; ++i) {
    auto in = proto::ReceiveMessage(client_, false);
    ASSERT_TRUE(in && in->message.ok());
    if (const auto* e = std::get_if<proto::ErrorMessage>(&*in->message)) error = *e;
  }
  ASSERT_TRUE(error);
  EXPECT_EQ(error->code, StatusCode::kInternal);
  EXPECT_NE(error->message.find("request lost by its replicas 4 times (the last: replica 'a': not held there, "
                                "though assigned no later than the last Assign the replica took or heard of)"),
            std::string::npos)
      << error->message;
  a->Receive(300ms);
  EXPECT_EQ(AssignsOf(*a, x).size(), 4u) << "assigned again after it failed";
}

// A replica that reads its messages between steps, and stops heartbeating when a step runs past
// parallel.step_timeout_ms: here 200 ms, with a liveness timeout of 1 s, so an Assign it has not
// taken 2 s after it was sent never reached it.
class LostAssignTest : public ReplicaLossTest {
 protected:
  void SetUp() override {
    liveness_timeout_ms_ = 1000;
    step_timeout_ms_ = 200;
    ReplicaLossTest::SetUp();
  }
};

TEST_F(LostAssignTest, AnAssignThatNeverArrivesIsSentAgainOnceOverdue) {
  // The replica takes nothing after it (an idle cluster): no later number tells the Assign was
  // lost, and the client used to wait for ever.
  auto a = Replica("a");
  ASSERT_TRUE(a->Register());
  const auto sent = std::chrono::steady_clock::now();
  const uint64_t x = Submit("x");
  ASSERT_TRUE(WaitForAssigns(*a, x, 1));
  // Its heartbeats say it has taken no Assign and holds nothing, as if the one above was lost.
  bool again = false;
  while (!again && std::chrono::steady_clock::now() - sent < 10s) {
    a->Send(Beat("a", {}, std::nullopt));
    a->Receive(100ms);
    again = AssignsOf(*a, x).size() >= 2;
    if (!again) continue;
    EXPECT_GE(std::chrono::steady_clock::now() - sent, 2s) << "taken back before it was overdue";
  }
  EXPECT_TRUE(again) << "the lost Assign was never sent again";
}

TEST_F(LostAssignTest, AnIdleReplicasLostAssignIsFoundFromTheNumberItsAcksCarried) {
  // As above, but the replica echoes what the coordinator's HeartbeatAcks told it: the newest
  // Assign sent before them. One connection keeps the order, so that Assign has been read unless
  // lost: taken back at once, not after the 2 s it would take to be overdue.
  auto a = Replica("a");
  ASSERT_TRUE(a->Register());
  const auto sent = std::chrono::steady_clock::now();
  const uint64_t x = Submit("x");
  ASSERT_TRUE(WaitForAssigns(*a, x, 1));
  const uint32_t number = AssignsOf(*a, x)[0].assignment;
  std::optional<uint32_t> seen;
  bool again = false;
  while (!again && std::chrono::steady_clock::now() - sent < 10s) {
    a->Send(Beat("a", {}, std::nullopt, {}, seen));
    a->Receive(100ms);
    // Only the acks that came before the Assign sent again: one read can also bring the ack
    // after it, which carries that newer number.
    size_t assigns = 0;
    for (const proto::Message& m : a->received()) {
      const auto* assign = std::get_if<proto::Assign>(&m);
      if (assign != nullptr && assign->request_id == x && ++assigns >= 2) break;
      const auto* ack = std::get_if<proto::HeartbeatAck>(&m);
      if (ack != nullptr && ack->has_last_assignment) seen = ack->last_assignment;
    }
    again = assigns >= 2;
  }
  ASSERT_TRUE(again) << "the lost Assign was never sent again";
  EXPECT_LT(std::chrono::steady_clock::now() - sent, 2s) << "found only once overdue, not from the ack's number";
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(*seen, number) << "the acks carry the newest Assign sent";
  // While it holds the request, the same echo changes nothing.
  const proto::Assign again_sent = AssignsOf(*a, x)[1];
  for (int i = 0; i < 5; ++i) {
    a->Send(Beat("a", {x}, again_sent.assignment, {again_sent.assignment}, again_sent.assignment));
    a->Receive(100ms);
  }
  EXPECT_EQ(AssignsOf(*a, x).size(), 2u);
}

class ReplicaRefusalTest : public ReplicaLossTest {
 protected:
  void SetUp() override {
    queue_timeout_ms_ = 1500;
    long_tail_min_samples_ = 1;  // the first prompt length already counts
    ReplicaLossTest::SetUp();
  }

  struct Refused {
    std::optional<proto::ErrorMessage> answer;  // the client's, when one came within 20 s
    size_t offers = 0;
  };
  // `replica` answers every offer of request `id` "full", as a worker whose queue is at
  // scheduler.max_waiting, until the client is answered.
  Refused RefuseEveryOffer(FakeReplica& replica, uint64_t id) {
    Refused refused;
    size_t seen = 0;
    const auto give_up = std::chrono::steady_clock::now() + 20s;
    while (!refused.answer && std::chrono::steady_clock::now() < give_up) {
      replica.Receive(20ms);
      for (; seen < replica.received().size(); ++seen) {
        const auto* offer = std::get_if<proto::Assign>(&replica.received()[seen]);
        if (offer == nullptr || offer->request_id != id) continue;
        ++refused.offers;
        proto::ErrorMessage full;
        full.code = StatusCode::kResourceExhausted;
        full.message = "replica queue is full (4096 requests waiting)";
        full.request_id = id;
        full.assignment = offer->assignment;
        replica.Send(full);
      }
      zmq::pollitem_t item{static_cast<void*>(client_), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(0));
      if (item.revents & ZMQ_POLLIN) {
        auto in = proto::ReceiveMessage(client_, false);
        if (!in || !in->message.ok() || !std::holds_alternative<proto::ErrorMessage>(*in->message)) {
          ADD_FAILURE() << "the client's answer is not an error";
          return refused;
        }
        refused.answer = std::get<proto::ErrorMessage>(*in->message);
      }
    }
    return refused;
  }
};

TEST_F(ReplicaRefusalTest, ARequestEveryReplicaRefusesBacksOffAndFailsAtItsQueueDeadline) {
  auto a = Replica("a");
  ASSERT_TRUE(a->Register());
  const uint64_t id = Submit("x");
  const Refused refused = RefuseEveryOffer(*a, id);
  // Refusals did not restart its wait: it failed at its queue deadline (1.5 s), naming why.
  ASSERT_TRUE(refused.answer) << "no answer in 20 s after " << refused.offers << " offers";
  EXPECT_EQ(refused.answer->code, StatusCode::kUnavailable);
  EXPECT_EQ(refused.answer->client_request_id, "x");
  EXPECT_NE(refused.answer->message.find(
                "no replica accepted the request in 1500 ms (every live one full or draining)"),
            std::string::npos)
      << refused.answer->message;
  // Offered again, but with a back-off (10 ms, doubling): about eight offers in 1.5 s, not one
  // per event-loop turn.
  EXPECT_GE(refused.offers, 2u);
  EXPECT_LE(refused.offers, 12u);
  EXPECT_EQ(Metric("bmad_coordinator_requests_finished_total{status=\"error\"}"), 1.0);
}

TEST_F(ReplicaRefusalTest, ALongTailRequestOfferedManyTimesCountsOnce) {
  // The counter of long-tail requests used to count every offer of a refused one.
  auto a = Replica("a");
  ASSERT_TRUE(a->Register());
  for (int i = 0; i < 5; ++i) Submit("short" + std::to_string(i));  // the window: five of 3 tokens
  const uint64_t id = Submit("long", /*prompt_tokens=*/10);
  const Refused refused = RefuseEveryOffer(*a, id);
  ASSERT_TRUE(refused.answer);  // its failure at the queue deadline
  ASSERT_GE(refused.offers, 2u);
  EXPECT_EQ(Metric("bmad_coordinator_long_tail_requests_total"), 1.0) << refused.offers << " offers";
  // The long-tail share's denominator counts requests too (the six), not offers; every offer
  // is still a routing decision.
  EXPECT_EQ(Metric("bmad_coordinator_requests_dispatched_total"), 6.0);
  EXPECT_EQ(CoordinatorMetricSum(server_->http_port(), "bmad_coordinator_requests_routed_total"),
            5.0 + refused.offers);
}

TEST_F(ReplicaRefusalTest, TheChoicesOfOneLongPromptAllGoToTheLongTail) {
  // Each choice was classified on its own, and n copies of the prompt each added its length to
  // the window: the quantile rose between the choices, so the later ones of one request went to
  // the normal pool. Here one more 10 in the window moves its 80th percentile from 3 to 10.
  auto a = Replica("a");
  ASSERT_TRUE(a->Register());
  for (int i = 0; i < 4; ++i) Submit("short" + std::to_string(i));  // the window: four of 3 tokens
  Submit("long", /*prompt_tokens=*/10);                               // and one of 10: p80 is 3
  EXPECT_TRUE(testing::WaitFor([&] { return Metric("bmad_coordinator_long_tail_requests_total") == 1.0; }, 10s));
  std::thread waiting([&] {
    httplib::Client http("127.0.0.1", server_->http_port());
    http.set_read_timeout(2, 0);  // no token ever comes: the client gives up
    (void)http.Post("/v1/completions", R"({"prompt": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], "n": 8, "max_tokens": 4})",
                    "application/json");
  });
  EXPECT_TRUE(testing::WaitFor([&] { return Metric("bmad_coordinator_requests_dispatched_total") == 13.0; }, 10s));
  // Counted right after the dispatch (a scrape may fall between the two).
  EXPECT_TRUE(testing::WaitFor([&] { return Metric("bmad_coordinator_long_tail_requests_total") >= 9.0; }, 5s));
  EXPECT_EQ(Metric("bmad_coordinator_long_tail_requests_total"), 9.0) << "the choices were classified apart";
  waiting.join();
}

const proto::Assign* LastAssign(const FakeReplica& replica) {
  const proto::Assign* last = nullptr;
  for (const proto::Message& m : replica.received()) {
    if (const auto* a = std::get_if<proto::Assign>(&m)) last = a;
  }
  return last;
}

// A chat request without max_tokens (its output runs to the replica's context) streams 60
// tokens on `large` (context 512), which then goes down while `small` (context 64) is live: its
// prompt and tokens so far no longer fit in small. `status` and `body` are its HTTP answer once
// `chat` (the client's thread) has been joined.
struct MigratedChat {
  std::unique_ptr<FakeReplica> large, small;
  int status = 0;
  std::string body;
  std::thread chat;
};

std::unique_ptr<MigratedChat> ChatMigratedPastASmallReplica(zmq::context_t& ctx, const std::string& workers,
                                                            int http_port) {
  auto m = std::make_unique<MigratedChat>();  // on the heap: the client's thread writes into it
  m->large = std::make_unique<FakeReplica>(ctx, workers, "large");
  m->small = std::make_unique<FakeReplica>(ctx, workers, "small");
  EXPECT_TRUE(m->large->Register(/*context_length=*/512));
  m->chat = std::thread([http_port, chat = m.get()] {
    httplib::Client http("127.0.0.1", http_port);
    http.set_read_timeout(20, 0);
    auto res = http.Post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "Hi"}]})",
                         "application/json");
    chat->status = res ? res->status : -1;
    chat->body = res ? res->body : "";
  });
  FakeReplica& large = *m->large;
  EXPECT_TRUE(testing::WaitFor([&] {
    large.Receive(50ms);
    return !large.Assigned().empty();
  }, 5s));
  const proto::Assign* first = LastAssign(large);
  if (first == nullptr) {
    ADD_FAILURE() << "no Assign on the large replica";
    return m;
  }
  EXPECT_GT(first->prompt_tokens.size() + 61, 64u) << "the prompt is too short for the case";
  EXPECT_LT(first->prompt_tokens.size() + 1, 64u) << "the prompt is too long for the case";
  proto::TokenChunk chunk;
  chunk.request_id = first->request_id;
  chunk.assignment = first->assignment;
  chunk.token_ids.assign(60, 5);
  chunk.text = std::string(60, 'x');
  large.Send(chunk);
  EXPECT_TRUE(m->small->Register(/*context_length=*/64));
  large.Send(proto::Shutdown{"replica large stopped"});
  return m;
}

TEST_F(ReplicaLossTest, AMigratedRequestGoesOnlyWhereItsTokensSoFarFit) {
  // It used to go to small (its prompt alone fits), which refused it, and the client got that.
  auto m = ChatMigratedPastASmallReplica(ctx_, server_->worker_endpoint(), server_->http_port());
  m->small->Receive(500ms);
  EXPECT_TRUE(m->small->Assigned().empty()) << "the migrated request went to the small replica";
  auto again = Replica("large-2");
  ASSERT_TRUE(again->Register(/*context_length=*/512));
  ASSERT_TRUE(testing::WaitFor([&] {
    again->Receive(50ms);
    return !again->Assigned().empty();
  }, 5s));
  ASSERT_NE(LastAssign(*again), nullptr);
  const proto::Assign moved = *LastAssign(*again);
  EXPECT_EQ(moved.generated_tokens.size(), 60u);
  proto::TokenChunk last;
  last.request_id = moved.request_id;
  last.assignment = moved.assignment;
  last.token_offset = 60;
  last.finish_reason = proto::FinishReason::kLength;
  again->Send(last);
  m->chat.join();
  EXPECT_EQ(m->status, 200) << m->body;
}

TEST_F(ReplicaRefusalTest, AMigratedRequestNoLiveReplicaHoldsFailsNamingTheContext) {
  auto m = ChatMigratedPastASmallReplica(ctx_, server_->worker_endpoint(), server_->http_port());
  m->chat.join();  // at its queue deadline, 1.5 s after it moved
  EXPECT_EQ(m->status, 503) << m->body;
  EXPECT_NE(m->body.find("no live replica's context holds the request's"), std::string::npos) << m->body;
  EXPECT_NE(m->body.find("tokens (prompt, output so far and the least still to come) for 1500 ms"),
            std::string::npos)
      << m->body;
  m->small->Receive(100ms);
  EXPECT_TRUE(m->small->Assigned().empty());
}

// The migrated chat waits queued (for up to the 60 s queue timeout) for a replica whose context
// holds it. A short request the small replica refused once waits behind it, and is offered again
// while the chat still waits: a dispatch pass skips only the requests that need at least the
// context no replica holds, not every request behind one.
TEST_F(ReplicaLossTest, ARequestThatFitsIsOfferedAgainPastOneNoLiveReplicaHolds) {
  auto m = ChatMigratedPastASmallReplica(ctx_, server_->worker_endpoint(), server_->http_port());
  const uint64_t x = Submit("x");
  ASSERT_TRUE(WaitForAssigns(*m->small, x, 1));
  proto::ErrorMessage full;
  full.code = StatusCode::kResourceExhausted;
  full.message = "replica queue is full (4096 requests waiting)";
  full.request_id = x;
  full.assignment = AssignsOf(*m->small, x)[0].assignment;
  m->small->Send(full);
  EXPECT_TRUE(WaitForAssigns(*m->small, x, 2)) << "the refused request was not offered again";
  for (uint64_t id : m->small->Assigned()) EXPECT_EQ(id, x) << "the migrated chat went to small";
  // A replica that holds the chat ends its wait.
  auto large = Replica("large-2");
  ASSERT_TRUE(large->Register(/*context_length=*/512));
  ASSERT_TRUE(testing::WaitFor([&] {
    large->Receive(50ms);
    return LastAssign(*large) != nullptr;
  }, 5s));
  proto::TokenChunk last;
  last.request_id = LastAssign(*large)->request_id;
  last.assignment = LastAssign(*large)->assignment;
  last.token_offset = 60;
  last.finish_reason = proto::FinishReason::kLength;
  large->Send(last);
  m->chat.join();
  EXPECT_EQ(m->status, 200) << m->body;
}

}  // namespace
}  // namespace bmad::coord
