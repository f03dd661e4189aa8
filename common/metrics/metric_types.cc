#include "common/metrics/metric_types.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace bmad::metrics {

Histogram::Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)) {
  if (std::any_of(bounds_.begin(), bounds_.end(), [](double b) { return std::isnan(b); })) {
    throw std::invalid_argument("a histogram bucket bound is NaN");
  }
  // Every histogram has the +Inf bucket: a listed one would be rendered twice.
  std::erase(bounds_, std::numeric_limits<double>::infinity());
  std::sort(bounds_.begin(), bounds_.end());
  bounds_.erase(std::unique(bounds_.begin(), bounds_.end()), bounds_.end());
  counts_ = std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1);
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double value) {
  // NaN belongs to no bucket, and would turn the sum into NaN for the process's lifetime.
  if (std::isnan(value)) return;
  // Prometheus buckets are "less than or equal": the first bound >= value.
  const size_t bucket = static_cast<size_t>(
      std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot s;
  s.upper_bounds = bounds_;
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    s.cumulative_counts.push_back(running);
  }
  s.count = running;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

const std::vector<double>& LatencySecondsBuckets() {
  static const std::vector<double> kBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                               0.25,  0.5,    1.0,   2.5,  5.0,   10.0, 20.0,
                                               40.0,  60.0,   120.0};
  return kBuckets;
}

const std::vector<double>& StepSecondsBuckets() {
  static const std::vector<double> kBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                               0.01,   0.025,   0.05,   0.1,   0.25,   0.5,
                                               1.0,    2.5,     10.0};
  return kBuckets;
}

const std::vector<double>& DecisionSecondsBuckets() {
  static const std::vector<double> kBuckets = {1e-6,   2.5e-6, 5e-6,   1e-5, 2.5e-5, 5e-5,  1e-4,
                                               2.5e-4, 5e-4,   1e-3,   2.5e-3, 5e-3, 1e-2};
  return kBuckets;
}

const std::vector<double>& TokenCountBuckets() {
  static const std::vector<double> kBuckets = {1,   2,    4,    8,    16,   32,    64,   128,
                                               256, 512,  1024, 2048, 4096, 8192, 16384, 32768};
  return kBuckets;
}

}  // namespace bmad::metrics
