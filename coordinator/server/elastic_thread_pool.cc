#include "coordinator/server/elastic_thread_pool.h"

#include <algorithm>
#include <system_error>

namespace bmad::coord {

ElasticThreadPool::ElasticThreadPool(size_t max_threads) : max_threads_(std::max<size_t>(1, max_threads)) {}

ElasticThreadPool::~ElasticThreadPool() { shutdown(); }

void ElasticThreadPool::enqueue(std::function<void()> task) {
  std::unique_lock<std::mutex> lock(mutex_);
  tasks_.push_back(std::move(task));
  // Every queued task beyond the idle threads needs a thread of its own: counting only idle_
  // would start too few when several connections arrive before any idle thread wakes.
  if (tasks_.size() > idle_ && threads_.size() < max_threads_ && !stopping_) {
    try {
      threads_.emplace_back([this] { Work(); });
      return;
    } catch (const std::system_error&) {
      // The system refused a thread (a pids or process limit). With threads, the task waits for
      // one of them, as past the cap; with none, it runs here, on httplib's accept thread,
      // rather than never (its connection would stay open, unanswered).
      if (threads_.empty()) {
        std::function<void()> now = std::move(tasks_.back());
        tasks_.pop_back();
        lock.unlock();
        now();
        return;
      }
    }
  }
  wake_.notify_one();
}

void ElasticThreadPool::shutdown() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    threads.swap(threads_);
  }
  wake_.notify_all();
  for (std::thread& t : threads) t.join();
}

size_t ElasticThreadPool::threads() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return threads_.size();
}

size_t ElasticThreadPool::idle() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return idle_;
}

size_t ElasticThreadPool::queued() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return tasks_.size();
}

void ElasticThreadPool::Work() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    ++idle_;
    wake_.wait(lock, [this] { return !tasks_.empty() || stopping_; });
    --idle_;
    if (tasks_.empty()) return;  // stopping, and nothing left to run
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    task();
    lock.lock();
  }
}

}  // namespace bmad::coord
