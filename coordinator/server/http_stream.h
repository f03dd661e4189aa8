// The channel between one HTTP request's handler thread and the coordinator's event loop: the
// loop pushes events (accepted or refused, token chunks, the end), the handler blocks on them
// with a timeout. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>

#include "common/proto/messages.h"
#include "common/status.h"

namespace bmad::coord {

struct StreamEvent {
  enum class Kind { kAccepted, kChunk, kError } kind = Kind::kChunk;
  proto::TokenChunk chunk;      // kChunk
  Status status;                // kError
  uint32_t prompt_tokens = 0;   // kAccepted
  uint64_t request_id = 0;      // kAccepted
  uint32_t retry_after_ms = 0;  // kError (overloaded)
};

class HttpStream {
 public:
  void Push(StreamEvent event) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      events_.push_back(std::move(event));
    }
    cv_.notify_one();
  }
  // The next event, or nullopt when `timeout` passes first.
  std::optional<StreamEvent> Pop(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return std::nullopt;
    StreamEvent e = std::move(events_.front());
    events_.pop_front();
    return e;
  }
  // The HTTP client went away (or the handler gave up): the event loop cancels the request.
  void MarkAbandoned() { abandoned_.store(true); }
  bool abandoned() const { return abandoned_.load(); }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<StreamEvent> events_;
  std::atomic<bool> abandoned_{false};
};

}  // namespace bmad::coord
