// Q4_0, Q5_0, Q4_1 and Q5_1, ggml's older 32-weight block formats. llama.cpp's presets of those
// names write them for most matrices, and its K-quant presets fall back to them for matrices
// whose width is not a multiple of 256 (Q4_K -> Q5_0, Q5_K -> Q5_1, Q2_K and Q3_K -> Q4_0):
// SmolLM's 576 or 960, OpenLLaMA's 3200. One F16 scale d per block (and an F16 min m for the
// _1 types):
//   Q4_0 (18 bytes, 4.5 bits a weight): w = d * (q - 8), q in 0..15; byte j holds element j in
//        its low nibble and element j + 16 in its high one.
//   Q5_0 (22 bytes, 5.5 bits): w = d * (q - 16), q in 0..31; the low 4 bits as Q4_0's, bit j of
//        the little-endian 32-bit qh the fifth bit of element j.
//   Q4_1 (20 bytes, 5 bits): w = d * q + m, q in 0..15, laid out as Q4_0's.
//   Q5_1 (24 bytes, 6 bits): w = d * q + m, q in 0..31, laid out as Q5_0's.
// As in llama.cpp, products with these weights take activations rounded to Q8_0, so q (at most
// 31) times an 8-bit activation is an exact integer per block. A Q4_0 or Q5_0 block is the
// Q8_0 block with the same scale and q - 8 or q - 16 (ToQ8_0), and the CPU backend packs those
// matrices as Q8_0 panels: the same products, twice the memory of Q4_0 (see operations.md).
// A _1 block's product adds m times the sum of the block's rounded activations, exactly; llama.cpp
// uses that sum rounded to F16 from the unrounded scale (its Q8_1 blocks' s), so our _1
// products differ from its by up to about 2^-10 of the min's term (more where the activations'
// scale is an F16 subnormal).
#pragma once

#include <cstdint>

#include "kernels/q8_0.h"

namespace bmad::kernels {

struct BlockQ4_0 {
  uint16_t scale;  // F16
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ4_0) == 18, "Q4_0 blocks are 18 bytes");

struct BlockQ5_0 {
  uint16_t scale;  // F16
  uint8_t qh[4];
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_0) == 22, "Q5_0 blocks are 22 bytes");

struct BlockQ4_1 {
  uint16_t scale;  // F16
  uint16_t min;    // F16
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ4_1) == 20, "Q4_1 blocks are 20 bytes");

struct BlockQ5_1 {
  uint16_t scale;  // F16
  uint16_t min;    // F16
  uint8_t qh[4];
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_1) == 24, "Q5_1 blocks are 24 bytes");

// A _1 block's levels: w[j] = d * q[j] + m.
struct LevelsWithMin {
  float scale;
  float min;
  uint8_t q[32];
};
LevelsWithMin Levels(const BlockQ4_1& b);
LevelsWithMin Levels(const BlockQ5_1& b);

// The Q8_0 block of the same values: same scale, q = v.
BlockQ8_0 ToQ8_0(const BlockQ4_0& b);
BlockQ8_0 ToQ8_0(const BlockQ5_0& b);

// n a multiple of 32.
void DequantizeRowQ4_0(const BlockQ4_0* in, int64_t n, float* y);
void DequantizeRowQ5_0(const BlockQ5_0* in, int64_t n, float* y);
void DequantizeRowQ4_1(const BlockQ4_1* in, int64_t n, float* y);
void DequantizeRowQ5_1(const BlockQ5_1* in, int64_t n, float* y);

// The model writer's quantizers, with the arithmetic of ggml's reference ones, so a file they
// write holds what llama-quantize would write for the same floats. _0: the value of largest
// magnitude maps to -8 / -16, so d may be negative; q = min(15 or 31, trunc(x / d + 8.5 or
// 16.5)). _1: m = the block's minimum, d = (max - min) / 15 or 31, q = min(15 or 31,
// trunc((x - m) / d + 0.5)).
void QuantizeRowQ4_0(const float* x, int64_t n, BlockQ4_0* out);
void QuantizeRowQ5_0(const float* x, int64_t n, BlockQ5_0* out);
void QuantizeRowQ4_1(const float* x, int64_t n, BlockQ4_1* out);
void QuantizeRowQ5_1(const float* x, int64_t n, BlockQ5_1* out);

}  // namespace bmad::kernels
