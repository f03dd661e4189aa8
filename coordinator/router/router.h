// Router: picks the replica a request goes to, from a snapshot of replica views.
//
// A decision has three stages.
//
// 1. Candidates (pools). With `long_tail` on, a prompt longer than the rolling
//    `long_tail_quantile` of the last `long_tail_window` prompt lengths (counted only once
//    `long_tail_min_samples` prompts have been recorded) is long-tail: its candidates are the
//    live replicas of the long-tail pool. Every other prompt's candidates are the live replicas of
//    the normal pool, so a long prefill never shares a batch with short interactive requests. A
//    pool with no live replica falls back to every live replica; a pool whose replicas are all
//    full (ReplicaView::full) does not: its requests wait for it. With `long_tail` off, pools are
//    ignored: every live replica is a candidate. Full replicas are never candidates.
//
// 2. Prefix affinity (when on, and the request carries block hashes). The candidate that most
//    recently received the deepest of the request's block hashes (the longest prefix already
//    sent somewhere; see PrefixAffinityTable) wins if its load is at most
//    `prefix_affinity_load_bound` x (the lowest candidate load) + (the load one more request
//    adds to it). The "+ one request" keeps an idle cluster, where the lowest load is 0,
//    following affinity. Beyond the bound the cache hit is not worth the queueing: stage 3 picks.
//
// 3. Balancing, by `policy`:
//    - weighted (the design's policy, mended; see the comment above Router::Load in router.cc):
//      a random pick with probability proportional to Weight(), a smoothed, sharpened inverse
//      of Load();
//    - least_loaded: the lowest Load(), ties broken round robin;
//    - round_robin: the candidates in turn (load ignored).
//
// Only live replicas are ever picked. Record() must be called for each dispatched request: the
// long-tail window and the affinity table learn only from it.
//
// Deterministic for a given seed and call sequence (the weighted pick draws from its own
// mt19937_64, with no std:: distribution whose output differs between standard libraries).
//
// Thread-safety: none. The coordinator's single event-loop thread owns the router.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/block_hash.h"
#include "common/config/config.h"
#include "common/status.h"
#include "coordinator/router/prefix_affinity_table.h"
#include "coordinator/router/prompt_length_window.h"
#include "coordinator/router/replica_view.h"

namespace bmad::coord {

struct RouteRequest {
  int64_t prompt_tokens = 0;               // negative counts as 0
  std::span<const BlockHash> block_hashes; // chained hashes of the prompt's full blocks
  // Long-tail or not, when already decided (another choice of the same prompt was routed):
  // kept, so that one request's choices all go to one pool.
  std::optional<bool> long_tail;
};

// Policy labels (RouteDecision::policy holds one of these).
inline constexpr std::string_view kPolicyWeighted = "weighted";
inline constexpr std::string_view kPolicyRoundRobin = "round_robin";
inline constexpr std::string_view kPolicyLeastLoaded = "least_loaded";
inline constexpr std::string_view kPolicyPrefixAffinity = "prefix_affinity";

struct RouteDecision {
  size_t index = 0;                  // into the views passed to Pick
  std::string policy;                // which stage decided: one of the kPolicy* labels (short
                                     // enough for the small-string buffer: no allocation)
  ReplicaPool pool = ReplicaPool::kNormal;  // the chosen replica's pool
  bool long_tail = false;            // the prompt was classified long-tail
  bool pool_fallback = false;        // its pool had no open replica: any live one was a candidate
};

class Router {
 public:
  static constexpr size_t kDefaultAffinityCapacity = size_t{1} << 18;
  // The smoothing term of Weight(), as a fraction of the largest load one replica can show with
  // every term at its 0..1 scale (weight_queue + weight_memory + weight_utilization).
  static constexpr double kLoadEpsilonFraction = 0.01;
  // The weighted draw is proportional to weight^kWeightSharpness (router.cc says why).
  static constexpr double kWeightSharpness = 4.0;

  // Out-of-range knobs are clamped, never undefined behaviour (the config loader has already
  // rejected them): each weight to [0, 1e6] (non-finite: 0; all three 0: queue weight 1),
  // quantile to [0, 1], window and min samples to >= 1, load bound to >= 1.
  explicit Router(const RouterConfig& config, uint64_t seed = 1,
                  size_t affinity_capacity = kDefaultAffinityCapacity);

  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  // The replica for `request` among `replicas`. kUnavailable ("no live replica") when none is
  // a candidate (live, accepting, not full). Changes only the round-robin positions and the
  // random state.
  Result<RouteDecision> Pick(const RouteRequest& request, std::span<const ReplicaView> replicas);
  // Whether Pick would take `request` for long-tail now (its own decision, when it carries one;
  // always false with long_tail off).
  bool LongTail(const RouteRequest& request) const;

  // Call once the request was dispatched to `chosen`: records the prompt length in the rolling
  // window and (with prefix affinity on) the prompt's block hashes as now cached on `chosen`.
  // A request dispatched again (refused by a full replica, or migrated) passes count_length
  // false: each request's length counts once, however often it is offered.
  void Record(const RouteRequest& request, const ReplicaView& chosen, bool count_length = true);

  // `replica_id` refused a request (full or draining) after Record named it: its prompt's
  // prefix (`block_hashes`) is no longer taken as cached there, so that requests sharing it are not sent to the
  // refusing replica for it.
  void Refused(std::span<const BlockHash> block_hashes, const std::string& replica_id);

  // `replica_id` died or restarted: it no longer caches anything.
  void Forget(const std::string& replica_id);
  // `replica_id` is gone for good (its registry slot went to another id): Forget, and drop what
  // is kept under the id itself.
  void Retire(const std::string& replica_id);

  // The replica's weighted load, >= 0 and finite (also exported as a metric):
  //   weight_queue * depth / max_seqs + weight_memory * kv_usage + weight_utilization * utilization
  // with depth = max(in_flight, running + waiting), the three weights scaled to sum to 1. See
  // router.cc for why.
  double Load(const ReplicaView& replica) const;
  // ((min_load + eps) / (Load(replica) + eps))^kWeightSharpness, in (0, 1] when
  // min_load <= Load(replica); eps = kLoadEpsilonFraction (the three load weights sum to 1).
  double Weight(const ReplicaView& replica, double min_load) const;

  // The prompt length above which a prompt is long-tail; nullopt until long_tail_min_samples
  // prompts have been recorded (independent of whether `long_tail` is on).
  std::optional<int64_t> LongTailThreshold() const;

  // Hash entries in the affinity table (stale ones included), for metrics.
  size_t affinity_entries() const { return affinity_.size(); }
  // Each replica's Weight as a weighted pick would draw it (for metrics): against the least
  // load among the replicas taking requests (live, accepting), of its own pool when long-tail
  // routing keeps pools apart and that pool has any; 0 for a replica taking none.
  std::vector<double> Weights(std::span<const ReplicaView> replicas) const;

 private:
  // Round-robin positions, one per kind of candidate set: a shared counter would let requests
  // of one pool skew the rotation of the other.
  enum CandidateSet { kNormalSet = 0, kLongTailSet = 1, kAllLiveSet = 2, kNumCandidateSets = 3 };

  // Fills candidates_ with indices of live replicas; returns the set it used.
  CandidateSet SelectCandidates(bool long_tail, std::span<const ReplicaView> replicas,
                                bool* fallback);
  // The position in candidates_ of the candidate owning the deepest known block hash, if any.
  std::optional<size_t> AffinityCandidate(std::span<const BlockHash> hashes,
                                          std::span<const ReplicaView> replicas) const;
  // The load one more request adds to `replica` (its queue term's step).
  double OneRequestLoad(const ReplicaView& replica) const;
  // Each returns a position in candidates_, from loads_ (which PickWeighted overwrites).
  size_t PickWeighted();
  size_t PickLeastLoaded(CandidateSet set);
  size_t PickRoundRobin(CandidateSet set);
  // Uniform in [0, 1) from the top 53 bits of one draw.
  double UniformDouble();

  RouterPolicy policy_;
  double weight_queue_;
  double weight_memory_;
  double weight_utilization_;
  double epsilon_;
  bool long_tail_;
  int64_t long_tail_min_samples_;
  bool prefix_affinity_;
  double prefix_affinity_load_bound_;

  PromptLengthWindow lengths_;
  PrefixAffinityTable affinity_;
  std::mt19937_64 rng_;
  uint64_t round_robin_[kNumCandidateSets] = {};
  // Scratch reused by every Pick (no allocation once warm).
  std::vector<size_t> candidates_;
  std::vector<double> loads_;
};

}  // namespace bmad::coord
