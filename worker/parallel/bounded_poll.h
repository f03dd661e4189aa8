// Waiting for other processes without hanging and without hogging a core.
//
// Every wait in this library is a loop that asks "done yet?" (MPI_Test, cudaStreamQuery) until
// the answer is yes, the deadline passes, or the process-wide abort flag is raised. Between
// polls it backs off: a short spin (most collectives between balanced ranks finish within
// microseconds), then yields, then sleeps in growing steps up to a millisecond, so a rank whose
// peers are still computing gives its core to them. That matters when ranks share cores (the
// tests run 4 ranks on 2), and costs at most about a millisecond of latency on a long wait.
#pragma once

#include <chrono>
#include <cstdint>

#include "common/status.h"
#include "worker/parallel/abort_flag.h"

namespace bmad::parallel {

using SteadyClock = std::chrono::steady_clock;

// When a wait must end, and the timeout it was computed from (for error messages).
struct Deadline {
  SteadyClock::time_point at;
  std::chrono::milliseconds timeout{0};

  // Now plus `timeout` (a negative timeout counts as zero; one beyond the clock's range, such as
  // milliseconds::max(), never passes).
  static Deadline After(std::chrono::milliseconds timeout);
  bool Passed() const { return SteadyClock::now() >= at; }
};

enum class PollOutcome { kDone, kTimedOut, kAborted };

// The pause between two polls of one wait; each call waits a little longer than the last.
class PollBackoff {
 public:
  // Pure spinning this long after the wait starts, then sched_yield() until kYieldFor...
  static constexpr std::chrono::microseconds kSpinFor{20};
  static constexpr std::chrono::microseconds kYieldFor{200};
  // ...then sleeps that start here and double up to the maximum.
  static constexpr std::chrono::microseconds kFirstSleep{20};
  static constexpr std::chrono::microseconds kMaxSleep{1000};

  PollBackoff() : start_(SteadyClock::now()) {}
  void Pause();

 private:
  SteadyClock::time_point start_;
  std::chrono::microseconds next_sleep_ = kFirstSleep;
};

// Calls `poll` (a callable returning Result<bool>: true when done) until it returns true or an
// error, `deadline` passes, or AbortRequested(). Returns the poll's error, else the outcome.
// The poll runs at least once, so work that is already complete is reported as done even when
// the deadline has passed or the flag is up.
template <typename Poll>
Result<PollOutcome> PollUntil(Poll&& poll, const Deadline& deadline) {
  PollBackoff backoff;
  while (true) {
    Result<bool> done = poll();
    if (!done.ok()) return done.status();
    if (*done) return PollOutcome::kDone;
    if (AbortRequested()) return PollOutcome::kAborted;
    if (deadline.Passed()) return PollOutcome::kTimedOut;
    backoff.Pause();
  }
}

}  // namespace bmad::parallel
