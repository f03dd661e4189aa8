// Q8_0, ggml's 8-bit block format: 32 int8 values sharing one F16 scale, x = scale * q.
// Reference quantization and dequantization (the writer and the tests use these; the matmul
// kernels read blocks in place and never expand a whole matrix).
#pragma once

#include <cmath>
#include <cstdint>

#include "common/half.h"

namespace bmad::kernels {

inline constexpr int kQ8_0Block = 32;

struct BlockQ8_0 {
  uint16_t scale;  // F16
  int8_t q[kQ8_0Block];
};
static_assert(sizeof(BlockQ8_0) == 34, "Q8_0 blocks are 34 bytes");

// n must be a multiple of 32. Same arithmetic as ggml's reference quantizer: scale = max|x|/127,
// q = round-half-away(x / scale).
inline void QuantizeRowQ8_0(const float* x, int64_t n, BlockQ8_0* out) {
  for (int64_t b = 0; b < n / kQ8_0Block; ++b) {
    const float* xb = x + b * kQ8_0Block;
    float amax = 0.0f;
    for (int j = 0; j < kQ8_0Block; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].scale = FloatToHalf(d);
    for (int j = 0; j < kQ8_0Block; ++j) {
      out[b].q[j] = static_cast<int8_t>(std::lround(xb[j] * id));
    }
  }
}

// Activations multiplied by Q8_0 weights are first rounded to Q8_0 themselves, block by block,
// as llama.cpp does (its Q8_0 dot products are int8 x int8): scale = max|x| / 127 stored as F16,
// q = round-to-nearest-even(x * 127 / max|x|) (llama.cpp's SIMD quantizer). The backends give the
// product of the weights with these values; the CPU computes it exactly in integers per block.
struct ActivationBlockQ8_0 {
  float scale;  // the F16 scale, widened
  int8_t q[kQ8_0Block];
};

inline ActivationBlockQ8_0 QuantizeActivationBlockQ8_0(const float* x) {
  float amax = 0.0f;
  for (int j = 0; j < kQ8_0Block; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  ActivationBlockQ8_0 b;
  b.scale = HalfToFloat(FloatToHalf(amax / 127.0f));
  for (int j = 0; j < kQ8_0Block; ++j) {
    // Finite inputs land in [-127, 127]. The clamp and the NaN check give defined results for
    // the rest (inf, NaN, or a max so small that 127 / max overflows), the same in every kernel.
    const float r = x[j] * id;
    b.q[j] = std::isnan(r) ? 0 : static_cast<int8_t>(std::nearbyint(std::fmin(std::fmax(r, -127.0f), 127.0f)));
  }
  return b;
}

// out[i] = the value x[i] stands for once rounded to Q8_0 (n a multiple of 32; out may be x).
inline void RoundToQ8_0(const float* x, int64_t n, float* out) {
  for (int64_t b = 0; b < n / kQ8_0Block; ++b) {
    const ActivationBlockQ8_0 q = QuantizeActivationBlockQ8_0(x + b * kQ8_0Block);
    for (int j = 0; j < kQ8_0Block; ++j) out[b * kQ8_0Block + j] = q.scale * static_cast<float>(q.q[j]);
  }
}

inline void DequantizeRowQ8_0(const BlockQ8_0* in, int64_t n, float* y) {
  for (int64_t b = 0; b < n / kQ8_0Block; ++b) {
    const float d = HalfToFloat(in[b].scale);
    for (int j = 0; j < kQ8_0Block; ++j) y[b * kQ8_0Block + j] = d * static_cast<float>(in[b].q[j]);
  }
}

}  // namespace bmad::kernels
