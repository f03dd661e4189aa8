#include "coordinator/client/request_watchdog.h"

#include <utility>

namespace bmad::client {

uint64_t RequestWatchdog::Watch(Clock::time_point deadline, std::function<void()> stop) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = ++next_id_;
  watched_.emplace(id, Entry{deadline, std::move(stop)});
  return id;
}

void RequestWatchdog::Unwatch(uint64_t id) {
  std::unique_lock<std::mutex> lock(mu_);
  watched_.erase(id);
  // Its owner may destroy what `stop` uses once this returns.
  stopped_.wait(lock, [&] { return !stopping_.contains(id); });
}

int RequestWatchdog::StopOverdue(Clock::time_point now) {
  std::vector<std::pair<uint64_t, std::function<void()>>> overdue;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = watched_.begin(); it != watched_.end();) {
      if (it->second.deadline > now) {
        ++it;
        continue;
      }
      overdue.emplace_back(it->first, std::move(it->second.stop));
      stopping_.insert(it->first);
      it = watched_.erase(it);  // stopped once; its owner's Unwatch then waits for the stop
    }
  }
  for (auto& [id, stop] : overdue) {
    // Done, even if `stop` throws: its owner's Unwatch waits for this.
    struct Done {
      RequestWatchdog& w;
      uint64_t id;
      ~Done() {
        std::lock_guard<std::mutex> lock(w.mu_);
        w.stopping_.erase(id);
        w.stopped_.notify_all();
      }
    } done{*this, id};
    stop();
  }
  return static_cast<int>(overdue.size());
}

}  // namespace bmad::client
