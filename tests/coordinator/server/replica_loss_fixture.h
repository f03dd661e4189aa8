// What the replica-loss and replica-refusal tests share: an in-process coordinator on 127.0.0.1
// (ephemeral ports) with a socket client, fake replicas, and reading what those were sent.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "common/proto/frames.h"
#include "coordinator/server/coordinator_server.h"
#include "tests/coordinator/server/fake_replica.h"
#include "tests/coordinator/server/in_process_coordinator.h"

namespace bmad::coord {

class ReplicaLossTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerConfig c = LoopbackCoordinatorConfig(64);
    c.coordinator.liveness_timeout_ms = liveness_timeout_ms_;
    c.parallel.step_timeout_ms = step_timeout_ms_;
    c.coordinator.queue_timeout_ms = queue_timeout_ms_;
    if (long_tail_min_samples_ > 0) c.router.long_tail_min_samples = long_tail_min_samples_;
    // No test here is about the drain: requests its fake replicas left unfinished would hold the
    // teardown for the whole default.
    c.coordinator.drain_timeout_ms = 200;
    Configure(c);
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

  std::unique_ptr<FakeReplica> Replica(const std::string& id, uint64_t incarnation = 1) {
    return std::make_unique<FakeReplica>(ctx_, server_->worker_endpoint(), id, incarnation);
  }
  // Submits a token prompt (short by default); the coordinator's request id.
  uint64_t Submit(const std::string& client_id, size_t prompt_tokens = 3,
                  int32_t priority = proto::Submit::kDefaultPriority) {
    proto::Submit s;
    s.client_request_id = client_id;
    s.priority = priority;
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
  // A fixture's own settings, after the ones above.
  virtual void Configure(ServerConfig&) {}

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

// The Assigns of request `id` that `replica` has received, in order.
std::vector<proto::Assign> AssignsOf(const FakeReplica& replica, uint64_t id);

// Waits (up to 5 s) until `replica` has received `count` Assigns of request `id`.
bool WaitForAssigns(FakeReplica& replica, uint64_t id, size_t count);

// A heartbeat of `replica` holding `held`, having taken Assigns up to `taken`, holding the
// assignment `numbers`, and echoing `seen` (an ack's newest Assign number).
proto::Heartbeat Beat(const std::string& replica, std::vector<uint64_t> held, std::optional<uint32_t> taken,
                      std::vector<uint32_t> numbers = {}, std::optional<uint32_t> seen = std::nullopt);

// The last Assign `replica` received, or null.
const proto::Assign* LastAssign(const FakeReplica& replica);

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
                                                            int http_port);

}  // namespace bmad::coord
