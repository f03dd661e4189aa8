// Whether this rank is inside a step right now (between sending or receiving its plan and
// finishing its part), readable from a signal handler: SIGTERM during a step means the job is
// being torn down because a rank failed (mpirun signals the survivors), so the step's waits are
// aborted at once; SIGTERM between steps lets the leader stop its ranks cleanly.
#pragma once

#include <atomic>

namespace bmad::parallel {

inline std::atomic<bool>& StepInFlight() {
  static std::atomic<bool> in_flight{false};
  static_assert(std::atomic<bool>::is_always_lock_free, "read from a signal handler");
  return in_flight;
}

// Marks a scope as a step.
class StepInFlightScope {
 public:
  StepInFlightScope() { StepInFlight().store(true); }
  ~StepInFlightScope() { StepInFlight().store(false); }
  StepInFlightScope(const StepInFlightScope&) = delete;
  StepInFlightScope& operator=(const StepInFlightScope&) = delete;
};

}  // namespace bmad::parallel
