// Host-callable launchers of the CUDA backend's kernels (defined in the .cu files beside this).
// Each takes device pointers and the compute stream, launches, and returns the launch's
// cudaError_t as an int (0 = cudaSuccess) for the caller's BMAD_CUDA_CHECK. Launch shapes come
// from launch_params.h; the backend (cuda_backend.cc) does every host-side decision and upload.
//
// Included by nvcc (C++17) and by the host compiler: no project headers beyond launch_params.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/cuda_compat.h"
#include "kernels/cuda/launch_params.h"

namespace bmad::cuda::launch {

// Attention metadata (`meta` below) is one int32 array built by op_metadata.h:
//   sequences: kSeqFields ints each {row_begin, row_count, start_pos, table_offset}
//   tables:    every sequence's block table, concatenated (table_offset indexes it)

struct KvArgs {
  uint16_t* k = nullptr;  // F16 bits
  uint16_t* v = nullptr;
  int64_t block_stride = 0;  // elements
  int n_kv_heads = 0;
  int block_size = 0;
  int head_dim = 0;
};

// Element types of weight rows, as kernels::WeightType (kF32, kF16, kQ8_0).
inline constexpr int kTypeF32 = 0;
inline constexpr int kTypeF16 = 1;
inline constexpr int kTypeQ8_0 = 2;

int ConvertToHalf(const float* x, int64_t n, uint16_t* out, cudaStream_t stream);
// out = x rounded to Q8_0 block by block (kernels/q8_0.h RoundToQ8_0); n a multiple of 32.
int RoundToQ8_0(const float* x, int64_t n, float* out, cudaStream_t stream);

int Embedding(int type, const void* table, size_t row_bytes, int64_t cols, const int32_t* ids,
              int64_t n_ids, float* out, cudaStream_t stream);
int RmsNorm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps, float* out,
            cudaStream_t stream);
// freq_factors: null, or rope_dim / 2 (at most kRopeFreqFactorCapacity) divisors of the pairs'
// frequencies in host memory, passed to the kernel by value.
inline constexpr int64_t kRopeFreqFactorCapacity = 256;
int Rope(float* x, const int32_t* positions, int64_t rows, int64_t n_heads, int64_t head_dim,
         int64_t rope_dim, float freq_base, float freq_scale, const float* freq_factors,
         cudaStream_t stream);
int SwiGlu(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream);
int Add(float* x, const float* y, int64_t n, cudaStream_t stream);
int Softmax(float* x, int64_t rows, int64_t n, cudaStream_t stream);
int Argmax(const float* x, int64_t rows, int64_t n, int32_t* out, cudaStream_t stream);

// One row's sampling parameters, laid out as kernels::RowSampling (kernels/sample_row.h, whose
// definition SampleRows follows; the backend checks the layouts match).
struct RowSamplingArgs {
  float temperature;
  int32_t top_k;
  float top_p;
  float min_p;
  double uniform;
};
// out[r]: a token drawn from row r of x [rows, n] by params[r] (device memory), -1 for a row the
// host sampler would refuse (sampling_kernels.cu).
int SampleRows(const float* x, int64_t rows, int64_t n, const RowSamplingArgs* params,
               int32_t* out, cudaStream_t stream);

// `slots`: n triples {activation row, block id, slot in block}.
int StoreKv(const KvArgs& kv, const float* k, const float* v, const int32_t* slots, int64_t n,
            cudaStream_t stream);

// y[m, rows] = x[m, cols] · Wᵀ, W Q8_0 in GGUF row layout (34-byte blocks, rows row_bytes apart).
// x as given: the backend rounds it to Q8_0 first (RoundToQ8_0).
int Q8MatMul(const float* x, int64_t m, const void* w, size_t row_bytes, int64_t rows, int64_t cols,
             float* y, cudaStream_t stream);

// y[m, rows] = x[m, cols] · Wᵀ for W F16 (rows row_bytes apart), 1 <= m <= kF16GemvMaxRows,
// x rounded to F16 in the kernel; the backend checks F16GemvApplies first.
int F16Gemv(const float* x, int64_t m, const void* w, size_t row_bytes, int64_t rows,
            int64_t cols, float* y, cudaStream_t stream);

// `meta` holds the sequences then the tables; `work` the PrefillWorkItems (2 ints each).
int AttentionPrefill(const KvArgs& kv, const float* q, const int32_t* meta, int64_t n_seqs,
                     const int32_t* work, int64_t n_work, int64_t n_heads, float scale, float* out,
                     cudaStream_t stream);

// `partials`: plan.partial_floats floats when plan.splits > 1.
int AttentionDecode(const KvArgs& kv, const float* q, const int32_t* meta, const DecodeLaunch& plan,
                    int64_t n_heads, float scale, float* partials, float* out, cudaStream_t stream);

}  // namespace bmad::cuda::launch
