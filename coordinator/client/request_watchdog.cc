#include "coordinator/client/request_watchdog.h"

namespace bmad::client {

uint64_t RequestWatchdog::Watch(Clock::time_point deadline, std::function<void()> stop) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = ++next_id_;
  watched_.emplace(id, Entry{deadline, std::move(stop)});
  return id;
}

void RequestWatchdog::Unwatch(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  watched_.erase(id);
}

int RequestWatchdog::StopOverdue(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  int stopped = 0;
  for (auto it = watched_.begin(); it != watched_.end();) {
    if (it->second.deadline > now) {
      ++it;
      continue;
    }
    it->second.stop();
    it = watched_.erase(it);  // stopped once; its owner's Unwatch then finds nothing
    ++stopped;
  }
  return stopped;
}

}  // namespace bmad::client
