#include "worker/parallel/replica_communicators.h"

#include <string>

namespace bmad::parallel {
namespace {

Status CheckShape(const MpiCommunicator& comm, int expected_rank, int expected_size) {
  if (comm.rank() == expected_rank && comm.size() == expected_size) return Status::Ok();
  return Internal(comm.name() + ": rank " + std::to_string(comm.rank()) + " of " +
                  std::to_string(comm.size()) + ", expected rank " +
                  std::to_string(expected_rank) + " of " + std::to_string(expected_size));
}

}  // namespace

Result<ReplicaCommunicators> BuildReplicaCommunicators(MpiCommunicator& world,
                                                       const ReplicaTopology& topology) {
  if (world.size() != topology.world_size() || world.rank() != topology.world_rank()) {
    return InvalidArgument("the topology is for world rank " +
                           std::to_string(topology.world_rank()) + " of " +
                           std::to_string(topology.world_size()) + ", but this is rank " +
                           std::to_string(world.rank()) + " of " + std::to_string(world.size()));
  }
  const std::string replica = "replica " + std::to_string(topology.replica());
  // Colours are unique per group across the whole world: a replica has pp tp groups and tp
  // pp lines.
  const int tp_color = topology.replica() * topology.pp() + topology.stage();
  const int pp_color = topology.replica() * topology.tp() + topology.tp_rank();

  ReplicaCommunicators comms;
  BMAD_ASSIGN_OR_RETURN(comms.replica,
                        world.Split(topology.replica(), topology.rank_in_replica(), replica));
  BMAD_ASSIGN_OR_RETURN(
      comms.tp, world.Split(tp_color, topology.tp_rank(),
                            "tp group (" + replica + ", stage " +
                                std::to_string(topology.stage()) + ")"));
  BMAD_ASSIGN_OR_RETURN(
      comms.pp, world.Split(pp_color, topology.stage(),
                            "pp line (" + replica + ", tp rank " +
                                std::to_string(topology.tp_rank()) + ")"));
  BMAD_RETURN_IF_ERROR(
      CheckShape(*comms.replica, topology.rank_in_replica(), topology.ranks_per_replica()));
  BMAD_RETURN_IF_ERROR(CheckShape(*comms.tp, topology.tp_rank(), topology.tp()));
  BMAD_RETURN_IF_ERROR(CheckShape(*comms.pp, topology.stage(), topology.pp()));
  return comms;
}

}  // namespace bmad::parallel
