#include "worker/sampling/nucleus.h"

#include <algorithm>
#include <cstddef>
#include <utility>

namespace bmad::sampling {
namespace {

// Below this many candidates a sort is cheaper than more partitioning.
constexpr size_t kSortBelow = 64;

// Moves the median (in MoreLikely order) of the first, middle and last candidates of [lo, hi)
// to hi - 1, as the pivot.
void ChoosePivot(std::span<Candidate> c, size_t lo, size_t hi) {
  const size_t mid = lo + (hi - lo) / 2;
  size_t a = lo, b = mid, z = hi - 1;
  if (MoreLikely(c[b], c[a])) std::swap(a, b);
  if (MoreLikely(c[z], c[b])) std::swap(b, z);
  if (MoreLikely(c[b], c[a])) std::swap(a, b);
  std::swap(c[b], c[hi - 1]);  // b now names the median position
}

}  // namespace

std::optional<Candidate> NucleusBoundary(std::span<Candidate> candidates, double mass) {
  size_t lo = 0;
  size_t hi = candidates.size();
  double before = 0.0;  // prob of every candidate known to precede [lo, hi)
  while (hi - lo > kSortBelow) {
    ChoosePivot(candidates, lo, hi);
    const Candidate pivot = candidates[hi - 1];
    // [lo, store) precede the pivot; [store, i) follow it.
    size_t store = lo;
    double front = 0.0;
    for (size_t i = lo; i + 1 < hi; ++i) {
      if (MoreLikely(candidates[i], pivot)) {
        front += candidates[i].prob;
        std::swap(candidates[i], candidates[store++]);
      }
    }
    std::swap(candidates[store], candidates[hi - 1]);  // the pivot in its final place
    if (before + front >= mass) {
      hi = store;  // the boundary precedes the pivot (store > lo: front > 0 unless mass <= before)
      if (hi == lo) return pivot;  // only when mass <= before, i.e. a non-positive mass
    } else if (before + front + pivot.prob >= mass) {
      return pivot;
    } else {
      before += front + pivot.prob;
      lo = store + 1;
    }
  }
  const auto first = candidates.begin();
  std::sort(first + static_cast<ptrdiff_t>(lo), first + static_cast<ptrdiff_t>(hi),
            [](const Candidate& a, const Candidate& b) { return MoreLikely(a, b); });
  for (size_t i = lo; i < hi; ++i) {
    before += candidates[i].prob;
    if (before >= mass) return candidates[i];
  }
  // Falling short here, after a partition had put the boundary inside [0, hi), can only be
  // rounding (sums in another order): the boundary is then the last candidate before hi.
  if (hi < candidates.size()) return candidates[hi - 1];
  return std::nullopt;
}

}  // namespace bmad::sampling
