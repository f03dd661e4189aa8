// The engine's executor on a replica leader: each step goes to every rank of the replica as a
// step plan (a delta, step_plan.h) over the replica communicator, then the leader computes its
// own shard (ShardStepRunner) and ends with the step's logits. The watchdog times each step.
//
// When the replica is idle the leader sends keepalive plans, so the other ranks, waiting for the
// next plan with a bounded wait, can tell an idle leader from a dead one, and each ends in a
// barrier, so the leader can tell an idle rank from a hung one; when it stops it sends a
// shutdown plan, so they exit cleanly.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "worker/engine/step_executor.h"
#include "worker/parallel/communicator.h"
#include "worker/parallel/shard_step_runner.h"
#include "worker/parallel/step_plan.h"
#include "worker/parallel/watchdog.h"

namespace bmad::parallel {

class LeaderExecutor : public engine::StepExecutor {
 public:
  // `watchdog` may be null (tests). None are owned.
  LeaderExecutor(Communicator& replica, ShardStepRunner& runner, Watchdog* watchdog);

  Status Execute(std::span<const model::SequenceStep> steps, std::span<const uint64_t> ids,
                 float* logits) override;
  void Release(uint64_t id) override { builder_.Release(id); }

  // Tells the ranks the leader is alive though idle, and waits for every one to answer (a
  // barrier, bounded by the communicator's timeout: an error names a rank that hangs).
  Status Keepalive();
  // Tells the ranks to exit (they return OK from RunFollower).
  Status Shutdown(const std::string& reason);

  const StepPlanBuilder& builder() const { return builder_; }

 private:
  Status Broadcast(const StepPlan& plan);

  Communicator& replica_;
  ShardStepRunner& runner_;
  Watchdog* watchdog_;
  StepPlanBuilder builder_;
  std::string bytes_;
};

}  // namespace bmad::parallel
