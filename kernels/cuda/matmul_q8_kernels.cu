// Q8_0 matrix products on the GPU, reading the weights in GGUF's row layout (34-byte blocks: an
// F16 scale, then 32 int8 values) and dequantizing in registers or shared memory; the activations
// come in as F32 already rounded to Q8_0 by the backend (RoundToQ8_0, Backend::MatMul's
// semantics), accumulation is F32.
//   - GEMV (m <= kQ8GemvMaxRows): one warp per weight row, every activation row at once, so the
//     weights (the bytes that matter at decode) are read once.
//   - Tiled (m > kQ8GemvMaxRows): 64 × 64 output tiles, stepping one Q8_0 block (32 inputs) at a
//     time through shared memory. Plain FMA, no tensor cores: correct first, fast later.
// The summation order differs between the two (and from the CPU), so unlike the CPU backend a row
// of y may change in its last bits with m.
//
// Checked on an H200 against the CPU backend by tests/gpu/run.sh. On an H200 the tiled kernel
// reaches about 2% of cuBLAS F16 at m = 4096 (docs/benchmarks.md): correct, not yet fast.
#include "kernels/cuda/kernel_launchers.h"

namespace bmad::cuda::launch {
namespace {

constexpr int kQ8Bytes = 34;

__device__ float LoadScale(const unsigned char* block) {
  return __half2float(*reinterpret_cast<const __half*>(block));
}

// Each lane takes 2 values of one of the 2 blocks a warp covers per iteration: the int8 pair is
// one 16-bit load (blocks are 2-byte aligned), the activations one float2 load.
__global__ void Q8GemvKernel(const float* x, int m, const unsigned char* w, size_t row_bytes,
                             int64_t rows, int64_t cols, float* y) {
  const int lane = threadIdx.x % 32;
  const int64_t r = blockIdx.x * int64_t{kQ8GemvWarpsPerBlock} + threadIdx.x / 32;
  if (r >= rows) return;
  const unsigned char* row = w + static_cast<size_t>(r) * row_bytes;
  const int64_t n_blocks = cols / 32;
  float acc[kQ8GemvMaxRows];
#pragma unroll
  for (int i = 0; i < kQ8GemvMaxRows; ++i) acc[i] = 0.0f;
  const int pair = lane % 16;
  for (int64_t b = lane / 16; b < n_blocks; b += 2) {
    const unsigned char* block = row + b * kQ8Bytes;
    const float d = LoadScale(block);
    const unsigned short q2 = *reinterpret_cast<const unsigned short*>(block + 2 + 2 * pair);
    const float w0 = d * static_cast<float>(static_cast<signed char>(q2 & 0xff));
    const float w1 = d * static_cast<float>(static_cast<signed char>(q2 >> 8));
    const int64_t c = b * 32 + 2 * pair;
#pragma unroll
    for (int i = 0; i < kQ8GemvMaxRows; ++i) {
      if (i < m) {
        const float2 xv = *reinterpret_cast<const float2*>(x + i * cols + c);
        acc[i] = fmaf(w1, xv.y, fmaf(w0, xv.x, acc[i]));
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kQ8GemvMaxRows; ++i) {
    if (i < m) {
      float v = acc[i];
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      if (lane == 0) y[i * rows + r] = v;
    }
  }
}

__global__ void Q8TiledKernel(const float* x, int64_t m, const unsigned char* w, size_t row_bytes,
                              int64_t rows, int64_t cols, float* y) {
  constexpr int kPad = 4;
  __shared__ float xs[32][kQ8TileRows + kPad];  // [k][activation row]
  __shared__ float ws[32][kQ8TileCols + kPad];  // [k][weight row]
  const int t = threadIdx.x;
  const int64_t row0 = blockIdx.y * int64_t{kQ8TileRows};  // activation rows
  const int64_t col0 = blockIdx.x * int64_t{kQ8TileCols};  // weight rows (outputs)
  const int ty = t / 16, tx = t % 16;
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < cols; k0 += 32) {
    for (int idx = t; idx < kQ8TileRows * 32; idx += kQ8TileThreads) {
      const int rr = idx / 32, k = idx % 32;
      const int64_t gr = row0 + rr;
      xs[k][rr] = gr < m ? x[gr * cols + k0 + k] : 0.0f;
    }
    for (int idx = t; idx < kQ8TileCols * 32; idx += kQ8TileThreads) {
      const int wr = idx / 32, k = idx % 32;
      const int64_t gw = col0 + wr;
      float v = 0.0f;
      if (gw < rows) {
        const unsigned char* block = w + static_cast<size_t>(gw) * row_bytes + (k0 / 32) * kQ8Bytes;
        v = LoadScale(block) * static_cast<float>(static_cast<signed char>(block[2 + k]));
      }
      ws[k][wr] = v;
    }
    __syncthreads();
#pragma unroll 8
    for (int k = 0; k < 32; ++k) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        a[i] = xs[k][ty * 4 + i];
        b[i] = ws[k][tx * 4 + i];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t gr = row0 + ty * 4 + i;
    if (gr >= m) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t gc = col0 + tx * 4 + j;
      if (gc < rows) y[gr * rows + gc] = acc[i][j];
    }
  }
}

}  // namespace

int Q8MatMul(const float* x, int64_t m, const void* w, size_t row_bytes, int64_t rows, int64_t cols,
             float* y, cudaStream_t stream) {
  if (m == 0 || rows == 0) return 0;
  const Q8Launch l = Q8MatMulLaunch(m, rows);
  const auto* wb = static_cast<const unsigned char*>(w);
  if (l.kernel == Q8Kernel::kGemv) {
    BMAD_LAUNCH(Q8GemvKernel, static_cast<unsigned>(l.grid_x), l.threads, 0, stream, x,
                static_cast<int>(m), wb, row_bytes, rows, cols, y);
  } else {
    const dim3 grid(static_cast<unsigned>(l.grid_x), static_cast<unsigned>(l.grid_y));
    BMAD_LAUNCH(Q8TiledKernel, grid, l.threads, 0, stream, x, m, wb, row_bytes, rows, cols, y);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace bmad::cuda::launch
