// Drawing a token from one row of logits on whatever backend holds them (Backend::SampleRows):
// the parameters of one row, and the plain definition every backend must agree with.
//
// The definition is sampling::Sampler's (worker/sampling/sampler.h, step 4), so a request drawn
// where its logits are gets the tokens the host sampler would draw from the same uniform:
//   - temperature below kGreedyBelowTemperature (or not finite): the argmax, the lowest id on ties;
//   - otherwise, in the "more likely" order (higher score first, equal scores to the lower id):
//     top-k (0 < k < the row's length) keeps the first k finite tokens;
//     each kept token weighs p = exp((score - max score) / temperature), in float;
//     top-p (< 1) keeps the shortest prefix in that order whose weight reaches top_p · total
//     (at least one token; everything when rounding leaves it short);
//     min-p (> 0) drops tokens with p < min_p (the top token has p = 1 and stays);
//     the draw walks the kept tokens (in the more-likely order when top-k is on, in id order
//     otherwise, as the host sampler does) and takes the first whose running sum of p
//     exceeds uniform · (sum of the kept p); rounding past the end takes the last with p > 0.
//   - -1 when the row holds a NaN or +inf, or nothing above -inf.
// Sums are in double; a backend may add in another order, which can move a draw that lands
// within rounding of a boundary between two tokens, and nothing else.
//
// Penalties and log-probabilities are not part of it: the engine samples rows that need them
// on the host.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace bmad::kernels {

// Temperatures below this are greedy (vLLM's threshold, _SAMPLING_EPS): dividing by them would
// only make rounding pick among near-ties, and clients send 1e-6 to mean "greedy".
inline constexpr float kGreedyBelowTemperature = 1e-5f;

struct RowSampling {
  float temperature = 0.0f;  // < kGreedyBelowTemperature, NaN or +inf: greedy
  int32_t top_k = 0;         // <= 0: off
  float top_p = 1.0f;        // >= 1: off
  float min_p = 0.0f;        // <= 0: off
  double uniform = 0.0;      // in [0, 1): where the draw lands
};

// The definition above, plainly: O(n log n). `order` is scratch (reused across calls).
int32_t SampleRow(std::span<const float> row, const RowSampling& params,
                  std::vector<int32_t>& order);

}  // namespace bmad::kernels
