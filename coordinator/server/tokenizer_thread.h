// Tokenizes the socket door's text prompts on a thread of its own, so that a long prompt (a
// hundred kilobytes take tens of milliseconds) never stalls the event loop, which meanwhile keeps
// streaming every other request's tokens. (The HTTP door tokenizes on each request's handler
// thread.) Jobs run one at a time in the order given; each result goes to `done` on this thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "worker/model/tokenizer/tokenizer.h"

namespace bmad::coord {

class TokenizerThread {
 public:
  using Done = std::function<void(uint64_t job, std::vector<uint32_t> tokens)>;
  // `before_each` (tests): called on the thread before each job is tokenized.
  TokenizerThread(const tokenizer::Tokenizer& tokenizer, Done done,
                  std::function<void()> before_each = {});
  // Finishes the job in hand and drops the rest (their owner is going away).
  ~TokenizerThread();
  TokenizerThread(const TokenizerThread&) = delete;
  TokenizerThread& operator=(const TokenizerThread&) = delete;

  void Submit(uint64_t job, std::string text);

 private:
  struct Job {
    uint64_t id = 0;
    std::string text;
  };
  void Loop();

  const tokenizer::Tokenizer& tokenizer_;
  Done done_;
  std::function<void()> before_each_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Job> jobs_;
  bool stop_ = false;
  std::thread thread_;  // last: starts once everything above exists
};

}  // namespace bmad::coord
