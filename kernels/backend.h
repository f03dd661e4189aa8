// The op interface every compute backend implements (cpu/ now, cuda/ later). Each op is
// defined once here, with its shapes; backends differ only in how they compute it.
//
// Conventions: activations are F32, row-major, one row per token ([tokens, features]);
// pointers refer to the backend's memory (host memory for the CPU backend, device memory for
// CUDA). Ops do not allocate on their hot path after their first call at a given size, and do not
// fail: shapes are validated by the caller (the model) once, at load time.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string_view>

#include "common/status.h"
#include "kernels/sample_row.h"
#include "kernels/weight_matrix.h"

namespace bmad::kernels {

struct RopeConfig {
  int64_t rope_dim = 0;        // leading dims of each head that rotate (<= head_dim, even)
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;     // linear position scaling: positions are multiplied by this
  // Per-pair frequency divisors (rope_dim / 2 of them; empty: all 1): pair i turns at
  // pos × freq_scale × freq_base^(-2i/rope_dim) / freq_factors[i]. Llama-3.1 and later ship
  // theirs (the "llama3" RoPE scaling) as the GGUF tensor rope_freqs.weight. Host memory
  // that outlives every call (the model's).
  std::span<const float> freq_factors;
};

// The most factors a RopeConfig may hold (rope_dim up to 512): device kernels take them by value.
inline constexpr int64_t kMaxRopeFreqFactors = 256;

// One layer's paged KV cache, stored as F16. Within a block, this layer's keys are
// [n_kv_heads][block_size][head_dim] (values likewise); consecutive blocks are `block_stride`
// elements apart (blocks hold every layer, so a block is one unit of the KV pool). A
// sequence's token at position p lives in block block_table[p / block_size], slot
// p % block_size:
//   k[block * block_stride + (head * block_size + slot) * head_dim + d]
struct KvLayerView {
  uint16_t* k = nullptr;
  uint16_t* v = nullptr;
  int64_t num_blocks = 0;
  int64_t n_kv_heads = 0;
  int64_t block_size = 0;
  int64_t head_dim = 0;
  int64_t block_stride = 0;  // elements

  int64_t Offset(int64_t block, int64_t head, int64_t slot) const {
    return block * block_stride + (head * block_size + slot) * head_dim;
  }
};

// One sequence's part of a batch: its new tokens are rows [row_begin, row_begin + row_count) of
// the batch's activations, at positions start_pos ... start_pos + row_count - 1.
struct AttentionSequence {
  int64_t row_begin = 0;
  int64_t row_count = 0;
  int32_t start_pos = 0;
  std::span<const int32_t> block_table;  // covers positions [0, start_pos + row_count)
};

// A weight matrix in the layout and memory a backend's MatMul is fastest with, and the storage
// that keeps it alive (null when the view points into the caller's memory).
struct PreparedWeight {
  WeightMatrix view;
  std::shared_ptr<const void> storage;
};

// Where a backend takes its memory from. Unset hooks mean the system allocator; the worker
// points them at its arena so the hot path never reaches the OS.
struct MemoryHooks {
  std::function<void*(size_t bytes)> allocate_weights;  // prepared weights; never freed
  std::function<void*(size_t bytes)> allocate_scratch;  // growable per-thread scratch
  std::function<void(void* p)> free_scratch;
};

// Whether the backend named `backend` ("cpu", "reference", "cuda") multiplies weights of
// `type`: the CUDA backend has kernels for F32, F16 and Q8_0 only. Asked without a device too
// (bmad model check); Backend::HasWeightType answers from it.
inline bool BackendHasWeightType(std::string_view backend, WeightType type) {
  return backend != "cuda" || type == WeightType::kF32 || type == WeightType::kF16 ||
         type == WeightType::kQ8_0;
}

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;

  // Times the backend had to grow its internal scratch (matmul tiles, attention buffers) since it
  // was made; after warm-up it stays flat (the engine exports it with its system allocations).
  virtual uint64_t buffer_allocations() const { return 0; }

  // Must be called before the first PrepareMatMulWeight or op; what the hooks allocate from must
  // outlive the backend (it returns scratch memory when destroyed).
  virtual void SetMemoryHooks(MemoryHooks hooks) { (void)hooks; }
  // Bytes PrepareMatMulWeight(w) will take from allocate_weights (0 when it keeps `w`'s memory).
  virtual size_t PreparedBytes(const WeightMatrix& w) const {
    (void)w;
    return 0;
  }

  // Where the pointers ops take live. Host backends (CPU, reference) compute on host memory the
  // caller may read and write directly; a device backend (CUDA) computes on its own memory, which
  // the caller reaches only through the copies below, and the worker reserves its arena there.
  virtual bool host_memory() const { return true; }
  // Device backends: reserves `bytes` of device memory at once for the worker's arena, owned by
  // the backend and released when it is destroyed; and the bytes free on the device now.
  // AllocateDeviceOverflow/ReleaseDeviceOverflow serve what overflows the arena's workspace
  // (rare, counted by the caller); nullptr when the backend has no device memory to give.
  virtual Result<void*> ReserveDeviceMemory(size_t bytes) {
    (void)bytes;
    return Unimplemented(std::string(name()) + " backend computes on host memory");
  }
  virtual Result<size_t> AvailableDeviceMemory() const {
    return Unimplemented(std::string(name()) + " backend computes on host memory");
  }
  virtual void* AllocateDeviceOverflow(size_t bytes) {
    (void)bytes;
    return nullptr;
  }
  virtual void ReleaseDeviceOverflow(void* p) { (void)p; }
  // A kRows matrix the model reads by rows rather than multiplies (the embedding table, a norm
  // vector as 1 x n), in the backend's memory with its layout unchanged, from allocate_weights.
  // Host backends read it where it is; UploadedBytes is what UploadRows takes.
  virtual PreparedWeight UploadRows(const WeightMatrix& w) { return PreparedWeight{w, nullptr}; }
  // Whether MatMul and Embedding take weights of `type`. The model loader asks before it uses a
  // file, so a type the backend lacks is refused with the tensor's name, never computed wrong.
  virtual bool HasWeightType(WeightType type) const { return BackendHasWeightType(name(), type); }
  virtual size_t UploadedBytes(const WeightMatrix& w) const {
    (void)w;
    return 0;
  }
  // Copies between the caller's host memory and the backend's memory, and within the latter
  // (ranges must not overlap). CopyToHost returns after every op issued so far and reports the
  // first failure among them; the other two are ordered with the ops. Host backends: memcpy.
  virtual Status CopyToDevice(void* dst, const void* host_src, size_t bytes) {
    if (bytes != 0) std::memcpy(dst, host_src, bytes);
    return Status::Ok();
  }
  virtual Status CopyToHost(void* host_dst, const void* src, size_t bytes) {
    if (bytes != 0) std::memcpy(host_dst, src, bytes);
    return Status::Ok();
  }
  virtual Status CopyOnDevice(void* dst, const void* src, size_t bytes) {
    if (bytes != 0) std::memcpy(dst, src, bytes);
    return Status::Ok();
  }
  // Issues a copy to the caller's host memory after every op so far and returns; the bytes are
  // there once Synchronize() returns OK. A device backend copies while the caller goes on only
  // into memory registered with PinHostMemory (page-locked); into any other it may block.
  virtual Status CopyToHostAsync(void* host_dst, const void* src, size_t bytes) {
    return CopyToHost(host_dst, src, bytes);
  }
  // Registers a host buffer that the backend copies into asynchronously (CUDA: page-locks it),
  // until UnpinHostMemory. Host backends have nothing to do.
  virtual Status PinHostMemory(void* p, size_t bytes) {
    (void)p;
    (void)bytes;
    return Status::Ok();
  }
  virtual void UnpinHostMemory(void* p) { (void)p; }
  // Runs body(i) for every i in [0, n), on the backend's host threads where it has them (a host
  // backend's compute threads are idle between steps): the engine samples sequences this way.
  // Returns when every call is done; calls must be independent of each other and must not
  // throw.
  virtual void ParallelForOnHost(int64_t n, const std::function<void(int64_t i)>& body) {
    for (int64_t i = 0; i < n; ++i) body(i);
  }

  // Waits for every op issued so far; the first failure among them (ops cannot return one).
  // Host backends compute as they are called: always OK.
  virtual Status Synchronize() { return Status::Ok(); }

  // Called once per matrix at load time: re-lays out (CPU: packed panels) or uploads (GPU) a
  // kRows matrix for MatMul. Never dequantizes: a Q8_0 matrix stays 8-bit (the CPU backend
  // widens Q4_0 and Q5_0 to Q8_0 panels, the same values, and Q4_1 and Q5_1 to 8-bit panels
  // with a min per block; the view's type says which).
  virtual PreparedWeight PrepareMatMulWeight(const WeightMatrix& w) = 0;

  // out[i, :] = table row ids[i], as F32.                       out: [ids.size(), table.cols]
  virtual void Embedding(const WeightMatrix& table, std::span<const int32_t> ids, float* out) = 0;

  // out[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight.  x, out: [rows, dim]
  virtual void RmsNorm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps,
                       float* out) = 0;

  // Rotates, in place, the first rope_dim dims of every head of every row by its position
  // (adjacent pairs (2i, 2i+1), llama's "normal" RoPE).  x: [positions.size(), n_heads * head_dim]
  virtual void Rope(float* x, std::span<const int32_t> positions, int64_t n_heads,
                    int64_t head_dim, const RopeConfig& rope) = 0;

  // y = x · Wᵀ.                                  x: [m, w.cols]   y: [m, w.rows]
  // w is kRows or what PrepareMatMulWeight returned. As in llama.cpp, F16 (BF16) weights
  // multiply F16- (BF16-) rounded activations, Q8_0 and the other 32-weight types' weights
  // (Q4_0, Q5_0, Q4_1, Q5_1) activations rounded to Q8_0 (RoundToQ8_0 in kernels/q8_0.h), and K-quant weights activations rounded to Q8_K
  // (RoundToQ8_K in kernels/k_quants.h): ActivationRoundingOf(w.type). F32 accumulation. For prepared weights the result of each row of y does
  // not depend on m (batch invariance).
  virtual void MatMul(const float* x, int64_t m, const WeightMatrix& w, float* y) = 0;

  // Several products of one input, each exactly as MatMul computes it: ys[i] = x · ws[i]ᵀ, with
  // ws and ys of one length (a layer's Q, K and V projections; its gate and up). A backend may
  // run them as one (the CPU backend rounds the input once and shares one parallel loop); this
  // default runs MatMul for each.
  virtual void MatMuls(const float* x, int64_t m, std::span<const WeightMatrix* const> ws,
                       std::span<float* const> ys) {
    for (size_t i = 0; i < ws.size(); ++i) MatMul(x, m, *ws[i], ys[i]);
  }

  // out = silu(gate) * up, element-wise.                          [n]
  virtual void SwiGlu(const float* gate, const float* up, int64_t n, float* out) = 0;

  // x += y, element-wise.                                         [n]
  virtual void Add(float* x, const float* y, int64_t n) = 0;

  // Row-wise softmax in place.                                    x: [rows, n]
  virtual void Softmax(float* x, int64_t rows, int64_t n) = 0;

  // out[r] = index of the largest x[r, :] (the lowest index on ties); -1 when the row holds a
  // NaN or +inf, or nothing above -inf (what the host sampler refuses).  x: [rows, n]
  virtual void Argmax(const float* x, int64_t rows, int64_t n, int32_t* out) = 0;

  // out[r] = a token drawn from row r by params[r] (RowSampling, kernels/sample_row.h): the
  // argmax when its temperature is 0, else the draw of sampling::Sampler at params[r].uniform
  // (top-k, softmax of score / temperature, top-p, min-p, inverse CDF over the kept tokens);
  // -1 when the row holds a NaN or +inf, or nothing above -inf.  x: [rows, n]
  // `params` is host memory (rows entries), like the other spans.
  virtual void SampleRows(const float* x, int64_t rows, int64_t n,
                          std::span<const RowSampling> params, int32_t* out) = 0;

  // Writes each sequence's new keys and values into its cache slots (converted to F16).
  //   k, v: [total rows, n_kv_heads * head_dim]
  virtual void StoreKv(const KvLayerView& cache, const float* k, const float* v,
                       std::span<const AttentionSequence> sequences) = 0;

  // Causal attention for sequences with several new tokens (prefill, chunked or not): each new
  // token attends to every cached position <= its own (earlier chunks included). StoreKv must
  // have stored this step's keys and values first.
  //   q, out: [total rows, n_heads * head_dim]; n_heads a multiple of cache.n_kv_heads (GQA)
  virtual void AttentionPrefill(const KvLayerView& cache, const float* q,
                                std::span<const AttentionSequence> sequences, int64_t n_heads,
                                float scale, float* out) = 0;

  // Attention for sequences with exactly one new token each (decode).
  virtual void AttentionDecode(const KvLayerView& cache, const float* q,
                               std::span<const AttentionSequence> sequences, int64_t n_heads,
                               float scale, float* out) = 0;
};

}  // namespace bmad::kernels
