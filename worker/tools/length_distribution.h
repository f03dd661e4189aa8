// Token-count distributions for load generators: "128" (always 128), "32-512" (uniform
// integers), "64,128,512" (one of them, uniformly).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/status.h"

namespace bmad::tools {

// The slowest open-loop arrival rate the load generators take (requests/s): one request in 17
// minutes on average. Slower is a typo (1e-3 for 1e3), and would wait for hours.
inline constexpr double kMinArrivalRate = 1e-3;

class LengthDistribution {
 public:
  // No model has a context this long; the cap keeps sums of lengths far from overflow.
  static constexpr int64_t kMaxLength = int64_t{1} << 24;

  // kInvalidArgument naming `flag` for anything else, or a length outside [1, kMaxLength].
  static Result<LengthDistribution> Parse(const std::string& text, const std::string& flag);
  int64_t Sample(std::mt19937_64& rng) const;
  int64_t max() const;
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  int64_t low_ = 1, high_ = 1;    // uniform range when choices_ is empty
  std::vector<int64_t> choices_;
};

}  // namespace bmad::tools
