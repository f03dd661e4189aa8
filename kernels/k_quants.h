// ggml's K-quant super-block formats, which most GGUF files in use carry (llama.cpp's Q4_K_M
// preset writes Q4_K for most matrices and Q6_K for the output and part of ffn_down / attn_v;
// Q5_K_M the same with Q5_K; Q4_K_S mixes Q4_K, Q5_K and Q6_K). 256 weights per super-block:
//   Q4_K (144 bytes, 4.5 bits a weight): 8 sub-blocks of 32, w = d * sc[j] * q - dmin * m[j]
//        with q in 0..15 and 6-bit sc, m packed into 12 bytes; F16 d and dmin.
//   Q5_K (176 bytes, 5.5 bits): Q4_K with a fifth bit per value in qh, q in 0..31.
//   Q6_K (210 bytes, 6.5625 bits): 16 sub-blocks of 16, w = d * sc[j] * (q - 32) with q in
//        0..63 (4 low bits in ql, 2 high bits in qh) and int8 sc; F16 d.
// As in llama.cpp, products with these weights take activations rounded to Q8_K: per 256 values
// one float scale and int8 values, and the sum of each 16 of them. A product is then, per
// super-block, an exact integer sum and two float steps (DotQ4_KQ8_K, DotQ6_KQ8_K), which the
// CPU's integer kernels reproduce bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>

namespace bmad::kernels {

inline constexpr int kQK_K = 256;

struct BlockQ4_K {
  uint16_t d;           // F16 scale of the sub-block scales
  uint16_t dmin;        // F16 scale of the sub-block mins
  uint8_t scales[12];   // 8 scales and 8 mins, 6 bits each
  uint8_t qs[kQK_K / 2];  // byte 32c + l: element 64c + l (low nibble), 64c + 32 + l (high)
};
static_assert(sizeof(BlockQ4_K) == 144, "Q4_K blocks are 144 bytes");

struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];       // as Q4_K's
  uint8_t qh[kQK_K / 8];    // byte l, bit 2c: element 64c + l's 16; bit 2c + 1: 64c + 32 + l's
  uint8_t qs[kQK_K / 2];    // low 4 bits, laid out as Q4_K's
};
static_assert(sizeof(BlockQ5_K) == 176, "Q5_K blocks are 176 bytes");

struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];  // low 4 bits (see DequantizeRowQ6_K for the order)
  uint8_t qh[kQK_K / 4];  // high 2 bits
  int8_t scales[kQK_K / 16];
  uint16_t d;             // F16
};
static_assert(sizeof(BlockQ6_K) == 210, "Q6_K blocks are 210 bytes");

struct ActivationBlockQ8_K {
  float d;                     // value = d * q
  int8_t q[kQK_K];
  int16_t bsums[kQK_K / 16];   // sum of each 16 consecutive q
};
static_assert(sizeof(ActivationBlockQ8_K) == 292, "Q8_K blocks are 292 bytes");

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K or Q5_K block.
inline void Q4_KScaleMin(const uint8_t* scales, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *m = scales[j + 4] & 63;
  } else {
    *sc = (scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4);
    *m = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

// n a multiple of 256 in all of these.
void DequantizeRowQ4_K(const BlockQ4_K* in, int64_t n, float* y);
void DequantizeRowQ5_K(const BlockQ5_K* in, int64_t n, float* y);
void DequantizeRowQ6_K(const BlockQ6_K* in, int64_t n, float* y);

// llama.cpp's Q8_K rounding: the value of largest magnitude maps to -127 (d = -max / 127, so d
// has the opposite sign of that value), the rest to round-half-even(x * -127 / max), at most 127.
// (the first of them when several share that magnitude). An all-zero block has d = 0. A NaN input
// is skipped in the search and gives q = 0; infinite inputs give defined but meaningless values.
void QuantizeActivationRowQ8_K(const float* x, int64_t n, ActivationBlockQ8_K* out);
// out[i] = the value x[i] stands for once rounded to Q8_K (out may be x).
void RoundToQ8_K(const float* x, int64_t n, float* out);

// The product of one weight row of `blocks` super-blocks with activations rounded to Q8_K, in
// the order the CPU's vector kernels compute it (so that they agree bit for bit). Per
// super-block, exact integer sums in 16 lanes: lane i holds the products of elements 64z + 4i
// .. 64z + 4i + 3 for z = 0..3, each times its sub-block's scale. Then, in float:
//   acc[i] = fma(a.d * d, lane[i], acc[i])                              (16 lanes)
//   Q4_K, Q5_K: acc_min[j] = fma(-(a.d * dmin), m[j] * (bsums[2j] + bsums[2j+1]), acc_min[j])
//   Q6_K (whose values carry +32): acc_min[j] = fma(-32 * (a.d * d),
//                                      sc[2j] * bsums[2j] + sc[2j+1] * bsums[2j+1], acc_min[j])
// (8 lanes); the result is LaneSum(acc) + LaneSum(acc_min), each a halving tree (lane i plus
// lane i + n/2, until one is left).
float DotQ4_KQ8_K(const BlockQ4_K* w, const ActivationBlockQ8_K* a, int64_t blocks);
float DotQ5_KQ8_K(const BlockQ5_K* w, const ActivationBlockQ8_K* a, int64_t blocks);
float DotQ6_KQ8_K(const BlockQ6_K* w, const ActivationBlockQ8_K* a, int64_t blocks);
// The same for n activation rows (row c's blocks at a + c * blocks; its result at
// out[c * out_stride]), each super-block unpacked once per 8 rows: bit for bit n calls of the
// above (the portable kernels' products).
void DotQ4_KQ8_KRows(const BlockQ4_K* w, const ActivationBlockQ8_K* a, int64_t blocks, int64_t n,
                     float* out, int64_t out_stride);
void DotQ5_KQ8_KRows(const BlockQ5_K* w, const ActivationBlockQ8_K* a, int64_t blocks, int64_t n,
                     float* out, int64_t out_stride);
void DotQ6_KQ8_KRows(const BlockQ6_K* w, const ActivationBlockQ8_K* a, int64_t blocks, int64_t n,
                     float* out, int64_t out_stride);

// The 8 scales and 8 mins of a Q4_K or Q5_K block (its 12 packed bytes), as bytes.
void UnpackQ4_KScales(const uint8_t* scales, uint8_t sc[8], uint8_t m[8]);

// Quantizers for the model writer (bmad model synth): per sub-block the range of its values,
// rounded to the format. Simpler than llama.cpp's search for the best scales (its files are
// slightly more accurate), but any GGUF reader decodes the blocks alike.
void QuantizeRowQ4_K(const float* x, int64_t n, BlockQ4_K* out);
void QuantizeRowQ5_K(const float* x, int64_t n, BlockQ5_K* out);
void QuantizeRowQ6_K(const float* x, int64_t n, BlockQ6_K* out);

}  // namespace bmad::kernels
