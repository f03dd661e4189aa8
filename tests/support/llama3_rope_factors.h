// The RoPE frequency factors of Llama-3.1's "llama3" scaling, as converters store them in
// rope_freqs.weight: pairs turning faster than high_freq_factor turns per original context
// keep their frequency, pairs slower than low_freq_factor are slowed by `factor`, and those
// between blend the two (Meta's published formula; defaults are Llama-3.1's).
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

namespace bmad::testing {

inline std::vector<float> Llama3RopeFactors(int64_t rope_dim, double freq_base, double factor = 8.0,
                                            double low_freq_factor = 1.0, double high_freq_factor = 4.0,
                                            double original_context = 8192.0) {
  const double low_freq_wavelength = original_context / low_freq_factor;
  const double high_freq_wavelength = original_context / high_freq_factor;
  std::vector<float> factors;
  for (int64_t i = 0; i < rope_dim / 2; ++i) {
    const double freq = std::pow(freq_base, -2.0 * double(i) / double(rope_dim));
    const double wavelength = 2.0 * std::numbers::pi / freq;
    double f = 1.0;
    if (wavelength > low_freq_wavelength) {
      f = factor;
    } else if (wavelength >= high_freq_wavelength) {
      const double smooth =
          (original_context / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor);
      f = 1.0 / ((1.0 - smooth) / factor + smooth);
    }
    factors.push_back(static_cast<float>(f));
  }
  return factors;
}

}  // namespace bmad::testing
