#include "worker/parallel/bounded_poll.h"

#include <algorithm>
#include <thread>

namespace bmad::parallel {

Deadline Deadline::After(std::chrono::milliseconds timeout) {
  timeout = std::max(timeout, std::chrono::milliseconds(0));
  const SteadyClock::time_point now = SteadyClock::now();
  // A timeout past the clock's range (milliseconds::max(): no deadline) saturates.
  if (timeout >= std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::time_point::max() - now)) {
    return Deadline{SteadyClock::time_point::max(), timeout};
  }
  return Deadline{now + timeout, timeout};
}

void PollBackoff::Pause() {
  const auto waited = SteadyClock::now() - start_;
  if (waited < kSpinFor) return;
  if (waited < kYieldFor) {
    std::this_thread::yield();
    return;
  }
  std::this_thread::sleep_for(next_sleep_);
  next_sleep_ = std::min(next_sleep_ * 2, kMaxSleep);
}

}  // namespace bmad::parallel
