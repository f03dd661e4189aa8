#include "coordinator/server/tokenizer_thread.h"

namespace bmad::coord {

TokenizerThread::TokenizerThread(const tokenizer::Tokenizer& tokenizer, Done done,
                                 std::function<void()> before_each)
    : tokenizer_(tokenizer),
      done_(std::move(done)),
      before_each_(std::move(before_each)),
      thread_([this] { Loop(); }) {}

TokenizerThread::~TokenizerThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  ready_.notify_all();
  thread_.join();
}

void TokenizerThread::Submit(uint64_t job, std::string text) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(Job{job, std::move(text)});
  }
  ready_.notify_one();
}

void TokenizerThread::Loop() {
  while (true) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      if (stop_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    if (before_each_) before_each_();
    const std::vector<int32_t> ids = tokenizer_.Encode(job.text);
    done_(job.id, std::vector<uint32_t>(ids.begin(), ids.end()));
  }
}

}  // namespace bmad::coord
