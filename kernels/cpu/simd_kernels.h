// Inner loops compiled for specific instruction sets (simd_kernels_avx512.cc is built with
// AVX-512 flags and only called when the CPU has AVX-512; the scalar versions run anywhere).
// Each function handles a block of work handed out by the parallel drivers in matmul.cc and
// friends; none allocates or spawns threads.
#pragma once

#include <cstddef>
#include <cstdint>

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

// out[i] = nearest half-precision value of x[i] (out may be x).
using RoundHalfFn = void (*)(const float* x, int64_t n, float* out);

// Half <-> float for KV cache rows.
using HalfToFloatFn = void (*)(const uint16_t* in, int64_t n, float* out);
using FloatToHalfFn = void (*)(const float* in, int64_t n, uint16_t* out);

// dot(a, b) over n floats.
using DotFn = float (*)(const float* a, const float* b, int64_t n);

// One step of online-softmax attention: one query `q` (hd floats) against the n keys and values
// of one KV block (n rows of hd, F32 or F16), folded into the query's running state: max score
// *run_max, sum of exp(score - max) *run_sum, and acc (hd floats, the exp-weighted sum of values).
// Scores are dot(q, k) * scale; `scores` is n floats of scratch. Both forms do the same
// arithmetic (F16 to F32 is exact), so it does not matter which one a caller uses.
using AttendBlockF32Fn = void (*)(const float* q, const float* k, const float* v, int64_t n,
                                  int64_t hd, float scale, float* scores, float* run_max,
                                  float* run_sum, float* acc);
using AttendBlockF16Fn = void (*)(const float* q, const uint16_t* k, const uint16_t* v, int64_t n,
                                  int64_t hd, float scale, float* scores, float* run_max,
                                  float* run_sum, float* acc);

// Activations rounded to Q8_0 (RoundToQ8_0 in kernels/q8_0.h) in the form the integer kernels
// read, one record of Q8ActivationRowBytes(k) bytes per row of k inputs (nb = k / 32 blocks):
//   float scale[nb]; int32 offset[nb] (-128 x the block's sum of q, which cancels the +128 the
//   packed weights carry); int8 q[k].
inline size_t Q8ActivationRowBytes(int64_t k) { return static_cast<size_t>(k / 32) * 40; }
using QuantizeQ8RowsFn = void (*)(const float* x, int64_t m, int64_t k, uint8_t* out);

// Like PanelGemmFn for Q8_0 panels, with the activations given as QuantizeQ8RowsFn wrote them:
// per block an exact integer dot product, then one FMA of it with the two scales' product.
using PanelGemmQ8Fn = void (*)(const uint8_t* panels, size_t panel_stride, int64_t rows,
                               const uint8_t* xq, int64_t cols, int64_t k, float* y, int64_t ldy);

struct SimdKernels {
  const char* isa;
  DotRowsFn dot_rows;
  PanelGemmFn panel_gemm;
  DequantRowFn dequant_row;
  RoundHalfFn round_half;
  HalfToFloatFn half_to_float;
  FloatToHalfFn float_to_half;
  DotFn dot;
  AttendBlockF32Fn attend_block_f32;
  AttendBlockF16Fn attend_block_f16;
  // Integer Q8_0 products (AVX-512 VNNI); null where the CPU lacks them, and then Q8_0 panels
  // go through panel_gemm with the activations rounded to Q8_0 as floats (same values).
  QuantizeQ8RowsFn quantize_q8_rows = nullptr;
  PanelGemmQ8Fn panel_gemm_q8 = nullptr;
};

// The best kernels this CPU supports (AVX-512 when present, else portable C++).
const SimdKernels& BestSimdKernels();
// The portable kernels (tests compare both).
const SimdKernels& ScalarSimdKernels();
// nullptr when the CPU lacks AVX-512F/BW/VL/DQ, F16C and FMA. With VNNI as well, Q8_0 products
// are integer ones unless `allow_vnni` is false (tests compare both).
const SimdKernels* Avx512SimdKernels(bool allow_vnni = true);

}  // namespace bmad::kernels::cpu
