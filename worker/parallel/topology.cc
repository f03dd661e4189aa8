#include "worker/parallel/topology.h"

#include <cassert>
#include <cstdint>

namespace bmad::parallel {

Result<ReplicaTopology> ReplicaTopology::Create(int world_rank, int world_size, int tp, int pp) {
  if (tp < 1 || pp < 1) {
    return InvalidArgument("tp and pp must be at least 1 (got tp " + std::to_string(tp) +
                           ", pp " + std::to_string(pp) + ")");
  }
  if (world_size < 1) {
    return InvalidArgument("world size must be at least 1 (got " + std::to_string(world_size) +
                           ")");
  }
  const int64_t per_replica = int64_t{tp} * pp;
  if (world_size % per_replica != 0) {
    return InvalidArgument("world size " + std::to_string(world_size) +
                           " is not a multiple of tp " + std::to_string(tp) + " x pp " +
                           std::to_string(pp) + " = " + std::to_string(per_replica) +
                           " ranks per replica (start the worker with mpirun -np " +
                           std::to_string(per_replica) + ", or a multiple for several replicas)");
  }
  if (world_rank < 0 || world_rank >= world_size) {
    return InvalidArgument("world rank " + std::to_string(world_rank) + " is outside [0, " +
                           std::to_string(world_size) + ")");
  }
  return ReplicaTopology(world_rank, world_size, tp, pp);
}

int ReplicaTopology::WorldRankOf(int stage, int tp_rank) const {
  assert(stage >= 0 && stage < pp_ && tp_rank >= 0 && tp_rank < tp_);
  return replica() * ranks_per_replica() + stage * tp_ + tp_rank;
}

std::optional<int> ReplicaTopology::prev_stage_world_rank() const {
  if (is_first_stage()) return std::nullopt;
  return WorldRankOf(stage() - 1, tp_rank());
}

std::optional<int> ReplicaTopology::next_stage_world_rank() const {
  if (is_last_stage()) return std::nullopt;
  return WorldRankOf(stage() + 1, tp_rank());
}

std::vector<int> ReplicaTopology::replica_world_ranks() const {
  std::vector<int> ranks;
  for (int s = 0; s < pp_; ++s) {
    for (int t = 0; t < tp_; ++t) ranks.push_back(WorldRankOf(s, t));
  }
  return ranks;
}

std::vector<int> ReplicaTopology::tp_group_world_ranks() const {
  std::vector<int> ranks;
  for (int t = 0; t < tp_; ++t) ranks.push_back(WorldRankOf(stage(), t));
  return ranks;
}

std::vector<int> ReplicaTopology::pp_line_world_ranks() const {
  std::vector<int> ranks;
  for (int s = 0; s < pp_; ++s) ranks.push_back(WorldRankOf(s, tp_rank()));
  return ranks;
}

std::string ReplicaTopology::ToString() const {
  return "replica " + std::to_string(replica()) + " stage " + std::to_string(stage()) + " tp " +
         std::to_string(tp_rank()) + " (world rank " + std::to_string(world_rank_) + " of " +
         std::to_string(world_size_) + ", tp " + std::to_string(tp_) + " x pp " +
         std::to_string(pp_) + ")";
}

}  // namespace bmad::parallel
