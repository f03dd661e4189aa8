#include "kernels/sample_row.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace bmad::kernels {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

}  // namespace

int32_t SampleRow(std::span<const float> row, const RowSampling& params,
                  std::vector<int32_t>& order) {
  order.clear();
  for (size_t i = 0; i < row.size(); ++i) {
    if (!(row[i] < kInf)) return -1;  // NaN or +inf
    if (row[i] > -kInf) order.push_back(static_cast<int32_t>(i));
  }
  if (order.empty()) return -1;
  const auto more_likely = [&](int32_t a, int32_t b) {
    const float sa = row[static_cast<size_t>(a)], sb = row[static_cast<size_t>(b)];
    return sa > sb || (sa == sb && a < b);
  };
  if (!(params.temperature >= kGreedyBelowTemperature) || params.temperature == kInf) {  // as the host sampler
    return *std::min_element(order.begin(), order.end(), more_likely);
  }
  std::stable_sort(order.begin(), order.end(), more_likely);
  // As in the host sampler, top-k is on when k is below the row's length, even if no more than
  // k tokens are finite: the draw then walks them in the more-likely order.
  const bool top_k = params.top_k > 0 && static_cast<size_t>(params.top_k) < row.size();
  if (top_k) order.resize(std::min(order.size(), static_cast<size_t>(params.top_k)));

  const float max_score = row[static_cast<size_t>(order.front())];
  const auto weight = [&](int32_t id) {
    return std::exp((row[static_cast<size_t>(id)] - max_score) / params.temperature);
  };
  double total = 0.0;
  for (int32_t id : order) total += weight(id);
  if (params.top_p < 1.0f) {
    const double mass = static_cast<double>(std::max(params.top_p, 0.0f)) * total;
    double cumulative = 0.0;
    size_t length = 0;
    while (length < order.size() && cumulative < mass) cumulative += weight(order[length++]);
    order.resize(std::max<size_t>(length, 1));
  }
  if (params.min_p > 0.0f) {
    const float threshold = std::min(params.min_p, 1.0f);
    std::erase_if(order, [&](int32_t id) { return weight(id) < threshold; });
  }
  if (!top_k) std::sort(order.begin(), order.end());  // the host sampler walks id order then

  total = 0.0;
  for (int32_t id : order) total += weight(id);
  const double target = params.uniform * total;
  double cumulative = 0.0;
  int32_t last_possible = order.front();
  for (int32_t id : order) {
    const float p = weight(id);
    if (p <= 0.0f) continue;
    cumulative += p;
    last_possible = id;
    if (target < cumulative) return id;
  }
  return last_possible;
}

}  // namespace bmad::kernels
