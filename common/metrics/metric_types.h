// Lock-free metric cells. Updating one costs an atomic read-modify-write: no lock, no
// allocation, no lookup (callers hold a reference obtained once from the Registry).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace bmad::metrics {

class Counter {
 public:
  // `amount` must be >= 0 (counters only go up); negative amounts are ignored.
  void Increment(double amount = 1.0) {
    if (amount > 0) value_.fetch_add(amount, std::memory_order_relaxed);
  }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Increment(double amount = 1.0) { value_.fetch_add(amount, std::memory_order_relaxed); }
  void Decrement(double amount = 1.0) { value_.fetch_sub(amount, std::memory_order_relaxed); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// Cumulative-bucket histogram with fixed upper bounds (+Inf implied; a listed +Inf is dropped,
// a NaN bound throws std::invalid_argument).
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);

  // A NaN value is ignored.
  void Observe(double value);

  struct Snapshot {
    std::vector<double> upper_bounds;       // without +Inf
    std::vector<uint64_t> cumulative_counts;  // one per bound, then +Inf
    double sum = 0.0;
    uint64_t count = 0;
  };
  Snapshot Read() const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // per bucket (non-cumulative), +Inf last
  std::atomic<double> sum_{0.0};
};

// Buckets for latencies in seconds: 1 ms .. 120 s.
const std::vector<double>& LatencySecondsBuckets();
// Buckets for short latencies (per step, per token) in seconds: 0.1 ms .. 10 s.
const std::vector<double>& StepSecondsBuckets();
// Buckets for in-process decisions in seconds (a routing pick takes microseconds): 1 µs .. 10 ms.
const std::vector<double>& DecisionSecondsBuckets();
// Buckets for token and sequence counts: 1 .. 32768, powers of two.
const std::vector<double>& TokenCountBuckets();

}  // namespace bmad::metrics
