#include "worker/parallel/watchdog.h"

#include <unistd.h>

#include <memory>
#include <utility>

#include "common/log.h"

namespace bmad::parallel {
namespace {

// Runs `callback` on a detached thread and waits for it at most `grace`. Detached, because a
// callback stuck in a network call must not keep the process alive: _exit ends it anyway.
void RunWithGrace(const std::function<void()>& callback, std::chrono::milliseconds grace) {
  struct Done {
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false;
  };
  auto state = std::make_shared<Done>();
  std::thread([callback, state] {
    try {
      callback();
    } catch (...) {
      // Best effort: the process is about to end either way.
    }
    std::lock_guard lock(state->mutex);
    state->done = true;
    state->cv.notify_all();
  }).detach();
  std::unique_lock lock(state->mutex);
  state->cv.wait_for(lock, grace, [&] { return state->done; });
}

}  // namespace

Watchdog::Watchdog(Options options) : options_(std::move(options)) {
  if (!options_.exit) options_.exit = [](int status) { ::_exit(status); };
  thread_ = std::thread([this] { Run(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void Watchdog::Arm(uint64_t step_id) {
  {
    std::lock_guard lock(mutex_);
    armed_ = true;
    step_id_ = step_id;
    armed_at_ = std::chrono::steady_clock::now();
    ++generation_;
  }
  changed_.notify_all();
}

void Watchdog::Disarm() {
  {
    std::lock_guard lock(mutex_);
    if (!armed_) return;
    armed_ = false;
    ++generation_;
  }
  changed_.notify_all();
}

int Watchdog::fire_count() const {
  std::lock_guard lock(mutex_);
  return fire_count_;
}

void Watchdog::Run() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (!armed_) {
      changed_.wait(lock, [&] { return stopping_ || armed_; });
      continue;
    }
    const uint64_t generation = generation_;
    const auto deadline = armed_at_ + options_.step_timeout;
    const bool changed = changed_.wait_until(
        lock, deadline, [&] { return stopping_ || generation_ != generation; });
    if (changed) continue;
    // Still the same step, and its time is up.
    armed_ = false;
    ++fire_count_;
    const uint64_t step_id = step_id_;
    lock.unlock();
    Fire(step_id);
    lock.lock();
  }
}

void Watchdog::Fire(uint64_t step_id) {
  log::Error("watchdog", "replica " + options_.replica_id + " rank " +
                             std::to_string(options_.rank) + ": step " + std::to_string(step_id) +
                             " did not finish within " +
                             std::to_string(options_.step_timeout.count()) +
                             " ms; a peer rank is hung or dead; exiting");
  if (options_.on_fire) RunWithGrace(options_.on_fire, options_.on_fire_grace);
  options_.exit(kExitCode);
}

}  // namespace bmad::parallel
