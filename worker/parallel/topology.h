// ReplicaTopology: where one MPI rank stands in its replica.
//
// The world (one mpirun job) holds world_size / (tp × pp) replicas of tp × pp ranks each, in
// order: replica i is world ranks [i·tp·pp, (i+1)·tp·pp). Inside a replica,
//     rank_in_replica = stage × tp + tp_rank,
// so each pipeline stage's tp ranks are contiguous (they all-reduce most often; on one host
// contiguous ranks share a socket or an NVLink island under mpirun's default by-slot mapping).
// The leader is stage 0, tp rank 0: it runs the scheduler and broadcasts each step's plan.
//
// Pure arithmetic: no MPI (replica_communicators.h builds the groups).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace bmad::parallel {

class ReplicaTopology {
 public:
  // kInvalidArgument when tp or pp is below 1, world_size below 1, world_rank outside
  // [0, world_size), or world_size not a multiple of tp × pp (the message names all three).
  static Result<ReplicaTopology> Create(int world_rank, int world_size, int tp, int pp);

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  int tp() const { return tp_; }
  int pp() const { return pp_; }
  int ranks_per_replica() const { return tp_ * pp_; }
  int num_replicas() const { return world_size_ / ranks_per_replica(); }

  int replica() const { return world_rank_ / ranks_per_replica(); }
  int rank_in_replica() const { return world_rank_ % ranks_per_replica(); }
  int stage() const { return rank_in_replica() / tp_; }
  int tp_rank() const { return rank_in_replica() % tp_; }

  bool is_leader() const { return rank_in_replica() == 0; }
  bool is_first_stage() const { return stage() == 0; }
  bool is_last_stage() const { return stage() == pp_ - 1; }

  // The world rank of (stage, tp_rank) in this rank's replica; both must be in range.
  int WorldRankOf(int stage, int tp_rank) const;
  int leader_world_rank() const { return WorldRankOf(0, 0); }
  // The same tp rank one stage before / after this one; none at the ends of the pipeline.
  std::optional<int> prev_stage_world_rank() const;
  std::optional<int> next_stage_world_rank() const;

  // World ranks, in the order of their rank inside each group:
  std::vector<int> replica_world_ranks() const;  // the whole replica, by rank_in_replica
  std::vector<int> tp_group_world_ranks() const;  // this stage, by tp_rank
  std::vector<int> pp_line_world_ranks() const;   // this tp_rank, by stage

  // "replica 1 stage 0 tp 1 (world rank 5 of 8, tp 2 x pp 2)"
  std::string ToString() const;

 private:
  ReplicaTopology(int world_rank, int world_size, int tp, int pp)
      : world_rank_(world_rank), world_size_(world_size), tp_(tp), pp_(pp) {}

  int world_rank_;
  int world_size_;
  int tp_;
  int pp_;
};

}  // namespace bmad::parallel
