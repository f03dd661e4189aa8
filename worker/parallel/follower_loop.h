// The life of a replica rank other than the leader: wait for the next step plan (bounded by the
// replica communicator's timeout, which the leader's keepalives beat while it is idle), rebuild
// the step from the plan, compute this rank's shard of it, repeat; return on a shutdown plan.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "worker/parallel/communicator.h"
#include "worker/parallel/shard_step_runner.h"
#include "worker/parallel/watchdog.h"

namespace bmad::parallel {

struct FollowerResult {
  uint64_t steps = 0;  // steps computed
  std::string reason;  // the leader's reason for the shutdown
};

// OK after a shutdown plan. Otherwise the error that ended it: the leader went silent
// (kDeadlineExceeded naming the broadcast and the timeout), a peer failed, or a malformed plan.
// `watchdog` may be null.
Result<FollowerResult> RunFollower(Communicator& replica, ShardStepRunner& runner,
                                   Watchdog* watchdog);

}  // namespace bmad::parallel
