#include "worker/parallel/follower_loop.h"

#include <vector>

#include "worker/parallel/step_in_flight.h"
#include "worker/parallel/step_plan.h"

namespace bmad::parallel {

Result<FollowerResult> RunFollower(Communicator& replica, ShardStepRunner& runner,
                                   Watchdog* watchdog) {
  FollowerResult result;
  StepPlanMirror mirror;
  std::vector<model::SequenceStep> steps;
  std::string bytes;
  while (true) {
    BMAD_RETURN_IF_ERROR(replica.BroadcastString(&bytes, 0).WithContext("waiting for the leader's next step"));
    BMAD_ASSIGN_OR_RETURN(StepPlan plan, DecodeStepPlan(bytes));
    if (plan.kind == StepPlan::Kind::kShutdown) {
      result.reason = plan.reason;
      return result;
    }
    if (plan.kind == StepPlan::Kind::kKeepalive) {
      BMAD_RETURN_IF_ERROR(replica.Barrier().WithContext("keepalive"));  // the leader's, answered
      continue;
    }
    BMAD_RETURN_IF_ERROR(mirror.Apply(plan, &steps));
    Status s;
    {
      StepInFlightScope in_flight;
      if (watchdog) watchdog->Arm(plan.step_id);
      s = runner.Run(steps, nullptr);
      if (watchdog) watchdog->Disarm();
    }
    // A malformed step fails on every rank alike (they validate the same plan) and the leader
    // fails its requests and goes on; anything else ends this rank.
    if (!s.ok() && s.code() != StatusCode::kInvalidArgument && s.code() != StatusCode::kOutOfRange) {
      return s.WithContext("step " + std::to_string(plan.step_id));
    }
    ++result.steps;
  }
}

}  // namespace bmad::parallel
