// Ends HTTP requests that outlive their deadline. httplib's timeouts bound each connect and
// each read, not a whole request: a server that trickles a byte just inside every read timeout
// would otherwise keep a request alive forever. The load generator's main thread calls
// StopOverdue() a few times a second; each request registers how to stop itself.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <vector>

namespace bmad::client {

class RequestWatchdog {
 public:
  using Clock = std::chrono::steady_clock;

  // `stop` must be safe to call from another thread while the request runs (httplib's
  // Client::stop() is); it is called at most once, and never after Unwatch(id) returned.
  uint64_t Watch(Clock::time_point deadline, std::function<void()> stop);
  void Unwatch(uint64_t id);
  // Calls `stop` for every watched request whose deadline has passed; returns how many.
  int StopOverdue(Clock::time_point now = Clock::now());

 private:
  struct Entry {
    Clock::time_point deadline;
    std::function<void()> stop;
  };
  std::mutex mu_;  // not held while a `stop` runs: httplib's Client::stop() waits for a
                   // connect in progress, which would hold up every other request's Watch
  std::condition_variable stopped_;  // a `stop` call returned
  std::map<uint64_t, Entry> watched_;
  std::set<uint64_t> stopping_;  // ids whose `stop` is running; Unwatch waits for them
  uint64_t next_id_ = 0;
};

// Registers on construction, unregisters on destruction (null watchdog: does nothing).
class WatchdogRegistration {
 public:
  WatchdogRegistration(RequestWatchdog* watchdog, RequestWatchdog::Clock::time_point deadline,
                       std::function<void()> stop)
      : watchdog_(watchdog), id_(watchdog ? watchdog->Watch(deadline, std::move(stop)) : 0) {}
  ~WatchdogRegistration() {
    if (watchdog_) watchdog_->Unwatch(id_);
  }
  WatchdogRegistration(const WatchdogRegistration&) = delete;
  WatchdogRegistration& operator=(const WatchdogRegistration&) = delete;

 private:
  RequestWatchdog* watchdog_;
  uint64_t id_;
};

}  // namespace bmad::client
