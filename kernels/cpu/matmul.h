// y = x · Wᵀ on the CPU for F32, F16 and Q8_0 weights (see Backend::MatMul for the contract).
//
// Three regimes, by the number of activation rows m (tokens in the step):
//  - m >= kSgemmMinRows (prefill): W is dequantized a tile of rows at a time into a per-thread
//    buffer that stays in L2, and OpenBLAS sgemm multiplies the whole activation matrix by it.
//  - 1 < m < kSgemmMinRows (batched decode): register-blocked dot products (4 weight rows x up to
//    4 activation rows per tile); F16/Q8_0 rows are dequantized once per tile of rows into
//    the thread's buffer first, so each weight is converted once however many rows use it.
//  - m == 1 (single-sequence decode, memory-bound): 8 weight rows streamed at a time,
//    converted in registers.
// Work is split over the thread pool by rows of W; OpenBLAS itself runs single-threaded.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "kernels/cpu/simd_kernels.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/weight_matrix.h"

namespace bmad::kernels::cpu {

class MatMulEngine {
 public:
  static constexpr int64_t kSgemmMinRows = 32;

  MatMulEngine(ThreadPool& pool, const SimdKernels& simd);

  void Run(const float* x, int64_t m, const WeightMatrix& w, float* y);

  // Growth of internal buffers counts as a system allocation (the engine reports these).
  uint64_t buffer_allocations() const { return buffer_allocations_.load(); }

 private:
  float* ThreadBuffer(int thread, size_t floats);
  void RunSgemm(const float* x, int64_t m, const WeightMatrix& w, float* y);
  void RunDot(const float* x, int64_t m, const WeightMatrix& w, float* y);

  ThreadPool& pool_;
  const SimdKernels& simd_;
  std::vector<float> rounded_x_;
  std::vector<std::vector<float>> thread_buffers_;
  std::atomic<uint64_t> buffer_allocations_{0};
};

}  // namespace bmad::kernels::cpu
