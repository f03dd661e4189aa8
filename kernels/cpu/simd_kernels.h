// Inner loops compiled for specific instruction sets (simd_kernels_avx512.cc is built with
// AVX-512 flags and only called when the CPU has AVX-512; the scalar versions run anywhere).
// Each function handles a block of work handed out by the parallel drivers in matmul.cc and
// friends; none allocates or spawns threads.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/k_quants.h"
#include "kernels/weight_matrix.h"

namespace bmad::kernels::cpu {

// y[c * ldy + r] = dot(x[c * ldx ...], row r of w) for r in [0, rows), c in [0, cols).
// `w` points at the first row; rows are w_stride bytes apart; k inputs each.
using DotRowsFn = void (*)(WeightType type, const uint8_t* w, size_t w_stride, int64_t rows,
                           const float* x, int64_t ldx, int64_t cols, int64_t k, float* y,
                           int64_t ldy);

// y[c * ldy + r] for c in [0, cols), r in [0, rows): the product of x's rows with the weight
// rows held by consecutive packed panels starting at `panels` (see packed_weights.h).
// Each output is one FMA chain over the inputs in order, whatever `cols` is.
using PanelGemmFn = void (*)(WeightType type, const uint8_t* panels, size_t panel_stride,
                             int64_t rows, const float* x, int64_t ldx, int64_t cols, int64_t k,
                             float* y, int64_t ldy);

// n elements of one weight row, dequantized to F32.
using DequantRowFn = void (*)(WeightType type, const uint8_t* row, int64_t n, float* out);

// out[i] = nearest half-precision value of x[i] (out may be x). Also the type of round_bf16:
// the nearest bfloat16 value (RoundToBf16 in common/bfloat16.h).
using RoundHalfFn = void (*)(const float* x, int64_t n, float* out);

// Float to half for KV cache rows.
using FloatToHalfFn = void (*)(const float* in, int64_t n, uint16_t* out);

// dot(a, b) over n floats.
using DotFn = float (*)(const float* a, const float* b, int64_t n);

// out[i] = g / (1 + exp(-g)) * up[i] with g = gate[i] (SiLU(gate) times up; out may be gate or
// up), in float, in that order. The scalar kernel uses the C library's expf; the AVX-512 one
// rounds exp to float from a double-precision value (correctly rounded on every argument
// tested), and glibc's expf differs from that, by one unit in the last place, in about 13 of
// 100,000 arguments between 2^-24 and 100 in magnitude.
using SwiGluFn = void (*)(const float* gate, const float* up, int64_t n, float* out);

// Attention of `n_rows` consecutive new tokens of one sequence (one for decode, a tile of a
// prefill chunk), for KV heads [0, n_kv) and each one's `group` query heads (GQA). Row r's query
// heads are n_kv * group rows of hd floats at q + r * row_stride (head-major, as they lie in an
// activation row; `out` likewise). Row r attends to the sequence's cached tokens
// [0, first_n + r) (causal, itself included; first_n >= 1):
//   out_rj = softmax(q_rj . K * scale) . V
// Token t lives at slot t % block_size of block blocks[t / block_size]: KV head h's key at
//   k + blocks[t / block_size] * block_stride + (h * block_size + t % block_size) * hd
// (k and v point at the first head's part of block 0; F16).
//
// The context is taken in spans of `span_tokens` (a multiple of block_size, from token 0): per
// span one pass over the keys for every score, then the span's weights, then one pass over
// the values; spans are merged with a running max and sum. So the scratch does not grow with
// the context, and a (row, query head)'s result depends only on its query, its length, the
// cache and span_tokens, never on the other rows and heads of the call: a token's attention is
// the same whether it was decoded or prefilled, in any batch. `scratch` holds
// AttendRowsScratchFloats(n_rows, n_kv * group, span_tokens) floats.
inline int64_t AttendRowsScoreStride(int64_t n) { return (n + 15) / 16 * 16; }
inline int64_t AttendRowsScratchFloats(int64_t n_rows, int64_t n_q, int64_t span_tokens) {
  return n_rows * n_q * (AttendRowsScoreStride(span_tokens) + 2);
}
using AttendRowsF16Fn = void (*)(const float* q, int64_t row_stride, int64_t n_rows,
                                 int64_t first_n, int64_t n_kv, int64_t group, const uint16_t* k,
                                 const uint16_t* v, const int32_t* blocks, int64_t block_stride,
                                 int64_t block_size, int64_t hd, float scale,
                                 int64_t span_tokens, float* scratch, float* out);

// Activations rounded to Q8_0 (RoundToQ8_0 in kernels/q8_0.h) in the form the integer kernels
// read, one record of Q8ActivationRowBytes(k) bytes per row of k inputs (nb = k / 32 blocks):
//   float scale[nb]; int32 offset[nb] (-128 x the block's sum of q, which cancels the +128 the
//   packed weights carry); int8 q[k].
inline size_t Q8ActivationRowBytes(int64_t k) { return static_cast<size_t>(k / 32) * 40; }
using QuantizeQ8RowsFn = void (*)(const float* x, int64_t m, int64_t k, uint8_t* out);

// Like PanelGemmFn for Q8_0 panels (`type` kQ8_0), or for Q4_1 / Q5_1 panels with mins, with the
// activations given as QuantizeQ8RowsFn wrote them: per block an exact integer dot product,
// then one FMA of it with the two scales' product (with mins, then one FMA of the weights' min
// with the sum of the block's rounded activations, scale x sum of q, an exact product).
using PanelGemmQ8Fn = void (*)(WeightType type, const uint8_t* panels, size_t panel_stride,
                               int64_t rows, const uint8_t* xq, int64_t cols, int64_t k, float* y,
                               int64_t ldy);

// y[c * ldy + r] for c in [0, cols), r in [0, rows): the product of row r of Q4_K or Q6_K
// weights (rows w_stride bytes apart, k inputs) with activation row c, given as k / 256 Q8_K
// blocks per row, rows one after another (QuantizeActivationRowQ8_K). Exactly what DotQ4_KQ8_K
// and DotQ6_KQ8_K compute, in every implementation.
using KQuantDotRowsFn = void (*)(WeightType type, const uint8_t* w, size_t w_stride, int64_t rows,
                                 const ActivationBlockQ8_K* xq, int64_t cols, int64_t k, float* y,
                                 int64_t ldy);

// QuantizeActivationRowQ8_K (kernels/k_quants.h) over m rows of k inputs (k a multiple of 256):
// k / 256 blocks per row, rows one after another; the same blocks, bit for bit.
using QuantizeQ8KRowsFn = void (*)(const float* x, int64_t m, int64_t k, ActivationBlockQ8_K* out);

struct SimdKernels {
  const char* isa;
  DotRowsFn dot_rows;
  PanelGemmFn panel_gemm;
  DequantRowFn dequant_row;
  RoundHalfFn round_half;
  FloatToHalfFn float_to_half;
  DotFn dot;
  AttendRowsF16Fn attend_rows_f16;
  SwiGluFn swiglu;
  // Integer Q8_0 (Q4_1, Q5_1) products (AVX-512 VNNI); null where the CPU lacks them, and then
  // those panels go through panel_gemm with the activations rounded to Q8_0 as floats (same
  // values).
  QuantizeQ8RowsFn quantize_q8_rows = nullptr;
  PanelGemmQ8Fn panel_gemm_q8 = nullptr;
  // Q4_K and Q6_K products (integers on AVX-512 VNNI; portable loops elsewhere).
  KQuantDotRowsFn kquant_dot_rows = nullptr;
  QuantizeQ8KRowsFn quantize_q8_k_rows = nullptr;
  RoundHalfFn round_bf16 = nullptr;  // activations of BF16 products
};

// The best kernels this CPU supports (AVX-512 when present, else portable C++).
const SimdKernels& BestSimdKernels();
// The portable kernels (tests compare both).
const SimdKernels& ScalarSimdKernels();
// The portable Q8_K rounding of activations.
void QuantizeQ8KRowsScalar(const float* x, int64_t m, int64_t k, ActivationBlockQ8_K* out);
// The portable K-quant products (also those of AVX-512 without VNNI).
void KQuantDotRowsScalar(WeightType type, const uint8_t* w, size_t w_stride, int64_t rows,
                         const ActivationBlockQ8_K* xq, int64_t cols, int64_t k, float* y,
                         int64_t ldy);
// nullptr when the CPU lacks AVX-512F/BW/VL/DQ, F16C and FMA. With VNNI as well, Q8_0 products
// are integer ones unless `allow_vnni` is false (tests compare both).
const SimdKernels* Avx512SimdKernels(bool allow_vnni = true);

}  // namespace bmad::kernels::cpu
