// Percentiles of a set of latency samples, for benchmark reports.
#pragma once

#include <string>
#include <vector>

namespace bmad::tools {

struct LatencySummary {
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
  size_t count = 0;
  // Nearest-rank percentiles; all zero (and count 0) for no samples.
  static LatencySummary Of(std::vector<double> samples);
  // {"mean":..,"p50":..,"p90":..,"p99":..,"max":..} with values scaled by `scale` (e.g. 1000 for
  // ms); every value null when there were no samples (a 0 would read as "instant").
  std::string Json(double scale) const;
};

}  // namespace bmad::tools
