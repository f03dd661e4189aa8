#include "coordinator/router/router.h"

#include <algorithm>
#include <cmath>

namespace bmad::coord {
namespace {

// Loads are compared with this absolute slack so that two computations of the same quantity
// that round differently (a * (1 / c) versus a / c) still compare equal.
constexpr double kLoadSlack = 1e-9;

double ClampedWeight(double w) { return std::isfinite(w) ? std::clamp(w, 0.0, 1e6) : 0.0; }

// A reported fraction, clamped to [0, 1]; NaN or infinity counts as 1 (busy, never idle).
double Fraction(float value) {
  return std::isfinite(value) ? std::clamp(static_cast<double>(value), 0.0, 1.0) : 1.0;
}

// The queue term's unit: sequences the replica runs per step.
double SeqCapacity(const ReplicaView& r) {
  if (r.max_seqs > 0) return r.max_seqs;
  if (r.load.max_seqs > 0) return r.load.max_seqs;
  return 1.0;
}

}  // namespace

Router::Router(const RouterConfig& config, uint64_t seed, size_t affinity_capacity)
    : policy_(config.policy),
      weight_queue_(ClampedWeight(config.weight_queue)),
      weight_memory_(ClampedWeight(config.weight_memory)),
      weight_utilization_(ClampedWeight(config.weight_utilization)),
      long_tail_(config.long_tail),
      long_tail_min_samples_(std::max<int64_t>(config.long_tail_min_samples, 1)),
      prefix_affinity_(config.prefix_affinity),
      prefix_affinity_load_bound_(std::isfinite(config.prefix_affinity_load_bound)
                                      ? std::max(config.prefix_affinity_load_bound, 1.0)
                                      : 1.0),
      lengths_(config.long_tail_window, std::isnan(config.long_tail_quantile)
                                            ? RouterConfig{}.long_tail_quantile
                                            : config.long_tail_quantile),
      affinity_(affinity_capacity),
      rng_(seed) {
  if (weight_queue_ + weight_memory_ + weight_utilization_ <= 0.0) weight_queue_ = 1.0;
  // Only the ratios matter (every use of Load is relative): scaled to sum to 1, so that weights
  // as small as the config allows (5e-324) cannot underflow eps to 0 and make an idle cluster's
  // weights 0 / 0.
  const double sum = weight_queue_ + weight_memory_ + weight_utilization_;
  weight_queue_ /= sum;
  weight_memory_ /= sum;
  weight_utilization_ /= sum;
  epsilon_ = kLoadEpsilonFraction;
}

// The weighted policy, mended.
//
// The design said: load = 0.6 * queue + 0.1 * memory + 0.3 * utilization, each term normalised to
// 0..1, and weight_i = min_load / load_i. Two flaws:
//   - "memory" was the *free* KV fraction, so an idle replica with an empty cache looked loaded
//     and a full one looked idle: traffic went to the replica about to preempt.
//   - an idle replica has load 0, so min_load / load_i was 0 / 0 (NaN) or x / 0 (infinity), and
//     the weighted draw broke exactly when the cluster was quiet.
// What this code does instead:
//   - queue = depth / max_seqs with depth = max(in_flight, running + waiting). `in_flight` is the
//     coordinator's own count, current to the last dispatch; running + waiting is the replica's,
//     up to one heartbeat old but it also sees requests the coordinator does not know (after a
//     coordinator restart). Each undercounts in a different situation; the larger is the better
//     estimate. The term is NOT clipped at 1: past max_seqs every queued request waits for a
//     batch slot, so waiting time keeps growing with the backlog, and clipping would make a
//     replica with a 10x backlog look exactly as loaded as one that is just full.
//   - memory = KV usage, the fraction of blocks *in use* (more usage, closer to preemption).
//   - utilization as reported (0..1). Both fractions are clamped; garbage counts as 1.
//   - load = weight_queue * queue + weight_memory * memory + weight_utilization * utilization,
//     coefficients from the config.
//   - weight_i = ((min_load + eps) / (load_i + eps))^4, eps = 1% of the sum of the coefficients
//     (the load of a replica with every term at 1). eps > 0: idle replicas (load 0) all get weight 1
//     and share evenly, nothing divides by zero. eps scales with the coefficients, so scaling all
//     three by k changes no weight. The least-loaded candidate always has weight 1; one at
//     load L has weight ~ (eps / L)^4 once L >> eps.
//   - the pick is random in proportion to weight^kWeightSharpness (seeded), so decisions made
//     between two heartbeats spread out instead of herding onto one replica. Plain weights
//     (sharpness 1) give a replica at twice the minimum load half the share of the least loaded:
//     on a cluster with one replica 3x slower, that replica kept 13-22% of the traffic with 10%
//     of the capacity, and its queue set the p99 (tests/bench/coordinator_bench.sh, part b: 4x
//     the TTFT p99 of least-loaded). The queue term already counts every dispatch the moment it
//     is made, so the draw need not be so flat to avoid herding: with sharpness 4, a replica at
//     twice the minimum load gets 1/16 of the share.
double Router::Load(const ReplicaView& replica) const {
  const double depth = std::max(static_cast<double>(replica.in_flight),
                                static_cast<double>(replica.load.running) +
                                    static_cast<double>(replica.load.waiting));
  return weight_queue_ * (depth / SeqCapacity(replica)) +
         weight_memory_ * Fraction(replica.load.kv_usage) +
         weight_utilization_ * Fraction(replica.load.utilization);
}

double Router::Weight(const ReplicaView& replica, double min_load) const {
  const double load = Load(replica);
  min_load = std::isnan(min_load) ? 0.0 : std::clamp(min_load, 0.0, load);
  return std::pow((min_load + epsilon_) / (load + epsilon_), kWeightSharpness);
}

double Router::OneRequestLoad(const ReplicaView& replica) const {
  return weight_queue_ / SeqCapacity(replica);
}

std::optional<int64_t> Router::LongTailThreshold() const {
  if (lengths_.total_added() < long_tail_min_samples_) return std::nullopt;
  return lengths_.Quantile();
}

Router::CandidateSet Router::SelectCandidates(bool long_tail,
                                              std::span<const ReplicaView> replicas,
                                              bool* fallback) {
  *fallback = false;
  candidates_.clear();
  const auto open = [](const ReplicaView& v) { return v.live && v.accepting; };
  if (long_tail_) {
    // A pool whose replicas are all full keeps its requests (none when every one is full): the
    // other pool is for when this one has no replica open at all (dead, draining, or without
    // the context the request needs). Long prompts spilling onto the normal pool under load
    // would defeat the reservation.
    const ReplicaPool wanted = long_tail ? ReplicaPool::kLongTail : ReplicaPool::kNormal;
    bool pool_open = false;
    for (size_t i = 0; i < replicas.size(); ++i) {
      if (!open(replicas[i]) || replicas[i].pool != wanted) continue;
      pool_open = true;
      if (!replicas[i].full) candidates_.push_back(i);
    }
    if (pool_open) return long_tail ? kLongTailSet : kNormalSet;
    *fallback = true;
  }
  for (size_t i = 0; i < replicas.size(); ++i) {
    if (open(replicas[i]) && !replicas[i].full) candidates_.push_back(i);
  }
  return kAllLiveSet;
}

std::optional<size_t> Router::AffinityCandidate(std::span<const BlockHash> hashes,
                                                std::span<const ReplicaView> replicas) const {
  // Deepest first: the first owner that is a candidate holds the longest usable prefix. Owners
  // that are not candidates (dead, draining, or in the other pool) are skipped for shallower
  // prefixes, each looked for among the candidates once: a long prompt's thousands of blocks
  // are mostly owned by one replica, and a scan per block cost milliseconds when that replica
  // was no candidate (it had just refused the request).
  std::vector<std::string_view> not_candidates;
  for (auto it = hashes.rbegin(); it != hashes.rend(); ++it) {
    const std::optional<std::string_view> owner = affinity_.Owner(*it);
    if (!owner || std::find(not_candidates.begin(), not_candidates.end(), *owner) != not_candidates.end()) continue;
    for (size_t pos = 0; pos < candidates_.size(); ++pos) {
      if (replicas[candidates_[pos]].id == *owner) return pos;
    }
    not_candidates.push_back(*owner);
  }
  return std::nullopt;
}

bool Router::LongTail(const RouteRequest& request) const {
  if (!long_tail_) return false;
  if (request.long_tail) return *request.long_tail;
  const std::optional<int64_t> threshold = LongTailThreshold();
  return threshold && std::max<int64_t>(request.prompt_tokens, 0) > *threshold;
}

Result<RouteDecision> Router::Pick(const RouteRequest& request,
                                   std::span<const ReplicaView> replicas) {
  RouteDecision decision;
  decision.long_tail = LongTail(request);
  const CandidateSet set = SelectCandidates(decision.long_tail, replicas, &decision.pool_fallback);
  if (candidates_.empty()) return Unavailable("no live replica");

  loads_.clear();
  for (size_t c : candidates_) loads_.push_back(Load(replicas[c]));

  size_t chosen_pos = 0;
  std::string_view policy = kPolicyRoundRobin;
  std::optional<size_t> affine;
  if (prefix_affinity_ && !request.block_hashes.empty()) {
    affine = AffinityCandidate(request.block_hashes, replicas);
  }
  if (affine) {
    const double min_load = *std::min_element(loads_.begin(), loads_.end());
    const double bound = prefix_affinity_load_bound_ * min_load +
                         OneRequestLoad(replicas[candidates_[*affine]]) + kLoadSlack;
    if (loads_[*affine] > bound) affine.reset();  // the cache hit is not worth the queue
  }
  if (affine) {
    chosen_pos = *affine;
    policy = kPolicyPrefixAffinity;
  } else {
    switch (policy_) {
      case RouterPolicy::kWeighted:
        chosen_pos = PickWeighted();
        policy = kPolicyWeighted;
        break;
      case RouterPolicy::kLeastLoaded:
        chosen_pos = PickLeastLoaded(set);
        policy = kPolicyLeastLoaded;
        break;
      case RouterPolicy::kRoundRobin:
        chosen_pos = PickRoundRobin(set);
        policy = kPolicyRoundRobin;
        break;
    }
  }
  decision.policy = policy;
  decision.index = candidates_[chosen_pos];
  decision.pool = replicas[decision.index].pool;
  return decision;
}

double Router::UniformDouble() {
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

size_t Router::PickWeighted() {
  const double min_load = *std::min_element(loads_.begin(), loads_.end());
  // Reuse loads_ for the weights (same formula as Weight(), without recomputing each load).
  double total = 0.0;
  for (double& w : loads_) {
    w = std::pow((min_load + epsilon_) / (w + epsilon_), kWeightSharpness);
    total += w;
  }
  const double target = UniformDouble() * total;
  double cumulative = 0.0;
  for (size_t pos = 0; pos < loads_.size(); ++pos) {
    cumulative += loads_[pos];
    if (target < cumulative) return pos;
  }
  return loads_.size() - 1;  // rounding left target == total: the last one
}

size_t Router::PickLeastLoaded(CandidateSet set) {
  const double min_load = *std::min_element(loads_.begin(), loads_.end());
  size_t ties = 0;
  for (double load : loads_) ties += load <= min_load + kLoadSlack ? 1 : 0;
  size_t nth = static_cast<size_t>(round_robin_[set]++ % ties);
  for (size_t pos = 0; pos < loads_.size(); ++pos) {
    if (loads_[pos] <= min_load + kLoadSlack && nth-- == 0) return pos;
  }
  return 0;  // unreachable: `ties` counted at least the minimum
}

size_t Router::PickRoundRobin(CandidateSet set) {
  return static_cast<size_t>(round_robin_[set]++ % candidates_.size());
}

std::vector<double> Router::Weights(std::span<const ReplicaView> replicas) const {
  const auto takes_requests = [](const ReplicaView& v) { return v.live && v.accepting; };
  const auto pool_index = [](ReplicaPool pool) { return pool == ReplicaPool::kLongTail ? 1 : 0; };
  std::optional<double> min_load, min_in_pool[2];
  for (const ReplicaView& v : replicas) {
    if (!takes_requests(v)) continue;
    const double load = Load(v);
    min_load = std::min(min_load.value_or(load), load);
    std::optional<double>& pool_min = min_in_pool[pool_index(v.pool)];
    pool_min = std::min(pool_min.value_or(load), load);
  }
  std::vector<double> weights;
  weights.reserve(replicas.size());
  for (const ReplicaView& v : replicas) {
    const std::optional<double>& pool_min = min_in_pool[pool_index(v.pool)];
    const std::optional<double>& peers_min = long_tail_ && pool_min ? pool_min : min_load;
    weights.push_back(takes_requests(v) ? Weight(v, peers_min.value_or(0.0)) : 0.0);
  }
  return weights;
}

void Router::Record(const RouteRequest& request, const ReplicaView& chosen, bool count_length) {
  if (count_length) lengths_.Add(request.prompt_tokens);
  if (prefix_affinity_) affinity_.Record(request.block_hashes, chosen.id);
}

void Router::Refused(std::span<const BlockHash> block_hashes, const std::string& replica_id) {
  if (prefix_affinity_) affinity_.Disown(block_hashes, replica_id);
}

void Router::Forget(const std::string& replica_id) { affinity_.Forget(replica_id); }

void Router::Retire(const std::string& replica_id) { affinity_.Retire(replica_id); }

}  // namespace bmad::coord
