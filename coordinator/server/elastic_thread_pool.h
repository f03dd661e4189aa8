// The HTTP front door's task queue: a thread per open connection, started when a connection
// finds none idle, up to a cap.
//
// httplib serves each connection on one pool thread for the connection's whole life, and a
// streaming completion holds it for minutes. Its own ThreadPool starts a fixed number of threads
// up front; past that number every new connection waits in an unbounded queue, unseen by the
// coordinator's admission control (no 429) and in front of /health and /ready. This pool grows
// instead, so the admission bound (coordinator.max_queued_per_priority per class), not the
// thread count, is what refuses work; only past `max_threads` connections do they queue.
// Threads stay once started (a burst's peak); they idle in a condition wait.
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace bmad::coord {

class ElasticThreadPool final : public httplib::TaskQueue {
 public:
  explicit ElasticThreadPool(size_t max_threads);
  ~ElasticThreadPool() override;

  ElasticThreadPool(const ElasticThreadPool&) = delete;
  ElasticThreadPool& operator=(const ElasticThreadPool&) = delete;

  // Runs `task` on an idle thread, on a new one if none is idle and fewer than max_threads
  // exist, else when a thread frees up.
  void enqueue(std::function<void()> task) override;
  // Runs the tasks already queued, then joins every thread. Idempotent.
  void shutdown() override;

  size_t threads() const;
  size_t idle() const;  // threads waiting for a task
  size_t queued() const;

 private:
  void Work();

  const size_t max_threads_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;  // threads waiting for a task, not yet handed one
  bool stopping_ = false;
};

}  // namespace bmad::coord
