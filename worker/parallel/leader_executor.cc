#include "worker/parallel/leader_executor.h"

#include "worker/parallel/step_in_flight.h"

namespace bmad::parallel {

LeaderExecutor::LeaderExecutor(Communicator& replica, ShardStepRunner& runner, Watchdog* watchdog)
    : replica_(replica), runner_(runner), watchdog_(watchdog) {}

Status LeaderExecutor::Broadcast(const StepPlan& plan) {
  bytes_ = EncodeStepPlan(plan);
  return replica_.BroadcastString(&bytes_, 0);
}

Status LeaderExecutor::Execute(std::span<const model::SequenceStep> steps,
                               std::span<const uint64_t> ids, float* logits) {
  const StepPlan plan = builder_.Build(steps, ids);
  StepInFlightScope in_flight;
  if (watchdog_) watchdog_->Arm(plan.step_id);
  Status s = Broadcast(plan);
  if (s.ok()) s = runner_.Run(steps, logits);
  if (watchdog_) watchdog_->Disarm();
  return s;
}

Status LeaderExecutor::Keepalive() {
  StepPlan plan;
  plan.kind = StepPlan::Kind::kKeepalive;
  BMAD_RETURN_IF_ERROR(Broadcast(plan));
  // A broadcast this small completes without its receivers (MPI sends it eagerly): the barrier
  // is what finds a rank that hangs while the replica is idle, within the communicator's
  // timeout, instead of at the next request's step.
  return replica_.Barrier().WithContext("keepalive: waiting for every rank of the replica");
}

Status LeaderExecutor::Shutdown(const std::string& reason) {
  StepPlan plan;
  plan.kind = StepPlan::Kind::kShutdown;
  plan.reason = reason;
  return Broadcast(plan);
}

}  // namespace bmad::parallel
