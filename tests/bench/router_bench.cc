// Routing decisions per second: Router::Pick followed by Router::Record, as the coordinator's
// event loop does for each request, over 2, 8 and 64 fake replicas, with requests that carry no
// block hashes or 32 of them.
//
// Default RouterConfig (weighted, long-tail pool on, prefix affinity on). Every fourth replica is
// in the long-tail pool. Loads change as the benchmark runs: the chosen replica's in_flight goes
// up, and one replica per decision finishes a request, so the weighted draw never sees a frozen
// cluster. With hashes, requests come from 256 prefix families: 24 blocks shared within a family,
// 8 unique to the request, 4096 distinct requests cycled, so the affinity table both hits and
// grows (about 40k entries, under its bound).
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "coordinator/router/router.h"

namespace bmad::coord {
namespace {

constexpr int kFamilies = 256;
constexpr int kSharedBlocks = 24;
constexpr int kRequests = 4096;

std::vector<ReplicaView> MakeReplicas(int n, std::mt19937_64& rng) {
  std::vector<ReplicaView> views(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    ReplicaView& v = views[static_cast<size_t>(i)];
    v.id = "replica-" + std::to_string(i);
    v.pool = i % 4 == 3 ? ReplicaPool::kLongTail : ReplicaPool::kNormal;
    v.live = true;
    v.max_seqs = 64;
    v.kv_blocks = 4096;
    v.load.max_seqs = 64;
    v.load.running = static_cast<uint32_t>(rng() % 64);
    v.load.waiting = static_cast<uint32_t>(rng() % 8);
    v.load.kv_usage = static_cast<float>(rng() % 1000) / 1000.0f;
    v.load.utilization = static_cast<float>(rng() % 1000) / 1000.0f;
    v.in_flight = v.load.running + v.load.waiting;
  }
  return views;
}

struct Workload {
  std::vector<std::vector<BlockHash>> hashes;  // per request (empty vectors without hashes)
  std::vector<int64_t> prompt_tokens;
};

Workload MakeWorkload(int blocks_per_request, std::mt19937_64& rng) {
  Workload w;
  std::vector<std::vector<BlockHash>> families(kFamilies);
  for (auto& family : families) {
    for (int b = 0; b < kSharedBlocks; ++b) family.push_back(rng());
  }
  for (int r = 0; r < kRequests; ++r) {
    std::vector<BlockHash> request;
    if (blocks_per_request > 0) {
      const auto& family = families[rng() % kFamilies];
      request.assign(family.begin(), family.begin() + std::min(blocks_per_request, kSharedBlocks));
      while (static_cast<int>(request.size()) < blocks_per_request) request.push_back(rng());
    }
    w.hashes.push_back(std::move(request));
    // Mostly short prompts with a long tail, so both pools get traffic.
    const int64_t tokens = rng() % 10 == 0 ? 2000 + static_cast<int64_t>(rng() % 6000)
                                           : 32 + static_cast<int64_t>(rng() % 600);
    w.prompt_tokens.push_back(tokens);
  }
  return w;
}

void BM_RouteDecision(benchmark::State& state) {
  const int replicas = static_cast<int>(state.range(0));
  const int blocks = static_cast<int>(state.range(1));
  std::mt19937_64 rng(2024);
  std::vector<ReplicaView> views = MakeReplicas(replicas, rng);
  const Workload workload = MakeWorkload(blocks, rng);
  Router router(RouterConfig{}, /*seed=*/1);

  size_t next = 0;
  size_t finishing = 0;
  int64_t affinity_picks = 0;
  for (auto _ : state) {
    const RouteRequest request{workload.prompt_tokens[next], workload.hashes[next]};
    Result<RouteDecision> decision = router.Pick(request, views);
    if (!decision.ok()) {
      state.SkipWithError(decision.status().ToString().c_str());
      break;
    }
    ReplicaView& chosen = views[decision->index];
    router.Record(request, chosen);
    ++chosen.in_flight;
    ReplicaView& done = views[finishing];
    if (done.in_flight > 0) --done.in_flight;
    affinity_picks += decision->policy == kPolicyPrefixAffinity ? 1 : 0;
    benchmark::DoNotOptimize(decision);
    next = (next + 1) % workload.hashes.size();
    finishing = (finishing + 1) % views.size();
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["affinity_share"] =
      state.iterations() > 0 ? static_cast<double>(affinity_picks) / state.iterations() : 0.0;
  state.counters["table_entries"] = static_cast<double>(router.affinity_entries());
}

BENCHMARK(BM_RouteDecision)
    ->ArgNames({"replicas", "hashes"})
    ->ArgsProduct({{2, 8, 64}, {0, 32}});

}  // namespace
}  // namespace bmad::coord

BENCHMARK_MAIN();
