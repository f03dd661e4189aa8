// The three communicators one rank of a replica needs, split from the world:
//   - replica: all tp × pp ranks of its replica, ordered by rank_in_replica (the leader is
//     rank 0): step plans are broadcast here;
//   - tp:      its stage's tp ranks, ordered by tp_rank: the all-reduces of tensor parallelism;
//   - pp:      its tp_rank's line through the stages, ordered by stage: activations go from
//     pp rank s to s + 1.
#pragma once

#include <memory>

#include "common/status.h"
#include "worker/parallel/mpi_communicator.h"
#include "worker/parallel/topology.h"

namespace bmad::parallel {

struct ReplicaCommunicators {
  std::unique_ptr<MpiCommunicator> replica;
  std::unique_ptr<MpiCommunicator> tp;
  std::unique_ptr<MpiCommunicator> pp;
};

// Three MPI_Comm_splits of `world` (MpiCommunicator::Split: bounded, collective over the
// world, so every world rank calls this with its own topology of the same shape). The new
// communicators inherit world's timeout and metrics. kInvalidArgument when `topology` was made
// for another world size or rank; kInternal if a group came out with an unexpected rank or
// size (a bug).
Result<ReplicaCommunicators> BuildReplicaCommunicators(MpiCommunicator& world,
                                                       const ReplicaTopology& topology);

}  // namespace bmad::parallel
