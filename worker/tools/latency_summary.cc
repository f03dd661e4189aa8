#include "worker/tools/latency_summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace bmad::tools {

LatencySummary LatencySummary::Of(std::vector<double> v) {
  LatencySummary s;
  s.count = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto rank = [&](double q) {
    const size_t i = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
    return v[std::min(v.size() - 1, i == 0 ? 0 : i - 1)];
  };
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  s.p50 = rank(0.5);
  s.p90 = rank(0.9);
  s.p99 = rank(0.99);
  s.max = v.back();
  return s;
}

std::string LatencySummary::Json(double scale) const {
  if (count == 0) return "{\"mean\":null,\"p50\":null,\"p90\":null,\"p99\":null,\"max\":null}";
  char buf[200];
  std::snprintf(buf, sizeof buf, "{\"mean\":%.2f,\"p50\":%.2f,\"p90\":%.2f,\"p99\":%.2f,\"max\":%.2f}",
                mean * scale, p50 * scale, p90 * scale, p99 * scale, max * scale);
  return buf;
}

}  // namespace bmad::tools
