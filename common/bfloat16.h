// bfloat16 (the top half of an IEEE 754 float: 8 exponent bits, 7 mantissa bits) <-> float.
// Hugging Face checkpoints are mostly BF16, and llama.cpp's converter keeps that type.
// Widening is exact. Narrowing rounds to nearest even and keeps NaNs quiet, as ggml's
// GGML_FP32_TO_BF16 and its CPU row conversion do (AVX-512 BF16's vcvtneps2bf16 agrees except
// on subnormals, which it flushes to zero).
#pragma once

#include <cstdint>
#include <cstring>

namespace bmad {

inline float Bf16ToFloat(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint16_t FloatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// The nearest bfloat16 value, as a float.
inline float RoundToBf16(float f) { return Bf16ToFloat(FloatToBf16(f)); }

}  // namespace bmad
