#include "coordinator/server/elastic_thread_pool.h"

#include <algorithm>

namespace bmad::coord {

ElasticThreadPool::ElasticThreadPool(size_t max_threads) : max_threads_(std::max<size_t>(1, max_threads)) {}

ElasticThreadPool::~ElasticThreadPool() { shutdown(); }

void ElasticThreadPool::enqueue(std::function<void()> task) {
  std::lock_guard<std::mutex> lock(mutex_);
  tasks_.push_back(std::move(task));
  // Every queued task beyond the idle threads needs a thread of its own: counting only idle_
  // would start too few when several connections arrive before any idle thread wakes.
  if (tasks_.size() > idle_ && threads_.size() < max_threads_ && !stopping_) {
    threads_.emplace_back([this] { Work(); });
  } else {
    wake_.notify_one();
  }
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
