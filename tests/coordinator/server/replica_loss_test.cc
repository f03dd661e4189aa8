// Requests whose replica vanishes without a word (its process killed): the coordinator learns
// it when a send to it fails, and what it does then must not touch requests that are ending;
// requests a replica took and lost, or whose Assign never arrived: assigned again. An in-process
// coordinator on 127.0.0.1 (ephemeral ports) with fake replicas and a socket client.
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>
#include <zmq.hpp>

#include "tests/coordinator/server/replica_loss_fixture.h"
#include "tests/support/process.h"
#include "tests/support/tcp_proxy.h"

namespace bmad::coord {
namespace {

using namespace std::chrono_literals;

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
  // a is busy: the load gauge says so.
  proto::Heartbeat busy;
  busy.replica_id = "a";
  busy.load = proto::LoadStats{1, 3, 0.9f, 1.0f, 10, 100, 5, 50, 4};
  busy.active_request_ids = {id};
  busy.last_assignment = assign.assignment;
  busy.has_last_assignment = true;
  busy.active_assignments = {assign.assignment};
  a->Send(busy);
  const std::string load = "bmad_coordinator_replica_load_ratio{replica=\"a\"}";
  ASSERT_TRUE(testing::WaitFor([&] { return Metric(load) > 0.5; }, 5s)) << Metric(load);

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
  // Down, it carries no load (its last heartbeat's figure no longer counts).
  EXPECT_TRUE(testing::WaitFor([&] { return Metric(load) == 0.0; }, 5s)) << Metric(load);
}
// A replica stopped on purpose (a scale-down, a rolling update) is gone, not down: its series
// go, where bmad_coordinator_replica_up stayed 0 for good and an alert on it never cleared. A
// failure (the test above) keeps the 0.
TEST_F(ReplicaLossTest, AReplicaStoppedOnPurposeLeavesTheMetricsUntilItIsBack) {
  auto a = Replica("a");
  ASSERT_TRUE(a->Register());
  const std::string up = "bmad_coordinator_replica_up{pool=\"normal\",replica=\"a\"}";
  auto names_a = [&] {
    httplib::Client client("127.0.0.1", server_->http_port());
    auto res = client.Get("/metrics");
    return res && res->body.find("replica=\"a\"") != std::string::npos;
  };
  ASSERT_TRUE(testing::WaitFor([&] { return Metric(up) == 1.0; }, 5s));
  a->Send(proto::Shutdown{"replica a stopped after draining", /*planned=*/true});
  EXPECT_TRUE(testing::WaitFor([&] { return !names_a(); }, 5s)) << "the stopped replica's series stayed";
  std::this_thread::sleep_for(200ms);  // ten ticks: none brings them back
  EXPECT_FALSE(names_a());
  // A new process under the id: its series come back.
  auto again = Replica("a", /*incarnation=*/2);
  ASSERT_TRUE(again->Register());
  EXPECT_TRUE(testing::WaitFor([&] { return Metric(up) == 1.0; }, 5s));
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

TEST_F(ReplicaLossTest, AStaleRegisterFromTheRegisteredProcessResetsNothing) {
  // A worker cut off from the coordinator asks to register every heartbeat interval; the copies
  // queue on its socket and arrive together once the coordinator is up. Each used to register
  // the replica afresh, forgetting the numbers of the Assigns already sent there: a lost one was
  // then found only once overdue (here two minutes), not from the next heartbeat.
  auto a = Replica("a");
  ASSERT_TRUE(a->Register());
  const uint64_t x = Submit("x");
  ASSERT_TRUE(WaitForAssigns(*a, x, 1));
  const uint32_t ax = AssignsOf(*a, x)[0].assignment;
  ASSERT_TRUE(a->Register()) << "a stale copy is welcomed again";
  a->Send(Beat("a", {}, ax));  // took x's Assign and holds nothing: x is lost
  ASSERT_TRUE(WaitForAssigns(*a, x, 2)) << "the lost request was not found from the heartbeat";
  EXPECT_EQ(AssignsOf(*a, x)[1].assignment, ax + 1);
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

}  // namespace
}  // namespace bmad::coord
