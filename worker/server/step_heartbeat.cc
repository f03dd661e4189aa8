#include "worker/server/step_heartbeat.h"

#include <algorithm>
#include <chrono>

#include "common/clock.h"
#include "common/log.h"
#include "common/proto/frames.h"

namespace bmad::worker {

StepHeartbeat::StepHeartbeat(zmq::socket_t& socket, int64_t period_ms, int64_t limit_ms,
                             std::function<void(bool hung)> on_hang)
    : socket_(socket),
      period_ns_(period_ms * 1'000'000),
      limit_ns_(limit_ms * 1'000'000),
      on_hang_(std::move(on_hang)) {
  thread_ = std::thread([this] { Run(); });
}

StepHeartbeat::~StepHeartbeat() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void StepHeartbeat::Begin(proto::Heartbeat beat, int64_t last_sent_ns) {
  // No notify: most steps are far shorter than a period, and waking the thread for each would
  // cost a system call a step. The thread looks every quarter period instead.
  std::lock_guard<std::mutex> lock(mutex_);
  beat_ = std::move(beat);
  step_start_ns_ = SystemClock::Instance().NowNanos();
  last_sent_ns_ = last_sent_ns;
}

int64_t StepHeartbeat::End() {
  std::lock_guard<std::mutex> lock(mutex_);
  beat_.reset();
  if (hang_reported_) {
    hang_reported_ = false;
    if (on_hang_) on_hang_(false);
  }
  return last_sent_ns_;
}

uint64_t StepHeartbeat::sent() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return sent_;
}

void StepHeartbeat::Run() {
  const Clock& clock = SystemClock::Instance();
  const auto look_every = std::chrono::nanoseconds(std::max<int64_t>(1, period_ns_ / 4));
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    const int64_t now = clock.NowNanos();
    // A step stuck past the limit is a hang: stay silent until it ends, and say so once.
    if (beat_ && now - step_start_ns_ >= limit_ns_ && !hang_reported_) {
      hang_reported_ = true;
      log::Error("worker", "a step has run past parallel.step_timeout_ms: heartbeats stop and /health fails until it ends",
                 {{"step_ms", (now - step_start_ns_) / 1'000'000}});
      if (on_hang_) on_hang_(true);
    }
    if (beat_ && now - step_start_ns_ < limit_ns_ && now - last_sent_ns_ >= period_ns_) {
      // Sent under the lock: End() cannot return while the socket is in use here.
      Status s = proto::SendMessage(socket_, *beat_);
      if (!s.ok()) log::Warn("worker", "cannot send a heartbeat during a step", {{"error", s}});
      last_sent_ns_ = clock.NowNanos();
      ++sent_;
    }
    wake_.wait_for(lock, look_every);
  }
}

}  // namespace bmad::worker
