#include "worker/sampling/prompt_logprob.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "worker/sampling/sampler.h"

namespace bmad::sampling {
namespace {

// Heap order that keeps the worst of the best on top: lower logit, then higher id.
bool Better(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

}  // namespace

Result<PromptTokenLogprob> PromptLogprobScorer::Score(std::span<const float> row, int32_t token, size_t top_n) {
  if (token < 0 || static_cast<size_t>(token) >= row.size()) {
    return InvalidArgument("prompt token " + std::to_string(token) + " is outside the vocabulary of " +
                           std::to_string(row.size()));
  }
  const float own = row[static_cast<size_t>(token)];
  top_n = std::min(top_n, row.size());
  heap_.clear();
  uint32_t above = 0;
  bool any_finite = false;
  for (size_t i = 0; i < row.size(); ++i) {
    const float v = row[i];
    if (std::isnan(v) || v == std::numeric_limits<float>::infinity()) {
      return Internal("the logits hold " + std::string(std::isnan(v) ? "NaN" : "+inf") + " at token " +
                      std::to_string(i) + ": no prompt log-probability can be computed");
    }
    any_finite |= v > -std::numeric_limits<float>::infinity();
    above += v > own ? 1 : 0;
    if (top_n == 0) continue;
    const std::pair<float, int32_t> entry{v, static_cast<int32_t>(i)};
    if (heap_.size() < top_n) {
      heap_.push_back(entry);
      std::push_heap(heap_.begin(), heap_.end(), Better);
    } else if (Better(entry, heap_.front())) {
      std::pop_heap(heap_.begin(), heap_.end(), Better);
      heap_.back() = entry;
      std::push_heap(heap_.begin(), heap_.end(), Better);
    }
  }
  if (!any_finite) return Internal("the logits hold no finite value: no prompt log-probability can be computed");
  const LogSoftmaxNorm norm = LogSoftmaxNormOf(row);
  PromptTokenLogprob out;
  out.logprob = norm.At(own);
  out.rank = above + 1;
  std::sort_heap(heap_.begin(), heap_.end(), Better);  // best first
  out.top.reserve(heap_.size());
  for (const auto& [logit, id] : heap_) out.top.emplace_back(id, norm.At(logit));
  return out;
}

}  // namespace bmad::sampling
