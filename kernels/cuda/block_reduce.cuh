// Block-wide reductions for the CUDA kernels (blockDim.x a multiple of 32, at most 1024). Each
// warp reduces by xor shuffles, the warps' results pass through `shared` (32 values), and every
// warp then reduces those the same way: every thread gets the same value, combined in a fixed
// order (so a sum is the same on every run). Each call begins with a barrier, so `shared` may be
// reused by the next call.
//
// Included by the .cu files only (nvcc, or the SIMT emulator through cuda_compat.h).
#pragma once

#include <cfloat>

#include "kernels/cuda/cuda_compat.h"

namespace bmad::cuda::launch {

template <typename T>
__device__ T WarpSum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <typename T>
__device__ T BlockSum(T v, T* shared) {
  v = WarpSum(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __syncthreads();  // `shared` may still be read by a previous reduction
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < warps ? shared[lane] : T{0};
  return WarpSum(v);
}

__device__ inline float BlockMax(float v, float* shared) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < warps ? shared[lane] : -FLT_MAX;
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

}  // namespace bmad::cuda::launch
