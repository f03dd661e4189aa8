// A small CPU emulator of the CUDA execution model, enough to run the CUDA backend's kernels
// (kernels/cuda/*.cu, compiled as C++ with BMAD_SIMT_EMULATION) on a machine without a GPU and
// compare them with the CPU backend (tests/kernels/cuda_kernels_emulated_test.cc).
//
// Each block runs alone; each of its threads is a fiber on the calling thread, switched only at
// __syncthreads, __syncwarp and warp shuffles, which wait for every live thread of the block (or
// lanes of the warp). So it is deterministic, catches barrier mismatches (a deadlock aborts with
// a message), and `__shared__` variables (function statics here) are shared by the block's
// threads as on a GPU. Dynamic shared memory is filled with NaN bytes before each block so a read
// of something never written shows. It does not model timing, memory ordering between blocks,
// alignment faults or occupancy: it checks logic, not performance or races.
//
// Device types: __half / __half2 hold F16 bits and convert with common/half.h (round to nearest
// even, as __float2half_rn); float math uses the C library, so results can differ from the GPU's
// in the last bits (expf, sinf), never more.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "common/half.h"

// ---- execution-space and memory qualifiers ----
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __align__(n) alignas(n)
#define __launch_bounds__(...)
#define BMAD_DYNAMIC_SHARED(name) unsigned char* name = ::bmad::simt::DynamicShared()
#define BMAD_CHECK_ALIGNED16(p) ::bmad::simt::CheckAligned16(p)
#define BMAD_LAUNCH(kernel, grid, block, shared_bytes, stream, ...)                          \
  (static_cast<void>(stream),                                                                \
   ::bmad::simt::Launch(::bmad::simt::Dim3(grid), ::bmad::simt::Dim3(block), (shared_bytes), \
                        [&] { kernel(__VA_ARGS__); }))

namespace bmad::simt {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
  Dim3() = default;
  Dim3(unsigned x_, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}  // NOLINT
};

// Runs `body` for every thread of every block of the grid (blocks in order x, y, z).
void Launch(Dim3 grid, Dim3 block, size_t shared_bytes, const std::function<void()>& body);

unsigned char* DynamicShared();
void SyncThreads();
void SyncWarp();
// Lane `lane ^ offset`'s value of `v` (all lanes of the warp must call it together).
uint64_t ShuffleXorBits(uint64_t bits, int offset);

// The calling fiber's coordinates.
extern thread_local Dim3 tls_thread_idx, tls_block_idx, tls_block_dim, tls_grid_dim;

// Aborts on an address a 16-byte load (uint4, float4) could not use: x86 reads it, a GPU faults.
void CheckAligned16(const void* p);

// Launches since the process started (tests check a launcher launched anything at all).
uint64_t launches();

}  // namespace bmad::simt

#define threadIdx (::bmad::simt::tls_thread_idx)
#define blockIdx (::bmad::simt::tls_block_idx)
#define blockDim (::bmad::simt::tls_block_dim)
#define gridDim (::bmad::simt::tls_grid_dim)

inline void __syncthreads() { ::bmad::simt::SyncThreads(); }
inline void __syncwarp(unsigned = 0xffffffffu) { ::bmad::simt::SyncWarp(); }

template <typename T>
T __shfl_xor_sync(unsigned, T v, int offset) {
  static_assert(sizeof(T) <= 8, "shuffles move at most 64 bits");
  uint64_t bits = 0;
  __builtin_memcpy(&bits, &v, sizeof(T));
  bits = ::bmad::simt::ShuffleXorBits(bits, offset);
  T out;
  __builtin_memcpy(&out, &bits, sizeof(T));
  return out;
}

// ---- F16 types and conversions ----
struct __half {
  uint16_t bits;
};
struct __half2 {
  __half x, y;
};
struct float2 {
  float x, y;
};
inline float2 make_float2(float x, float y) { return {x, y}; }
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline __half __float2half_rn(float f) { return {::bmad::FloatToHalf(f)}; }
inline float __half2float(__half h) { return ::bmad::HalfToFloat(h.bits); }
inline __half2 __float2half2_rn(float f) { return {__float2half_rn(f), __float2half_rn(f)}; }
inline float2 __half22float2(__half2 h) { return {__half2float(h.x), __half2float(h.y)}; }
inline unsigned short __half_as_ushort(__half h) { return h.bits; }

// ---- intrinsics: IEEE round-to-nearest, never fused (that is what _rn promises) ----
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }

// ---- the runtime calls the launchers make ----
using cudaStream_t = void*;
enum cudaError_t { cudaSuccess = 0, cudaErrorInvalidValue = 1 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
template <typename F>
cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute, int) {
  return cudaSuccess;
}
using dim3 = ::bmad::simt::Dim3;
