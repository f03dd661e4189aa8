// The CUDA backend's small kernels: F16 and Q8_0 rounding of activations, embedding rows, RMSNorm, RoPE, SwiGLU,
// residual add, softmax, argmax and the KV cache store. Arithmetic follows the CPU backend's
// order where it is cheap to (explicit _rn intrinsics where the compiler would otherwise fuse a
// multiply and an add the CPU does separately), so results stay within a few ulps of it.
//
// Checked on an H200 against the CPU backend by tests/gpu/run.sh.
#include <cfloat>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/kernel_launchers.h"

namespace bmad::cuda::launch {
namespace {

__global__ void ConvertToHalfKernel(const float* x, int64_t n, __half* out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = __float2half_rn(x[i]);
  }
}

// One thread per block of 32 activations: kernels/q8_0.h's RoundToQ8_0, step for step.
__global__ void RoundToQ8_0Kernel(const float* x, int64_t n_blocks, float* out) {
  for (int64_t b = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; b < n_blocks;
       b += int64_t{gridDim.x} * blockDim.x) {
    const float* xb = x + b * 32;
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = fmaxf(amax, fabsf(xb[j]));
    const float id = amax != 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
    const float scale = __half2float(__float2half_rn(__fdiv_rn(amax, 127.0f)));
    for (int j = 0; j < 32; ++j) {
      const float r = __fmul_rn(xb[j], id);
      const float q = r != r ? 0.0f : rintf(fminf(fmaxf(r, -127.0f), 127.0f));  // NaN: 0
      out[b * 32 + j] = __fmul_rn(scale, q);
    }
  }
}

__global__ void EmbeddingKernel(int type, const unsigned char* table, size_t row_bytes,
                                int64_t cols, const int32_t* ids, float* out) {
  const unsigned char* row = table + static_cast<size_t>(ids[blockIdx.x]) * row_bytes;
  float* o = out + blockIdx.x * cols;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float v;
    if (type == kTypeF32) {
      v = reinterpret_cast<const float*>(row)[c];
    } else if (type == kTypeF16) {
      v = __half2float(reinterpret_cast<const __half*>(row)[c]);
    } else {  // Q8_0: 34-byte blocks, an F16 scale then 32 int8 values
      const unsigned char* block = row + (c / 32) * 34;
      const float d = __half2float(*reinterpret_cast<const __half*>(block));
      v = __fmul_rn(d, static_cast<float>(static_cast<signed char>(block[2 + c % 32])));
    }
    o[c] = v;
  }
}

__global__ void RmsNormKernel(const float* x, const float* weight, int64_t dim, float eps,
                              float* out) {
  __shared__ float shared[32];
  const float* xr = x + blockIdx.x * dim;
  float* o = out + blockIdx.x * dim;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) sum = fmaf(xr[i], xr[i], sum);
  sum = BlockSum(sum, shared);
  const float scale = 1.0f / sqrtf(__fadd_rn(sum / static_cast<float>(dim), eps));
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    o[i] = __fmul_rn(__fmul_rn(xr[i], scale), weight[i]);
  }
}

// RoPE's per-pair frequency divisors, by value (a kernel parameter: no upload, no lifetime).
struct RopeFreqFactors {
  float value[kRopeFreqFactorCapacity];
  int32_t count;  // 0: none (all 1)
};

// One thread per (row, rotated pair); the angle in double, as the CPU backend computes it.
__global__ void RopeKernel(float* x, const int32_t* positions, int64_t rows, int64_t n_heads,
                           int64_t head_dim, int64_t rope_dim, float freq_base, float freq_scale,
                           RopeFreqFactors factors, int64_t heads_per_thread) {
  const int64_t half = rope_dim / 2;
  const int64_t groups = (n_heads + heads_per_thread - 1) / heads_per_thread;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < rows * half * groups;
       idx += int64_t{gridDim.x} * blockDim.x) {
    // Consecutive threads take consecutive pairs of one row and group: coalesced.
    const int64_t g = idx / (rows * half), t = idx % (rows * half) / half, i = idx % half;
    const float pos = __fmul_rn(static_cast<float>(positions[t]), freq_scale);
    double inv_freq = pow(double(freq_base), -2.0 * double(i) / double(rope_dim));
    if (factors.count != 0) inv_freq /= double(factors.value[i]);
    const double theta = double(pos) * inv_freq;
    const float c = static_cast<float>(cos(theta)), s = static_cast<float>(sin(theta));
    const int64_t h_end = (g + 1) * heads_per_thread < n_heads ? (g + 1) * heads_per_thread : n_heads;
    for (int64_t h = g * heads_per_thread; h < h_end; ++h) {
      float* v = x + (t * n_heads + h) * head_dim;
      const float x0 = v[2 * i], x1 = v[2 * i + 1];
      v[2 * i] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
      v[2 * i + 1] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
    }
  }
}

__global__ void SwiGluKernel(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float g = gate[i];
    out[i] = __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), up[i]);
  }
}

__global__ void AddKernel(float* x, const float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    x[i] = __fadd_rn(x[i], y[i]);
  }
}

__global__ void SoftmaxKernel(float* x, int64_t n) {
  __shared__ float shared[32];
  float* row = x + blockIdx.x * n;
  float mx = -FLT_MAX;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) mx = fmaxf(mx, row[i]);
  mx = BlockMax(mx, shared);
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float e = expf(row[i] - mx);
    row[i] = e;
    sum += e;
  }
  sum = BlockSum(sum, shared);
  const float inv = 1.0f / sum;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) row[i] *= inv;
}

// The largest value's index, the lowest index among equal values (as std::max_element).
constexpr int64_t kNoIndex = 0x7fffffffffffffffLL;

__device__ bool Better(float va, int64_t ia, float vb, int64_t ib) {
  if (ia == kNoIndex) return false;
  if (ib == kNoIndex) return true;
  return va > vb || (va == vb && ia < ib);
}

__device__ void WarpArgmax(float& v, int64_t& idx) {
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int64_t oi = __shfl_xor_sync(0xffffffffu, idx, o);
    if (Better(ov, oi, v, idx)) {
      v = ov;
      idx = oi;
    }
  }
}

__device__ int WarpAny(int flag) {
  for (int o = 16; o > 0; o >>= 1) flag |= __shfl_xor_sync(0xffffffffu, flag, o);
  return flag;
}

// The host sampler's greedy pick: the largest value, the lowest index on ties; -1 when the row
// holds a NaN or +inf, or nothing above -inf.
__global__ void ArgmaxKernel(const float* x, int64_t n, int32_t* out) {
  __shared__ float best_v[32];
  __shared__ int64_t best_i[32];
  __shared__ int bad_w[32];
  const float* row = x + blockIdx.x * n;
  float v = -INFINITY;
  int64_t idx = kNoIndex;
  int bad = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {  // i rises: ties keep the first
    const float e = row[i];
    if (!(e < INFINITY)) bad = 1;  // NaN or +inf
    if (e > v) {
      v = e;
      idx = i;
    }
  }
  WarpArgmax(v, idx);
  bad = WarpAny(bad);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  if (lane == 0) {
    best_v[warp] = v;
    best_i[warp] = idx;
    bad_w[warp] = bad;
  }
  __syncthreads();
  if (warp != 0) return;
  v = lane < warps ? best_v[lane] : -INFINITY;
  idx = lane < warps ? best_i[lane] : kNoIndex;
  bad = lane < warps ? bad_w[lane] : 0;
  WarpArgmax(v, idx);
  bad = WarpAny(bad);
  if (lane == 0) out[blockIdx.x] = static_cast<int32_t>(bad || idx == kNoIndex ? -1 : idx);
}

__global__ void StoreKvKernel(KvArgs kv, const float* k, const float* v, const int32_t* slots) {
  const int32_t row = slots[3 * blockIdx.x], block = slots[3 * blockIdx.x + 1],
                slot = slots[3 * blockIdx.x + 2];
  const int width = kv.n_kv_heads * kv.head_dim;
  for (int e = threadIdx.x; e < width; e += blockDim.x) {
    const int h = e / kv.head_dim, d = e % kv.head_dim;
    const int64_t at =
        int64_t{block} * kv.block_stride + (int64_t{h} * kv.block_size + slot) * kv.head_dim + d;
    const __half kh = __float2half_rn(k[int64_t{row} * width + e]);
    const __half vh = __float2half_rn(v[int64_t{row} * width + e]);
    kv.k[at] = __half_as_ushort(kh);
    kv.v[at] = __half_as_ushort(vh);
  }
}

int Finish() { return static_cast<int>(cudaGetLastError()); }

}  // namespace

int ConvertToHalf(const float* x, int64_t n, uint16_t* out, cudaStream_t stream) {
  const Launch1d l = ElementwiseLaunch(n);
  if (l.blocks == 0) return 0;
  BMAD_LAUNCH(ConvertToHalfKernel, static_cast<unsigned>(l.blocks), l.threads, 0, stream, x, n,
              reinterpret_cast<__half*>(out));
  return Finish();
}

int RoundToQ8_0(const float* x, int64_t n, float* out, cudaStream_t stream) {
  const Launch1d l = ElementwiseLaunch(n / 32);
  if (l.blocks == 0) return 0;
  BMAD_LAUNCH(RoundToQ8_0Kernel, static_cast<unsigned>(l.blocks), l.threads, 0, stream, x, n / 32,
              out);
  return Finish();
}

int Embedding(int type, const void* table, size_t row_bytes, int64_t cols, const int32_t* ids,
              int64_t n_ids, float* out, cudaStream_t stream) {
  if (n_ids == 0) return 0;
  BMAD_LAUNCH(EmbeddingKernel, static_cast<unsigned>(n_ids), 256, 0, stream, type,
              static_cast<const unsigned char*>(table), row_bytes, cols, ids, out);
  return Finish();
}

int RmsNorm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps, float* out,
            cudaStream_t stream) {
  if (rows == 0) return 0;
  BMAD_LAUNCH(RmsNormKernel, static_cast<unsigned>(rows), RowReductionThreads(dim), 0, stream, x,
              weight, dim, eps, out);
  return Finish();
}

int Rope(float* x, const int32_t* positions, int64_t rows, int64_t n_heads, int64_t head_dim,
         int64_t rope_dim, float freq_base, float freq_scale, const float* freq_factors,
         cudaStream_t stream) {
  const int64_t heads_per_thread = RopeHeadsPerThread(rows, rope_dim / 2, n_heads);
  RopeFreqFactors factors{};
  if (freq_factors != nullptr) {
    if (rope_dim / 2 > kRopeFreqFactorCapacity) return static_cast<int>(cudaErrorInvalidValue);
    for (int64_t i = 0; i < rope_dim / 2; ++i) factors.value[i] = freq_factors[i];
    factors.count = static_cast<int32_t>(rope_dim / 2);
  }
  const Launch1d l = ElementwiseLaunch(rows * (rope_dim / 2) *
                                       ((n_heads + heads_per_thread - 1) / heads_per_thread));
  if (l.blocks == 0) return 0;
  BMAD_LAUNCH(RopeKernel, static_cast<unsigned>(l.blocks), l.threads, 0, stream, x, positions, rows,
              n_heads, head_dim, rope_dim, freq_base, freq_scale, factors, heads_per_thread);
  return Finish();
}

int SwiGlu(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream) {
  const Launch1d l = ElementwiseLaunch(n);
  if (l.blocks == 0) return 0;
  BMAD_LAUNCH(SwiGluKernel, static_cast<unsigned>(l.blocks), l.threads, 0, stream, gate, up, n,
              out);
  return Finish();
}

int Add(float* x, const float* y, int64_t n, cudaStream_t stream) {
  const Launch1d l = ElementwiseLaunch(n);
  if (l.blocks == 0) return 0;
  BMAD_LAUNCH(AddKernel, static_cast<unsigned>(l.blocks), l.threads, 0, stream, x, y, n);
  return Finish();
}

int Softmax(float* x, int64_t rows, int64_t n, cudaStream_t stream) {
  if (rows == 0) return 0;
  BMAD_LAUNCH(SoftmaxKernel, static_cast<unsigned>(rows), RowReductionThreads(n), 0, stream, x, n);
  return Finish();
}

int Argmax(const float* x, int64_t rows, int64_t n, int32_t* out, cudaStream_t stream) {
  if (rows == 0) return 0;
  BMAD_LAUNCH(ArgmaxKernel, static_cast<unsigned>(rows), RowReductionThreads(n), 0, stream, x, n,
              out);
  return Finish();
}

int StoreKv(const KvArgs& kv, const float* k, const float* v, const int32_t* slots, int64_t n,
            cudaStream_t stream) {
  if (n == 0) return 0;
  const int width = kv.n_kv_heads * kv.head_dim;
  BMAD_LAUNCH(StoreKvKernel, static_cast<unsigned>(n), width < 256 ? 32 * ((width + 31) / 32) : 256,
              0, stream, kv, k, v, slots);
  return Finish();
}

}  // namespace bmad::cuda::launch
