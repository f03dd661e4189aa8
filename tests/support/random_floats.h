// Reproducible test inputs: n floats drawn uniformly from [-scale, scale] by a seeded generator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace bmad::testing {

inline std::vector<float> RandomFloats(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace bmad::testing
