// Percentiles of a set of latency samples, for benchmark reports.
#pragma once

#include <string>
#include <vector>

namespace bmad::tools {

struct LatencySummary {
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
  size_t count = 0;
  // Nearest-rank percentiles; all zero for no samples.
  static LatencySummary Of(std::vector<double> samples);
  // {"mean":..,"p50":..,"p90":..,"p99":..} with values scaled by `scale` (e.g. 1000 for ms).
  std::string Json(double scale) const;
};

}  // namespace bmad::tools
