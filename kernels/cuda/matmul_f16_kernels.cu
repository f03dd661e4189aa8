// F16 matrix-vector products for decode steps of a few sequences, where cuBLAS's GEMM kernels
// read the weights well under the memory's bandwidth and the input needs a separate F32 -> F16
// conversion launch first. One warp per weight row: each lane takes 8 columns at a time as one
// 16-byte load, with kGemvLoads of them in flight, and reads the F32 activations directly,
// rounding them to F16 in registers as Backend::MatMul's F16 semantics say (F16 input times F16
// weight, F32 accumulation). The sum's order differs from the CPU's and from cuBLAS's (last bits).
#include "kernels/cuda/kernel_launchers.h"

namespace bmad::cuda::launch {
namespace {

constexpr int kGemvLoads = 4;  // 8 measured slower on an H200 (more registers, fewer warps)

__device__ float RoundToHalf(float v) { return __half2float(__float2half_rn(v)); }

template <int kM>
__global__ void __launch_bounds__(kF16GemvWarpsPerBlock * 32)
    F16GemvKernel(const float* __restrict__ x, const uint16_t* __restrict__ w, int64_t ldw,
                  int64_t rows, int64_t cols, float* __restrict__ y) {
  const int lane = threadIdx.x % 32;
  const int64_t r = blockIdx.x * int64_t{kF16GemvWarpsPerBlock} + threadIdx.x / 32;
  if (r >= rows) return;  // a whole warp: the shuffles below see every lane of a live warp
  const uint4* wrow = reinterpret_cast<const uint4*>(w + r * ldw);
  BMAD_CHECK_ALIGNED16(wrow);
  const int64_t chunks = cols / 8;
  float acc[kM];
#pragma unroll
  for (int i = 0; i < kM; ++i) acc[i] = 0.0f;
  for (int64_t c0 = lane; c0 < chunks; c0 += 32 * kGemvLoads) {
    uint4 wv[kGemvLoads];
#pragma unroll
    for (int u = 0; u < kGemvLoads; ++u) {
      const int64_t c = c0 + 32 * u;
      wv[u] = c < chunks ? wrow[c] : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kGemvLoads; ++u) {
      const int64_t c = c0 + 32 * u;
      if (c >= chunks) continue;
      const __half2* h = reinterpret_cast<const __half2*>(&wv[u]);
#pragma unroll
      for (int i = 0; i < kM; ++i) {
        const float4* xv = reinterpret_cast<const float4*>(x + i * cols + c * 8);
        BMAD_CHECK_ALIGNED16(xv);
        const float4 a = xv[0], b = xv[1];
        const float xs[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float2 wf = __half22float2(h[e]);
          acc[i] = fmaf(RoundToHalf(xs[2 * e]), wf.x, acc[i]);
          acc[i] = fmaf(RoundToHalf(xs[2 * e + 1]), wf.y, acc[i]);
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kM; ++i) {
    float v = acc[i];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) y[i * rows + r] = v;
  }
}

}  // namespace

int F16Gemv(const float* x, int64_t m, const void* w, size_t row_bytes, int64_t rows,
            int64_t cols, float* y, cudaStream_t stream) {
  if (m == 0 || rows == 0) return 0;
  const auto blocks = static_cast<unsigned>((rows + kF16GemvWarpsPerBlock - 1) /
                                            kF16GemvWarpsPerBlock);
  const auto* wh = static_cast<const uint16_t*>(w);
  const auto ldw = static_cast<int64_t>(row_bytes / 2);
  constexpr int kThreads = kF16GemvWarpsPerBlock * 32;
  switch (m) {
    case 1:
      BMAD_LAUNCH(F16GemvKernel<1>, blocks, kThreads, 0, stream, x, wh, ldw, rows, cols, y);
      break;
    case 2:
      BMAD_LAUNCH(F16GemvKernel<2>, blocks, kThreads, 0, stream, x, wh, ldw, rows, cols, y);
      break;
    case 3:
      BMAD_LAUNCH(F16GemvKernel<3>, blocks, kThreads, 0, stream, x, wh, ldw, rows, cols, y);
      break;
    case 4:
      BMAD_LAUNCH(F16GemvKernel<4>, blocks, kThreads, 0, stream, x, wh, ldw, rows, cols, y);
      break;
    default:
      return static_cast<int>(cudaErrorInvalidValue);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace bmad::cuda::launch
