// Sampling candidates, their one total order, and the top-p (nucleus) boundary.
//
// All orderings in the sampler use MoreLikely: higher score first, equal scores to the lower id.
// It is a strict total order over distinct ids, so every sort and selection has one possible
// result, whatever the standard library: the same seed gives the same tokens everywhere.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace bmad::sampling {

struct Candidate {
  float score;  // the logit after penalties
  int32_t id;
  float prob;   // unnormalised probability, exp((score - max score) / temperature)
};

inline bool MoreLikely(const Candidate& a, const Candidate& b) {
  return a.score > b.score || (a.score == b.score && a.id < b.id);
}

// The nucleus for `mass` is the shortest prefix of `candidates` in MoreLikely order whose prob
// sum reaches `mass` (>=). Returns its last candidate, or nullopt when even the whole set falls
// short (rounding, or mass above the total): then the nucleus is everything.
//
// Expected O(n): a quickselect that descends only into the side holding the boundary (our own
// partition loop, so even the summation order is the same on every platform). Reorders
// `candidates`.
std::optional<Candidate> NucleusBoundary(std::span<Candidate> candidates, double mass);

}  // namespace bmad::sampling
