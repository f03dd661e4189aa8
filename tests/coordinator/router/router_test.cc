// The router against fake replicas: hand-built views with chosen loads, pools and liveness.
#include "coordinator/router/router.h"

#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/clock.h"
#include "coordinator/router/replica_registry.h"

namespace bmad::coord {
namespace {

constexpr ReplicaPool kNormal = ReplicaPool::kNormal;
constexpr ReplicaPool kLongTail = ReplicaPool::kLongTail;

ReplicaView Replica(std::string id, ReplicaPool pool = kNormal) {
  ReplicaView v;
  v.id = std::move(id);
  v.pool = pool;
  v.live = true;
  v.max_seqs = 10;
  v.kv_blocks = 1000;
  v.load.max_seqs = 10;
  return v;
}

// Balancing only: no pools, no affinity.
RouterConfig Plain(RouterPolicy policy) {
  RouterConfig c;
  c.policy = policy;
  c.long_tail = false;
  c.prefix_affinity = false;
  return c;
}

// Counts of Pick's choices over `n` requests of `prompt_tokens` (no Record).
std::vector<int> Histogram(Router& router, const std::vector<ReplicaView>& views, int n,
                           int64_t prompt_tokens = 10) {
  std::vector<int> counts(views.size(), 0);
  for (int i = 0; i < n; ++i) {
    Result<RouteDecision> d = router.Pick({prompt_tokens, {}}, views);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    if (d.ok()) ++counts[d->index];
  }
  return counts;
}

// Chained hashes of `blocks` blocks of 4 tokens whose contents start at `seed`.
std::vector<BlockHash> Prefix(int32_t seed, int blocks) {
  std::vector<int32_t> tokens(static_cast<size_t>(blocks) * 4);
  std::iota(tokens.begin(), tokens.end(), seed);
  return HashFullBlocks(tokens, 4);
}

TEST(RouterLoadTest, WeightsQueueMemoryAndUtilization) {
  Router router(Plain(RouterPolicy::kWeighted));
  ReplicaView r = Replica("a");
  r.in_flight = 3;
  r.load.running = 1;
  r.load.waiting = 1;
  r.load.kv_usage = 0.5f;
  r.load.utilization = 0.25f;
  // depth = max(in_flight 3, running + waiting 2) = 3 of max_seqs 10.
  EXPECT_NEAR(router.Load(r), 0.6 * 0.3 + 0.1 * 0.5 + 0.3 * 0.25, 1e-9);
  r.load.waiting = 8;  // the replica knows more than the coordinator's count
  EXPECT_NEAR(router.Load(r), 0.6 * 0.9 + 0.1 * 0.5 + 0.3 * 0.25, 1e-9);
}

TEST(RouterLoadTest, QueueTermGrowsPastFull) {
  Router router(Plain(RouterPolicy::kWeighted));
  ReplicaView full = Replica("full");
  full.load.running = 10;
  ReplicaView backlog = full;
  backlog.load.waiting = 90;
  EXPECT_NEAR(router.Load(full), 0.6, 1e-9);
  EXPECT_NEAR(router.Load(backlog), 6.0, 1e-9);  // a 10x backlog is not "just full"
}

TEST(RouterLoadTest, FreeMemoryIsNotLoad) {
  Router router(Plain(RouterPolicy::kWeighted));
  ReplicaView empty_cache = Replica("empty");
  empty_cache.load.kv_usage = 0.0f;
  ReplicaView full_cache = Replica("full");
  full_cache.load.kv_usage = 1.0f;
  EXPECT_EQ(router.Load(empty_cache), 0.0);
  EXPECT_GT(router.Load(full_cache), router.Load(empty_cache));
}

TEST(RouterLoadTest, GarbageStatsGiveFiniteLoadsAndWeights) {
  Router router(Plain(RouterPolicy::kWeighted));
  ReplicaView r = Replica("a");
  r.max_seqs = 0;
  r.load.max_seqs = 0;  // unit falls back to 1
  r.load.kv_usage = std::nanf("");
  r.load.utilization = std::numeric_limits<float>::infinity();
  r.load.running = std::numeric_limits<uint32_t>::max();
  r.load.waiting = std::numeric_limits<uint32_t>::max();
  const double load = router.Load(r);
  EXPECT_TRUE(std::isfinite(load));
  EXPECT_NEAR(load, 0.6 * 2.0 * std::numeric_limits<uint32_t>::max() + 0.1 + 0.3, 1.0);
  for (double min_load : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    const double w = router.Weight(r, min_load);
    EXPECT_TRUE(std::isfinite(w)) << min_load;
    EXPECT_GT(w, 0.0) << min_load;
    EXPECT_LE(w, 1.0) << min_load;
  }
}

TEST(RouterLoadTest, WeightIsSmoothedSharpenedInverseLoad) {
  Router router(Plain(RouterPolicy::kWeighted));
  const ReplicaView idle = Replica("idle");
  EXPECT_EQ(router.Weight(idle, 0.0), 1.0);  // no 0/0
  ReplicaView busy = Replica("busy");
  busy.in_flight = 5;  // load 0.3
  const double eps = Router::kLoadEpsilonFraction * 1.0;
  EXPECT_NEAR(router.Weight(busy, 0.0), std::pow(eps / (0.3 + eps), Router::kWeightSharpness), 1e-12);
  EXPECT_NEAR(router.Weight(busy, 0.3), 1.0, 1e-12);
}

TEST(RouterLoadTest, ScalingAllCoefficientsChangesNoWeight) {
  RouterConfig scaled = Plain(RouterPolicy::kWeighted);
  scaled.weight_queue *= 10;
  scaled.weight_memory *= 10;
  scaled.weight_utilization *= 10;
  Router base(Plain(RouterPolicy::kWeighted));
  Router times_ten(scaled);
  ReplicaView r = Replica("a");
  r.in_flight = 2;
  r.load.kv_usage = 0.4f;
  r.load.utilization = 0.7f;
  // Only the ratios count: the coefficients are scaled to sum to 1.
  EXPECT_NEAR(times_ten.Load(r), base.Load(r), 1e-12);
  EXPECT_NEAR(times_ten.Weight(r, 0.005), base.Weight(r, 0.005), 1e-12);
}

// The smallest coefficients the config takes (5e-324 is a valid double in [0, 1000]) once made
// the smoothing term underflow to 0: an idle cluster's weights were 0 / 0 and every pick went to
// the last replica.
TEST(RouterLoadTest, TinyCoefficientsKeepTheWeightsFinite) {
  RouterConfig c = Plain(RouterPolicy::kWeighted);
  c.weight_queue = 5e-324;
  c.weight_memory = 0.0;
  c.weight_utilization = 0.0;
  Router router(c, /*seed=*/3);
  const std::vector<ReplicaView> views = {Replica("a"), Replica("b"), Replica("c")};
  EXPECT_DOUBLE_EQ(router.Weight(views[0], 0.0), 1.0);
  const std::vector<int> counts = Histogram(router, views, 3000);
  for (int n : counts) EXPECT_GT(n, 800);
}

TEST(RouterLoadTest, AllZeroCoefficientsFallBackToQueueDepth) {
  RouterConfig c = Plain(RouterPolicy::kWeighted);
  c.weight_queue = c.weight_memory = c.weight_utilization = 0.0;
  Router router(c);
  ReplicaView r = Replica("a");
  r.in_flight = 5;
  r.load.kv_usage = 1.0f;
  EXPECT_NEAR(router.Load(r), 0.5, 1e-12);
}

TEST(RouterWeightedTest, DistributionMatchesTheWeights) {
  Router router(Plain(RouterPolicy::kWeighted), /*seed=*/123);
  std::vector<ReplicaView> views = {Replica("a"), Replica("b"), Replica("c")};
  views[0].in_flight = 0;
  views[0].load.utilization = 0.02f;  // load 0.006
  views[1].in_flight = 1;             // load 0.06
  views[2].in_flight = 2;
  views[2].load.kv_usage = 0.5f;      // load 0.17
  double min_load = 1e9;
  for (const auto& v : views) min_load = std::min(min_load, router.Load(v));
  std::vector<double> expected;
  double total = 0.0;
  for (const auto& v : views) {
    expected.push_back(router.Weight(v, min_load));
    total += expected.back();
  }
  constexpr int kPicks = 60000;
  const std::vector<int> counts = Histogram(router, views, kPicks);
  for (size_t i = 0; i < views.size(); ++i) {
    const double share = static_cast<double>(counts[i]) / kPicks;
    // ~5 standard deviations of a binomial share at 60k picks.
    EXPECT_NEAR(share, expected[i] / total, 0.01) << views[i].id;
  }
  EXPECT_GT(counts[0], counts[1]);
  EXPECT_GT(counts[1], counts[2]);
}

TEST(RouterWeightedTest, IdleClusterIsUniform) {
  Router router(Plain(RouterPolicy::kWeighted), /*seed=*/9);
  const std::vector<ReplicaView> views = {Replica("a"), Replica("b"), Replica("c"), Replica("d")};
  constexpr int kPicks = 40000;
  const std::vector<int> counts = Histogram(router, views, kPicks);
  for (int c : counts) EXPECT_NEAR(static_cast<double>(c) / kPicks, 0.25, 0.015);
}

TEST(RouterWeightedTest, ANearlyEmptyCacheGetsMoreThanAFullOne) {
  Router router(Plain(RouterPolicy::kWeighted), /*seed=*/5);
  std::vector<ReplicaView> views = {Replica("empty"), Replica("full")};
  for (auto& v : views) v.in_flight = 2;  // same queue
  views[0].load.kv_usage = 0.05f;
  views[1].load.kv_usage = 1.0f;
  // Loads 0.125 and 0.22 (memory weighs 0.1): weights 1 and 0.587, shares 0.63 and 0.37.
  // Under the design's formula (free memory as load) the shares were the other way round.
  const std::vector<int> counts = Histogram(router, views, 20000);
  EXPECT_GT(counts[0], 1.4 * counts[1]);
  EXPECT_GT(counts[1], 0);  // less, not nothing: it is not overloaded, just full of cache
}

// The exported weights are those a pick draws: against the least load among the replicas that
// take requests, within the pool when pools are kept apart; a draining or dead replica weighs 0.
TEST(RouterWeightedTest, WeightsForMetricsAreThoseAPickDraws) {
  std::vector<ReplicaView> views = {Replica("idle-long", kLongTail), Replica("n1"), Replica("n2"),
                                    Replica("draining"), Replica("dead")};
  views[1].in_flight = 1;
  views[2].in_flight = 2;
  views[3].accepting = false;  // idle, but takes nothing
  views[4].live = false;
  RouterConfig pools = Plain(RouterPolicy::kWeighted);
  pools.long_tail = true;
  Router router(pools);
  const std::vector<double> w = router.Weights(views);
  ASSERT_EQ(w.size(), views.size());
  EXPECT_DOUBLE_EQ(w[0], 1.0);  // alone in its pool
  EXPECT_DOUBLE_EQ(w[1], 1.0);  // the least loaded normal replica, though idle-long is idler
  EXPECT_DOUBLE_EQ(w[2], router.Weight(views[2], router.Load(views[1])));
  EXPECT_LT(w[2], 1.0);
  EXPECT_EQ(w[3], 0.0);
  EXPECT_EQ(w[4], 0.0);
  // Without pools, every replica taking requests competes: the idle one sets the minimum.
  Router flat(Plain(RouterPolicy::kWeighted));
  const std::vector<double> f = flat.Weights(views);
  EXPECT_DOUBLE_EQ(f[0], 1.0);
  EXPECT_LT(f[1], 1.0);
  EXPECT_EQ(f[3], 0.0);
}

TEST(RouterWeightedTest, SameSeedSamePicks) {
  Router a(Plain(RouterPolicy::kWeighted), 77);
  Router b(Plain(RouterPolicy::kWeighted), 77);
  std::vector<ReplicaView> views = {Replica("a"), Replica("b"), Replica("c")};
  views[1].in_flight = 1;
  for (int i = 0; i < 200; ++i) {
    EXPECT_EQ(a.Pick({10, {}}, views)->index, b.Pick({10, {}}, views)->index);
  }
}

TEST(RouterBaselineTest, RoundRobinCyclesOverLiveReplicas) {
  Router router(Plain(RouterPolicy::kRoundRobin));
  std::vector<ReplicaView> views = {Replica("a"), Replica("b"), Replica("c"), Replica("d")};
  views[0].in_flight = 9;  // load is ignored
  views[2].live = false;
  std::vector<size_t> picks;
  for (int i = 0; i < 6; ++i) {
    Result<RouteDecision> d = router.Pick({10, {}}, views);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->policy, kPolicyRoundRobin);
    picks.push_back(d->index);
  }
  EXPECT_EQ(picks, (std::vector<size_t>{0, 1, 3, 0, 1, 3}));
}

TEST(RouterBaselineTest, LeastLoadedPicksTheMinimumAndRotatesTies) {
  Router router(Plain(RouterPolicy::kLeastLoaded));
  std::vector<ReplicaView> views = {Replica("a"), Replica("b"), Replica("c")};
  views[0].in_flight = 3;
  views[1].in_flight = 1;
  views[2].in_flight = 2;
  Result<RouteDecision> d = router.Pick({10, {}}, views);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->index, 1u);
  EXPECT_EQ(d->policy, kPolicyLeastLoaded);

  views[2].in_flight = 1;  // b and c tie
  std::vector<size_t> picks;
  for (int i = 0; i < 4; ++i) picks.push_back(router.Pick({10, {}}, views)->index);
  EXPECT_EQ(std::count(picks.begin(), picks.end(), 1u), 2);
  EXPECT_EQ(std::count(picks.begin(), picks.end(), 2u), 2);
  EXPECT_NE(picks[0], picks[1]);
}

TEST(RouterTest, DeadReplicasAreNeverPicked) {
  for (RouterPolicy policy :
       {RouterPolicy::kWeighted, RouterPolicy::kRoundRobin, RouterPolicy::kLeastLoaded}) {
    RouterConfig config = Plain(policy);
    config.prefix_affinity = true;
    Router router(config);
    std::vector<ReplicaView> views = {Replica("dead"), Replica("b"), Replica("c")};
    views[0].live = false;                    // idle-looking, cached everything: still dead
    views[1].in_flight = 10;
    const std::vector<BlockHash> prefix = Prefix(1, 4);
    router.Record({16, prefix}, views[0]);
    for (int i = 0; i < 2000; ++i) {
      Result<RouteDecision> d = router.Pick({16, prefix}, views);
      ASSERT_TRUE(d.ok());
      ASSERT_NE(d->index, 0u) << EnumName(policy);
    }
  }
}

TEST(RouterTest, DrainingReplicasAreNeverPicked) {
  // A draining replica is live (its requests finish there) but refuses new ones: offering it
  // one only bounces the request back. With every live replica draining, nothing is picked.
  for (RouterPolicy policy :
       {RouterPolicy::kWeighted, RouterPolicy::kRoundRobin, RouterPolicy::kLeastLoaded}) {
    Router router(Plain(policy));
    std::vector<ReplicaView> views = {Replica("draining"), Replica("b")};
    views[0].accepting = false;
    views[1].in_flight = 10;  // busier than the draining one
    for (int i = 0; i < 200; ++i) {
      Result<RouteDecision> d = router.Pick({16, {}}, views);
      ASSERT_TRUE(d.ok());
      ASSERT_EQ(d->index, 1u) << EnumName(policy);
    }
    views[1].accepting = false;
    EXPECT_EQ(router.Pick({16, {}}, views).status().code(), StatusCode::kUnavailable);
  }
}

TEST(RouterTest, FullReplicasAreNeverPicked) {
  // A full replica (it refused a request and holds as many as then) would refuse the next one
  // too: the request waits for room instead, in the coordinator's queue.
  for (RouterPolicy policy :
       {RouterPolicy::kWeighted, RouterPolicy::kRoundRobin, RouterPolicy::kLeastLoaded}) {
    Router router(Plain(policy));
    std::vector<ReplicaView> views = {Replica("full"), Replica("b")};
    views[0].full = true;
    views[1].in_flight = 10;  // busier than the full one by its load
    for (int i = 0; i < 200; ++i) {
      Result<RouteDecision> d = router.Pick({16, {}}, views);
      ASSERT_TRUE(d.ok());
      ASSERT_EQ(d->index, 1u) << EnumName(policy);
    }
    views[1].full = true;
    EXPECT_EQ(router.Pick({16, {}}, views).status().code(), StatusCode::kUnavailable);
  }
}

TEST(RouterTest, NoLiveReplicaIsUnavailable) {
  Router router(RouterConfig{});
  std::vector<ReplicaView> views = {Replica("a"), Replica("b", kLongTail)};
  for (auto& v : views) v.live = false;
  Result<RouteDecision> d = router.Pick({10, {}}, views);
  EXPECT_EQ(d.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(d.status().message(), "no live replica");
  EXPECT_EQ(router.Pick({10, {}}, {}).status().code(), StatusCode::kUnavailable);
}

// ---- long tail ----

RouterConfig LongTail(int64_t window, int64_t min_samples, double quantile = 0.8) {
  RouterConfig c = Plain(RouterPolicy::kRoundRobin);
  c.long_tail = true;
  c.long_tail_window = window;
  c.long_tail_min_samples = min_samples;
  c.long_tail_quantile = quantile;
  return c;
}

TEST(RouterLongTailTest, ThresholdOnlyAfterMinSamplesAndMovesWithTheWindow) {
  Router router(LongTail(/*window=*/10, /*min_samples=*/12));
  const ReplicaView r = Replica("a");
  for (int64_t len = 1; len <= 11; ++len) {
    router.Record({len, {}}, r);
    EXPECT_FALSE(router.LongTailThreshold().has_value()) << len;
  }
  router.Record({12, {}}, r);  // window 3..12: p80 is its 8th smallest
  EXPECT_EQ(router.LongTailThreshold(), 10);
  for (int i = 0; i < 10; ++i) router.Record({1000, {}}, r);
  EXPECT_EQ(router.LongTailThreshold(), 1000);  // the old lengths left the window
  for (int i = 0; i < 3; ++i) router.Record({5, {}}, r);
  EXPECT_EQ(router.LongTailThreshold(), 1000);  // 7 of 10 at 1000: p80 is still 1000
  for (int i = 0; i < 6; ++i) router.Record({5, {}}, r);
  EXPECT_EQ(router.LongTailThreshold(), 5);
}

TEST(RouterLongTailTest, ARequestOfferedAgainCountsOnce) {
  Router router(LongTail(/*window=*/10, /*min_samples=*/10));
  const ReplicaView r = Replica("a");
  for (int64_t len = 1; len <= 10; ++len) router.Record({len, {}}, r);
  ASSERT_EQ(router.LongTailThreshold(), 8);
  // A long prompt refused by full replicas and offered again and again: one sample, not ten.
  router.Record({1000, {}}, r);
  for (int i = 0; i < 9; ++i) router.Record({1000, {}}, r, /*count_length=*/false);
  EXPECT_EQ(router.LongTailThreshold(), 9);  // window 2..10 and 1000: p80 is its 8th smallest
}

class RouterPoolsTest : public ::testing::Test {
 protected:
  // Two normal replicas and one long-tail replica; p80 of lengths 1..100 is 80.
  void SetUp() override {
    views_ = {Replica("n0"), Replica("lt", kLongTail), Replica("n1")};
    for (int64_t len = 1; len <= 100; ++len) router_.Record({len, {}}, views_[0]);
    ASSERT_EQ(router_.LongTailThreshold(), 80);
  }
  Router router_{LongTail(/*window=*/100, /*min_samples=*/32)};
  std::vector<ReplicaView> views_;
};

TEST_F(RouterPoolsTest, LongPromptsGoToTheLongTailPoolAndShortOnesAway) {
  for (int i = 0; i < 10; ++i) {
    Result<RouteDecision> d = router_.Pick({81, {}}, views_);
    ASSERT_TRUE(d.ok());
    EXPECT_TRUE(d->long_tail);
    EXPECT_EQ(d->index, 1u);
    EXPECT_EQ(d->pool, kLongTail);
    EXPECT_FALSE(d->pool_fallback);
  }
  std::vector<int> counts(3, 0);
  for (int i = 0; i < 10; ++i) {
    Result<RouteDecision> d = router_.Pick({80, {}}, views_);  // at the threshold: not long
    ASSERT_TRUE(d.ok());
    EXPECT_FALSE(d->long_tail);
    EXPECT_EQ(d->pool, kNormal);
    ++counts[d->index];
  }
  EXPECT_EQ(counts, (std::vector<int>{5, 0, 5}));
}

TEST_F(RouterPoolsTest, ADeadPoolFallsBackToAnyLiveReplica) {
  views_[1].live = false;
  Result<RouteDecision> d = router_.Pick({5000, {}}, views_);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->long_tail);
  EXPECT_TRUE(d->pool_fallback);
  EXPECT_EQ(d->pool, kNormal);
  EXPECT_NE(d->index, 1u);

  views_[1].live = true;
  views_[0].live = false;
  views_[2].live = false;
  d = router_.Pick({3, {}}, views_);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->long_tail);
  EXPECT_TRUE(d->pool_fallback);
  EXPECT_EQ(d->index, 1u);
  EXPECT_EQ(d->pool, kLongTail);
}

TEST_F(RouterPoolsTest, AFullPoolKeepsItsRequestsWaitingInsteadOfFallingBack) {
  // Long prompts spilling onto the normal pool whenever the long-tail replicas are busy would
  // defeat the reservation: a full pool is not a missing one.
  views_[1].full = true;
  EXPECT_EQ(router_.Pick({5000, {}}, views_).status().code(), StatusCode::kUnavailable);
  // One of two normal replicas full: the other takes the short prompts; both full: they wait.
  views_[0].full = true;
  for (int i = 0; i < 4; ++i) {
    Result<RouteDecision> d = router_.Pick({3, {}}, views_);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->index, 2u);
    EXPECT_FALSE(d->pool_fallback);
  }
  views_[2].full = true;
  EXPECT_EQ(router_.Pick({3, {}}, views_).status().code(), StatusCode::kUnavailable);
  // A pool with no open replica at all (dead) still falls back, to the other pool's replicas
  // with room.
  views_[1].live = false;
  views_[2].full = false;
  Result<RouteDecision> d = router_.Pick({5000, {}}, views_);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->pool_fallback);
  EXPECT_EQ(d->index, 2u);
}

TEST(RouterLongTailTest, NothingIsLongBeforeMinSamples) {
  Router router(LongTail(/*window=*/100, /*min_samples=*/50));
  const std::vector<ReplicaView> views = {Replica("n"), Replica("lt", kLongTail)};
  for (int i = 0; i < 49; ++i) {
    Result<RouteDecision> d = router.Pick({i == 48 ? 100000 : 10, {}}, views);
    ASSERT_TRUE(d.ok());
    EXPECT_FALSE(d->long_tail);
    EXPECT_EQ(d->index, 0u);
    router.Record({i == 48 ? 100000 : 10, {}}, views[d->index]);
  }
}

TEST(RouterLongTailTest, OffMeansPoolsAreIgnored) {
  Router router(Plain(RouterPolicy::kRoundRobin));
  const std::vector<ReplicaView> views = {Replica("n"), Replica("lt", kLongTail)};
  for (int64_t len = 1; len <= 100; ++len) router.Record({len, {}}, views[0]);
  std::vector<int> counts = {0, 0};
  for (int i = 0; i < 4; ++i) {
    Result<RouteDecision> d = router.Pick({i % 2 == 0 ? 5 : 5000, {}}, views);
    ASSERT_TRUE(d.ok());
    EXPECT_FALSE(d->long_tail);
    EXPECT_FALSE(d->pool_fallback);
    ++counts[d->index];
  }
  EXPECT_EQ(counts, (std::vector<int>{2, 2}));
}

// ---- prefix affinity ----

// Queue depth only (load = in_flight / 10), least-loaded balancing: every decision is exact.
RouterConfig Affinity(double bound = 1.5) {
  RouterConfig c = Plain(RouterPolicy::kLeastLoaded);
  c.weight_queue = 1.0;
  c.weight_memory = 0.0;
  c.weight_utilization = 0.0;
  c.prefix_affinity = true;
  c.prefix_affinity_load_bound = bound;
  return c;
}

TEST(RouterAffinityTest, IdleClusterFollowsTheDeepestCachedPrefix) {
  Router router(Affinity());
  std::vector<ReplicaView> views = {Replica("a"), Replica("b"), Replica("c")};
  const std::vector<BlockHash> prompt = Prefix(100, 8);
  const std::vector<BlockHash> head(prompt.begin(), prompt.begin() + 4);
  router.Record({32, prompt}, views[1]);  // b got all 8 blocks
  router.Record({16, head}, views[2]);    // then c got the first 4

  Result<RouteDecision> d = router.Pick({32, prompt}, views);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->policy, kPolicyPrefixAffinity);
  EXPECT_EQ(d->index, 1u);  // deepest: block 8 is only on b

  std::vector<BlockHash> six_then_new(prompt.begin(), prompt.begin() + 6);
  six_then_new.push_back(12345);  // shares 6 blocks, then diverges
  d = router.Pick({28, six_then_new}, views);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->index, 1u);

  d = router.Pick({16, head}, views);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->index, 2u);  // c is the most recent owner of the first 4 blocks

  views[2].in_flight = 1;  // one request on an otherwise idle cluster: still within the bound
  d = router.Pick({16, head}, views);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->policy, kPolicyPrefixAffinity);
  EXPECT_EQ(d->index, 2u);

  d = router.Pick({16, Prefix(9000, 4)}, views);  // nothing cached: balancing decides
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->policy, kPolicyLeastLoaded);
}

TEST(RouterAffinityTest, AReplicaThatRefusedAPromptIsNotTakenToCacheIt) {
  Router router(Affinity());
  std::vector<ReplicaView> views = {Replica("a"), Replica("b"), Replica("c")};
  const std::vector<BlockHash> prompt = Prefix(300, 4);
  router.Record({16, prompt}, views[0]);  // a has it
  router.Record({16, prompt}, views[1]);  // offered to b, which refuses it (full)...
  router.Refused(prompt, "b");
  // ...and b is taken to cache none of it. The deepest owner the table keeps is gone with it (a
  // record holds one owner per hash): balancing decides, not the refusing replica.
  Result<RouteDecision> d = router.Pick({16, prompt}, views);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->policy, kPolicyLeastLoaded);
  // A refusal by another replica than the owner changes nothing.
  router.Record({16, prompt}, views[2]);
  router.Refused(prompt, "a");
  d = router.Pick({16, prompt}, views);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->policy, kPolicyPrefixAffinity);
  EXPECT_EQ(d->index, 2u);
}

TEST(RouterAffinityTest, HoldsWithinTheLoadBoundAndGivesUpBeyondIt) {
  Router router(Affinity(/*bound=*/1.5));
  std::vector<ReplicaView> views = {Replica("a"), Replica("b"), Replica("cached")};
  const std::vector<BlockHash> prompt = Prefix(7, 6);
  router.Record({24, prompt}, views[2]);
  views[0].in_flight = 4;  // min load 0.4
  views[1].in_flight = 5;
  views[2].in_flight = 7;  // 0.7 <= 1.5 * 0.4 + 0.1
  Result<RouteDecision> d = router.Pick({24, prompt}, views);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->policy, kPolicyPrefixAffinity);
  EXPECT_EQ(d->index, 2u);

  views[2].in_flight = 8;  // 0.8 > 0.7: the queue costs more than the cache saves
  d = router.Pick({24, prompt}, views);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->policy, kPolicyLeastLoaded);
  EXPECT_EQ(d->index, 0u);
}

TEST(RouterAffinityTest, SkipsOwnersThatAreNotCandidates) {
  RouterConfig config = Affinity();
  config.long_tail = true;
  config.long_tail_min_samples = 1;
  config.long_tail_window = 8;
  Router router(config);
  std::vector<ReplicaView> views = {Replica("a"), Replica("b"), Replica("lt", kLongTail)};
  for (int i = 0; i < 8; ++i) router.Record({100, {}}, views[0]);  // threshold 100
  const std::vector<BlockHash> prompt = Prefix(50, 8);
  const std::vector<BlockHash> head(prompt.begin(), prompt.begin() + 3);
  router.Record({12, head}, views[1]);   // b holds the first 3 blocks
  router.Record({32, prompt}, views[2]); // the long-tail replica took the whole prompt later...
  router.Record({12, head}, views[1]);   // ...and b got the head again

  // A short prompt's candidates exclude the long-tail replica: the deepest owner that is a
  // candidate is b, at block 3.
  Result<RouteDecision> d = router.Pick({32, prompt}, views);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->long_tail);
  EXPECT_EQ(d->policy, kPolicyPrefixAffinity);
  EXPECT_EQ(d->index, 1u);

  views[1].live = false;  // and a dead owner is no owner
  d = router.Pick({32, prompt}, views);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->policy, kPolicyLeastLoaded);
  EXPECT_EQ(d->index, 0u);
}

TEST(RouterAffinityTest, ForgetDropsAReplicasPrefixes) {
  Router router(Affinity());
  const std::vector<ReplicaView> views = {Replica("a"), Replica("b")};
  const std::vector<BlockHash> prompt = Prefix(1, 4);
  router.Record({16, prompt}, views[1]);
  ASSERT_EQ(router.Pick({16, prompt}, views)->policy, kPolicyPrefixAffinity);
  router.Forget("b");
  Result<RouteDecision> d = router.Pick({16, prompt}, views);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->policy, kPolicyLeastLoaded);
  router.Forget("never-registered");  // harmless
}

TEST(RouterAffinityTest, OffMeansNoAffinity) {
  RouterConfig config = Affinity();
  config.prefix_affinity = false;
  Router router(config);
  const std::vector<ReplicaView> views = {Replica("a"), Replica("b")};
  const std::vector<BlockHash> prompt = Prefix(1, 4);
  router.Record({16, prompt}, views[1]);
  EXPECT_EQ(router.affinity_entries(), 0u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(router.Pick({16, prompt}, views)->policy, kPolicyLeastLoaded);
  }
}

TEST(RouterAffinityTest, TheTableIsBounded) {
  Router router(Affinity(), /*seed=*/1, /*affinity_capacity=*/100);
  const ReplicaView r = Replica("a");
  for (int i = 0; i < 50; ++i) router.Record({32, Prefix(i * 1000, 8)}, r);
  EXPECT_EQ(router.affinity_entries(), 100u);
}

// ---- with the registry: views index All(), and a dispatch loop stays consistent ----

TEST(RouterWithRegistryTest, DispatchLoopSpreadsLoadAndTracksInFlight) {
  ManualClock clock;
  ReplicaRegistry registry(CoordinatorConfig{}, clock);
  for (const char* id : {"r0", "r1", "r2"}) {
    proto::Register message;
    message.incarnation = 1;
    message.info.replica_id = id;
    message.info.kv_blocks = 100;
    message.info.block_size = 16;
    message.info.max_seqs = 8;
    ASSERT_TRUE(registry.Register(message, std::string(id) + "/1").ok());
  }
  ASSERT_TRUE(registry.MarkDead("r1"));
  Router router(Plain(RouterPolicy::kWeighted), 3);
  for (int i = 0; i < 30; ++i) {
    const std::vector<ReplicaView> views = registry.Views();
    Result<RouteDecision> d = router.Pick({10, {}}, views);
    ASSERT_TRUE(d.ok());
    const ReplicaState* chosen = registry.All()[d->index];
    ASSERT_TRUE(chosen->live);
    ASSERT_TRUE(registry.AddInFlight(chosen->id(), 1));
    router.Record({10, {}}, views[d->index]);
  }
  const uint32_t r0 = registry.Find("r0")->in_flight;
  const uint32_t r2 = registry.Find("r2")->in_flight;
  EXPECT_EQ(registry.Find("r1")->in_flight, 0u);
  EXPECT_EQ(r0 + r2, 30u);
  // Weighted by in_flight, neither replica runs away with the traffic (generous: at these loads
  // the weights are close to each other, so the split is a mildly restoring random walk).
  EXPECT_LE(std::max(r0, r2) - std::min(r0, r2), 12u);
}

}  // namespace
}  // namespace bmad::coord
