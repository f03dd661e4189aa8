// y = x · Wᵀ on the CPU for F32, F16, BF16, Q8_0 (Q4_0 and Q5_0 packed as Q8_0; Q4_1 and Q5_1
// as 8-bit panels with mins) and K-quant weights (see Backend::MatMul for the contract: activations rounded as ActivationRoundingOf
// the weights' type says).
//
// Packed weights (the normal case, see packed_weights.h): groups of 12 panels (192 outputs) are
// handed to the threads; each multiplies its panels by every activation row with register tiles
// of 16*NP outputs x RN rows (NP*RN <= 24 accumulators), converting F16/Q8_0 in registers.
// With AVX-512 VNNI, Q8_0 panels multiply 8-bit activations in integers instead (RunPanelsQ8).
// Every output is one FMA chain over the inputs in order, so a row's result is bit-identical
// whatever else is in the batch, and whether a prompt is prefilled in one step or in chunks.
//
// Row-layout weights (tests, and matrices nobody prepared): register-blocked dot products, or,
// when enabled, OpenBLAS sgemm on dequantized tiles for m >= kSgemmMinRows (faster than the dot
// products for prefill, but its summation order depends on m).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "kernels/cpu/scratch_buffers.h"
#include "kernels/cpu/simd_kernels.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/weight_matrix.h"

namespace bmad::kernels::cpu {

class MatMulEngine {
 public:
  static constexpr int64_t kSgemmMinRows = 32;

  // `scratch` has one slot per pool thread plus one (the last) for the rounded input.
  MatMulEngine(ThreadPool& pool, const SimdKernels& simd, ScratchBuffers& scratch,
               bool sgemm_for_rows_layout);

  void Run(const float* x, int64_t m, const WeightMatrix& w, float* y);
  // ys[i] = x · ws[i]ᵀ, each as Run computes it. Packed weights of one type and width share one
  // rounding of x and one parallel loop over all their panels (fewer waits for the slower
  // thread than one loop each); anything else runs one by one.
  void RunShared(const float* x, int64_t m, std::span<const WeightMatrix* const> ws,
                 std::span<float* const> ys);

 private:
  // fn(first_row, rows) over [0, m) in blocks, on the pool when m x k is large.
  void ForRowBlocks(int64_t m, int64_t k, const std::function<void(int64_t, int64_t)>& fn);
  // fn(weight index, first panel, first output row, rows, thread) for each group of packed
  // panels (how many depends on the m activation rows) of every weight in ws, in one loop on
  // the pool.
  void ForPanelGroups(
      int64_t m, std::span<const WeightMatrix* const> ws,
      const std::function<void(size_t, const uint8_t*, int64_t, int64_t, int)>& fn);
  // Whether the panel loop's threads each prepare (round or quantize) their own copy of the
  // m x k activations in their scratch slot; if so, reserves `floats` in each thread's slot and
  // clears input_ready_.
  bool PrepareInputPerThread(int64_t m, int64_t k, size_t floats);
  // x rounded as products with weights of w's type take it (F16, BF16, or Q8_0 values without
  // VNNI); x itself for F32.
  const float* RoundedInput(const float* x, int64_t m, const WeightMatrix& w);
  // out = n values of x rounded as `rounding` says (F16, BF16 or Q8_0 values).
  void Round(ActivationRounding rounding, const float* x, int64_t n, float* out) const;
  void RunPanels(const float* x, int64_t m, std::span<const WeightMatrix* const> ws,
                 std::span<float* const> ys);
  void RunPanelsQ8(const float* x, int64_t m, std::span<const WeightMatrix* const> ws,
                   std::span<float* const> ys);
  void RunSgemm(const float* x, int64_t m, const WeightMatrix& w, float* y);
  void RunDot(const float* x, int64_t m, const WeightMatrix& w, float* y);
  // Q4_K and Q6_K (always row layout): x rounded to Q8_K once (into the last scratch slot),
  // then integer products per super-block (SimdKernels::kquant_dot_rows).
  const ActivationBlockQ8_K* QuantizeQ8K(const float* x, int64_t m, int64_t k);
  void RunKQuant(const ActivationBlockQ8_K* xq, int64_t m, const WeightMatrix& w, float* y);

  ThreadPool& pool_;
  const SimdKernels& simd_;
  ScratchBuffers& scratch_;
  const bool sgemm_for_rows_layout_;
  std::vector<int64_t> task_starts_;  // ForPanelGroups' first task of each weight
  std::vector<uint8_t> input_ready_;  // per thread: its copy of this loop's input is prepared
};

}  // namespace bmad::kernels::cpu
