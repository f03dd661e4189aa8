// PromptLengthWindow: the last `capacity` prompt lengths and their rolling quantile, which is
// how the router decides that a prompt is "long-tail".
//
// The quantile is exact (nearest rank) over a sliding window. Two ordered multisets split the
// window at the quantile's rank (the sliding-median technique, generalised to any quantile):
// `lower_` holds the k smallest lengths, `upper_` the rest, so the quantile is lower_'s largest
// element. Add is O(log capacity) and Quantile O(1), so even the largest window the config
// allows (2^20) costs the router microseconds per request, where re-sorting the window for each
// request would cost milliseconds. Memory: about 60 bytes per length in the window.
//
// Thread-safety: none (the coordinator's event-loop thread owns it through the Router).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <vector>

namespace bmad::coord {

class PromptLengthWindow {
 public:
  // `capacity` < 1 is taken as 1; `quantile` is clamped to [0, 1] (NaN is taken as 1).
  PromptLengthWindow(int64_t capacity, double quantile);

  // Adds one prompt length (negative lengths count as 0), evicting the oldest when full.
  void Add(int64_t length);

  // The nearest-rank quantile of the window: its k-th smallest length, k = ceil(quantile * n)
  // clamped to [1, n]. At least that share of the window is <= the value, so a prompt longer
  // than it is longer than `quantile` of recent prompts. nullopt when the window is empty.
  std::optional<int64_t> Quantile() const;

  // Lengths in the window now (at most capacity).
  int64_t size() const { return static_cast<int64_t>(ring_.size()); }
  // Lengths ever added (the window forgets, this does not).
  int64_t total_added() const { return total_added_; }

 private:
  // Moves elements between lower_ and upper_ until lower_ holds exactly the k smallest.
  void Rebalance();
  size_t Rank() const;  // k for the current size

  size_t capacity_;
  double quantile_;
  std::vector<int64_t> ring_;  // insertion order; grows to capacity_, then overwritten
  size_t oldest_ = 0;          // once full: index in ring_ of the oldest length
  std::multiset<int64_t> lower_;
  std::multiset<int64_t> upper_;
  int64_t total_added_ = 0;
};

}  // namespace bmad::coord
