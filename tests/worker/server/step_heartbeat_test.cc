// StepHeartbeat over a real ZeroMQ pair (inproc): heartbeats go out while a step runs, about
// every period, none outside a step, none after a step has run past its limit, and the socket is
// the caller's again when End() returns.
#include "worker/server/step_heartbeat.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "common/clock.h"
#include "common/proto/frames.h"

namespace bmad::worker {
namespace {

using namespace std::chrono_literals;

class StepHeartbeatTest : public ::testing::Test {
 protected:
  StepHeartbeatTest() {
    coordinator_.set(zmq::sockopt::linger, 0);
    coordinator_.bind("inproc://heartbeats");
    worker_.set(zmq::sockopt::linger, 0);
    worker_.set(zmq::sockopt::routing_id, "w");
    worker_.connect("inproc://heartbeats");
  }

  // Heartbeats waiting at the coordinator.
  int Received() {
    int n = 0;
    coordinator_.set(zmq::sockopt::rcvtimeo, 0);
    while (auto in = proto::ReceiveMessage(coordinator_, /*routed=*/true)) {
      if (in->message.ok() && std::holds_alternative<proto::Heartbeat>(*in->message)) {
        EXPECT_EQ(std::get<proto::Heartbeat>(*in->message).replica_id, "r0");
        EXPECT_EQ(std::get<proto::Heartbeat>(*in->message).active_request_ids, std::vector<uint64_t>{7});
        ++n;
      }
    }
    return n;
  }

  static proto::Heartbeat Beat() { return proto::Heartbeat{"r0", {}, {7}}; }

  zmq::context_t context_;
  zmq::socket_t coordinator_{context_, zmq::socket_type::router};
  zmq::socket_t worker_{context_, zmq::socket_type::dealer};
};

TEST_F(StepHeartbeatTest, BeatsDuringALongStepOnly) {
  StepHeartbeat heartbeat(worker_, /*period_ms=*/20, /*limit_ms=*/60'000);
  std::this_thread::sleep_for(100ms);  // no step: nothing is sent
  EXPECT_EQ(Received(), 0);
  const int64_t before = SystemClock::Instance().NowNanos();
  heartbeat.Begin(Beat(), before);
  std::this_thread::sleep_for(300ms);  // the "step" (a loaded machine may oversleep)
  const int64_t last = heartbeat.End();
  const int64_t step_ms = (SystemClock::Instance().NowNanos() - before) / 1'000'000;
  const int n = Received();
  // One every 20 ms, looked for every 5 ms: about step_ms / 20, never more; a loaded machine
  // sends fewer.
  EXPECT_GE(n, 5);
  EXPECT_LE(n, step_ms / 20 + 1);
  EXPECT_EQ(heartbeat.sent(), static_cast<uint64_t>(n));
  EXPECT_GT(last, before);
  std::this_thread::sleep_for(100ms);  // after the step: nothing more
  EXPECT_EQ(Received(), 0);
  // The socket is ours again.
  EXPECT_TRUE(proto::SendMessage(worker_, Beat()).ok());
  EXPECT_EQ(Received(), 1);
}

TEST_F(StepHeartbeatTest, AShortStepSendsNothingAndKeepsTheLastTime) {
  StepHeartbeat heartbeat(worker_, 1000, 60'000);
  const int64_t sent_at = SystemClock::Instance().NowNanos();
  heartbeat.Begin(Beat(), sent_at);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(heartbeat.End(), sent_at);
  EXPECT_EQ(Received(), 0);
}

TEST_F(StepHeartbeatTest, AStepPastItsLimitGoesSilent) {
  // Beats every 100 ms up to a 500 ms limit: room for a loaded machine to send at least one.
  StepHeartbeat heartbeat(worker_, 100, /*limit_ms=*/500);
  heartbeat.Begin(Beat(), SystemClock::Instance().NowNanos());
  std::this_thread::sleep_for(700ms);
  const int before_limit = Received();
  EXPECT_GE(before_limit, 1);
  EXPECT_LE(before_limit, 500 / 100);  // none after the limit, however late this looks
  std::this_thread::sleep_for(300ms);  // still in the step, past the limit
  EXPECT_EQ(Received(), 0);
  heartbeat.End();
  // The next step starts a new allowance.
  heartbeat.Begin(Beat(), 0);
  std::this_thread::sleep_for(300ms);
  heartbeat.End();
  EXPECT_GE(Received(), 1);
}

}  // namespace
}  // namespace bmad::worker
