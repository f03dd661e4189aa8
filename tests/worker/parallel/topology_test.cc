#include "worker/parallel/topology.h"

#include <algorithm>
#include <set>
#include <tuple>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace bmad::parallel {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ReplicaTopology Make(int rank, int world, int tp, int pp) {
  auto topology = ReplicaTopology::Create(rank, world, tp, pp);
  EXPECT_TRUE(topology.ok()) << topology.status().ToString();
  return *topology;
}

TEST(ReplicaTopologyTest, SingleRankIsItsOwnLeader) {
  const ReplicaTopology t = Make(0, 1, 1, 1);
  EXPECT_EQ(t.num_replicas(), 1);
  EXPECT_EQ(t.replica(), 0);
  EXPECT_EQ(t.stage(), 0);
  EXPECT_EQ(t.tp_rank(), 0);
  EXPECT_TRUE(t.is_leader());
  EXPECT_TRUE(t.is_first_stage());
  EXPECT_TRUE(t.is_last_stage());
  EXPECT_EQ(t.leader_world_rank(), 0);
  EXPECT_FALSE(t.prev_stage_world_rank().has_value());
  EXPECT_FALSE(t.next_stage_world_rank().has_value());
  EXPECT_THAT(t.replica_world_ranks(), ElementsAre(0));
  EXPECT_THAT(t.tp_group_world_ranks(), ElementsAre(0));
  EXPECT_THAT(t.pp_line_world_ranks(), ElementsAre(0));
}

TEST(ReplicaTopologyTest, TwoByTwoLaysStagesOutContiguously) {
  // rank_in_replica = stage * tp + tp_rank: ranks 0,1 are stage 0; ranks 2,3 are stage 1.
  const std::vector<std::tuple<int, int, int>> expected = {{0, 0, 0}, {1, 0, 1}, {2, 1, 0},
                                                           {3, 1, 1}};
  for (const auto& [rank, stage, tp_rank] : expected) {
    const ReplicaTopology t = Make(rank, 4, 2, 2);
    EXPECT_EQ(t.stage(), stage) << rank;
    EXPECT_EQ(t.tp_rank(), tp_rank) << rank;
    EXPECT_EQ(t.is_leader(), rank == 0) << rank;
    EXPECT_EQ(t.leader_world_rank(), 0);
  }
  const ReplicaTopology r3 = Make(3, 4, 2, 2);
  EXPECT_THAT(r3.tp_group_world_ranks(), ElementsAre(2, 3));
  EXPECT_THAT(r3.pp_line_world_ranks(), ElementsAre(1, 3));
  EXPECT_THAT(r3.replica_world_ranks(), ElementsAre(0, 1, 2, 3));
  EXPECT_EQ(r3.prev_stage_world_rank(), 1);
  EXPECT_FALSE(r3.next_stage_world_rank().has_value());
  const ReplicaTopology r0 = Make(0, 4, 2, 2);
  EXPECT_EQ(r0.next_stage_world_rank(), 2);
  EXPECT_FALSE(r0.prev_stage_world_rank().has_value());
}

TEST(ReplicaTopologyTest, SecondReplicaStartsAfterTheFirst) {
  // Two replicas of tp 2 x pp 3 in a world of 12: replica 1 is world ranks 6..11.
  const ReplicaTopology t = Make(9, 12, 2, 3);
  EXPECT_EQ(t.num_replicas(), 2);
  EXPECT_EQ(t.replica(), 1);
  EXPECT_EQ(t.rank_in_replica(), 3);
  EXPECT_EQ(t.stage(), 1);
  EXPECT_EQ(t.tp_rank(), 1);
  EXPECT_FALSE(t.is_leader());
  EXPECT_EQ(t.leader_world_rank(), 6);
  EXPECT_EQ(t.prev_stage_world_rank(), 7);
  EXPECT_EQ(t.next_stage_world_rank(), 11);
  EXPECT_THAT(t.tp_group_world_ranks(), ElementsAre(8, 9));
  EXPECT_THAT(t.pp_line_world_ranks(), ElementsAre(7, 9, 11));
  EXPECT_EQ(t.WorldRankOf(2, 0), 10);
  EXPECT_THAT(t.ToString(), HasSubstr("replica 1 stage 1 tp 1"));
}

// Every rank of every shape: the mapping is a bijection, groups partition the replica
// consistently, and neighbours agree with each other.
TEST(ReplicaTopologyTest, EveryShapeIsConsistent) {
  for (int tp = 1; tp <= 4; ++tp) {
    for (int pp = 1; pp <= 4; ++pp) {
      for (int replicas = 1; replicas <= 3; ++replicas) {
        const int world = tp * pp * replicas;
        std::set<std::tuple<int, int, int>> seen;
        for (int rank = 0; rank < world; ++rank) {
          SCOPED_TRACE(::testing::Message() << "tp " << tp << " pp " << pp << " rank " << rank
                                          << " of " << world);
          const ReplicaTopology t = Make(rank, world, tp, pp);
          EXPECT_EQ(t.num_replicas(), replicas);
          EXPECT_TRUE(seen.insert({t.replica(), t.stage(), t.tp_rank()}).second);
          EXPECT_EQ(t.WorldRankOf(t.stage(), t.tp_rank()), rank);
          EXPECT_EQ(t.rank_in_replica(), t.stage() * tp + t.tp_rank());
          EXPECT_EQ(t.is_leader(), t.stage() == 0 && t.tp_rank() == 0);
          EXPECT_EQ(t.leader_world_rank(), t.replica() * tp * pp);

          const auto replica_ranks = t.replica_world_ranks();
          ASSERT_EQ(static_cast<int>(replica_ranks.size()), tp * pp);
          EXPECT_EQ(replica_ranks[static_cast<size_t>(t.rank_in_replica())], rank);
          const auto tp_ranks = t.tp_group_world_ranks();
          ASSERT_EQ(static_cast<int>(tp_ranks.size()), tp);
          EXPECT_EQ(tp_ranks[static_cast<size_t>(t.tp_rank())], rank);
          EXPECT_EQ(tp_ranks.back() - tp_ranks.front(), tp - 1) << "a stage is contiguous";
          const auto pp_ranks = t.pp_line_world_ranks();
          ASSERT_EQ(static_cast<int>(pp_ranks.size()), pp);
          EXPECT_EQ(pp_ranks[static_cast<size_t>(t.stage())], rank);
          for (int r : pp_ranks) {
            const ReplicaTopology other = Make(r, world, tp, pp);
            EXPECT_EQ(other.tp_rank(), t.tp_rank());
            EXPECT_EQ(other.replica(), t.replica());
          }

          if (auto next = t.next_stage_world_rank()) {
            const ReplicaTopology n = Make(*next, world, tp, pp);
            EXPECT_EQ(n.stage(), t.stage() + 1);
            EXPECT_EQ(n.tp_rank(), t.tp_rank());
            EXPECT_EQ(n.prev_stage_world_rank(), rank);
          } else {
            EXPECT_TRUE(t.is_last_stage());
          }
          EXPECT_EQ(t.prev_stage_world_rank().has_value(), !t.is_first_stage());
        }
        EXPECT_EQ(static_cast<int>(seen.size()), world);
      }
    }
  }
}

TEST(ReplicaTopologyTest, WorldNotAMultipleOfTheReplicaNamesAllThree) {
  auto t = ReplicaTopology::Create(0, 6, 4, 1);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("world size 6"));
  EXPECT_THAT(t.status().message(), HasSubstr("tp 4"));
  EXPECT_THAT(t.status().message(), HasSubstr("pp 1"));
  EXPECT_THAT(t.status().message(), HasSubstr("mpirun -np 4"));  // how to start it instead

  auto u = ReplicaTopology::Create(3, 4, 3, 2);
  ASSERT_FALSE(u.ok());
  EXPECT_THAT(u.status().message(), HasSubstr("world size 4"));
  EXPECT_THAT(u.status().message(), HasSubstr("tp 3"));
  EXPECT_THAT(u.status().message(), HasSubstr("pp 2"));
}

TEST(ReplicaTopologyTest, RejectsBadShapesAndRanks) {
  const std::vector<std::tuple<int, int, int, int>> bad = {
      {0, 4, 0, 1},   // tp 0
      {0, 4, 2, -1},  // pp negative
      {0, 0, 1, 1},   // empty world
      {4, 4, 2, 2},   // rank past the end
      {-1, 4, 2, 2},  // negative rank
      {0, 2, 4, 1},   // replica larger than the world
  };
  for (const auto& [rank, world, tp, pp] : bad) {
    auto t = ReplicaTopology::Create(rank, world, tp, pp);
    ASSERT_FALSE(t.ok()) << rank << " " << world << " " << tp << " " << pp;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(ReplicaTopologyTest, HugeShapesDoNotOverflow) {
  auto t = ReplicaTopology::Create(0, 1 << 20, 1 << 16, 1 << 16);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("4294967296"));
}

}  // namespace
}  // namespace bmad::parallel
