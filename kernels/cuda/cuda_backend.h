// The CUDA backend: every op of kernels/backend.h on one NVIDIA GPU, on one compute stream.
//
// It compiles for sm_80 and sm_90; its launch decisions are unit-tested on the CPU and its kernels'
// sources run in CI on a SIMT emulator; tests/gpu/run.sh checks every op against the CPU backend
// on a real GPU (passed on an H200, docs/benchmarks.md).
//
// Memory contract (backend.h: "pointers refer to the backend's memory"):
//   - every float*, the KV cache views, Argmax's output and every WeightMatrix::data are DEVICE
//     memory; the embedding table and norm vectors too (UploadRows, like PrepareMatMulWeight,
//     uploads a kRows matrix in its row layout, which Embedding, RmsNorm and MatMul read);
//   - the spans (token ids, positions, the sequences and their block tables) are HOST memory:
//     the backend uploads them itself on the copy stream, through pinned staging into one of two
//     device buffers per kind used in turn (cuda/upload_slots.h), so an upload overlaps the ops
//     still reading the previous one; it skips the upload when the bytes equal the previous
//     upload of the same kind (the same block tables are used by every layer of a step, so only
//     the first layer uploads them).
//
// MatMul: F32 weights through cublasGemmEx with F32 inputs and CUBLAS_COMPUTE_32F (no TF32: exact
// F32 as on the CPU); F16 weights (the op's contract: "F16 weights multiply F16-rounded
// activations"): up to kF16GemvMaxRows rows through our GEMV (matmul_f16_kernels.cu), which
// rounds the F32 input in registers, more by converting the activations to F16 and then
// cublasGemmEx F16 × F16 → F32 with CUBLAS_COMPUTE_32F (tensor cores, F32 accumulation); Q8_0:
// our own dequantizing kernels (matmul_q8_kernels.cu). Deviation from backend.h: the kernel (and
// cuBLAS's algorithm and split-K) depend on the shape, so a row of y is NOT guaranteed
// bit-identical for different m (batch invariance); results agree to F32 rounding.
//
// SampleRows: one block per row, no sort (sampling_kernels.cu); the parameters are uploaded like
// the other spans.
//
// Errors: ops cannot return one. Each op's body runs as a function returning Status, with every
// CUDA and cuBLAS call and kernel launch through BMAD_CUDA_CHECK / BMAD_CUBLAS_CHECK; the first
// failure is kept (status()), later ops are skipped (their outputs are garbage), and
// Synchronize() waits for the stream and returns it. Callers check Synchronize() once per engine
// step. Asynchronous faults (a kernel reading a bad address) surface at the next synchronizing
// call; CudaBackendOptions::debug_checks synchronizes after every op so the failing op is named.
//
// Memory: prepared weights come from MemoryHooks::allocate_weights and scratch from
// allocate_scratch (both must hand out device memory); without hooks, or when a hook returns
// nullptr, cudaMalloc (counted: system_allocations()). cuBLAS allocates its own workspace once,
// when the backend is made.
//
// Thread-safety: one thread issues ops at a time (the device is made current on each op).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/device_buffers.h"
#include "kernels/cuda/upload_slots.h"

struct CUstream_st;    // cudaStream_t is CUstream_st*
struct CUevent_st;     // cudaEvent_t is CUevent_st*
struct cublasContext;  // cublasHandle_t is cublasContext*

namespace bmad::kernels {

struct CudaBackendOptions {
  int device = 0;
  // Synchronize after every op and check that every pointer an op is given is device memory, so
  // the first failure names its op. For tests and first runs on new hardware; slow.
  bool debug_checks = false;
};

class CudaBackend final : public Backend {
 public:
  // kUnavailable "no CUDA device is available (cudaGetDeviceCount: ...)" without a usable GPU.
  static Result<std::unique_ptr<CudaBackend>> Create(const CudaBackendOptions& options = {});
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string_view name() const override { return "cuda"; }
  // Device scratch growths and pinned staging growths (cudaHostAlloc).
  uint64_t buffer_allocations() const override {
    return buffers_->growths() + staging_growths_;
  }
  void SetMemoryHooks(MemoryHooks hooks) override;
  size_t PreparedBytes(const WeightMatrix& w) const override;
  PreparedWeight PrepareMatMulWeight(const WeightMatrix& w) override;
  bool host_memory() const override { return false; }
  // One cudaMalloc, freed with the backend; counted in system_allocations().
  Result<void*> ReserveDeviceMemory(size_t bytes) override;
  Result<size_t> AvailableDeviceMemory() const override;
  // cudaMalloc / cudaFree after the stream drains (the chunk's last users have run).
  void* AllocateDeviceOverflow(size_t bytes) override;
  void ReleaseDeviceOverflow(void* p) override;
  // Row-layout matrices upload as PrepareMatMulWeight does (the CUDA backend keeps rows).
  PreparedWeight UploadRows(const WeightMatrix& w) override { return PrepareMatMulWeight(w); }
  size_t UploadedBytes(const WeightMatrix& w) const override { return PreparedBytes(w); }

  void Embedding(const WeightMatrix& table, std::span<const int32_t> ids, float* out) override;
  void RmsNorm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps,
               float* out) override;
  void Rope(float* x, std::span<const int32_t> positions, int64_t n_heads, int64_t head_dim,
            const RopeConfig& rope) override;
  void MatMul(const float* x, int64_t m, const WeightMatrix& w, float* y) override;
  void SwiGlu(const float* gate, const float* up, int64_t n, float* out) override;
  void Add(float* x, const float* y, int64_t n) override;
  void Softmax(float* x, int64_t rows, int64_t n) override;
  void Argmax(const float* x, int64_t rows, int64_t n, int32_t* out) override;
  void SampleRows(const float* x, int64_t rows, int64_t n, std::span<const RowSampling> params,
                  int32_t* out) override;
  void StoreKv(const KvLayerView& cache, const float* k, const float* v,
               std::span<const AttentionSequence> sequences) override;
  void AttentionPrefill(const KvLayerView& cache, const float* q,
                        std::span<const AttentionSequence> sequences, int64_t n_heads, float scale,
                        float* out) override;
  void AttentionDecode(const KvLayerView& cache, const float* q,
                       std::span<const AttentionSequence> sequences, int64_t n_heads, float scale,
                       float* out) override;

  // The first failure since the backend was made (OK if none); does not wait for the GPU.
  Status status() const { return status_.status(); }
  // Waits for every op issued so far; the first failure, including asynchronous ones.
  Status Synchronize() override;

  // Host → device on the copy stream, after the ops issued so far; ops issued after this call
  // wait for it. Pageable `host_src` may be reused on return; pinned memory only after the next
  // Synchronize().
  Status CopyToDevice(void* device_dst, const void* host_src, size_t bytes) override;
  // Device → host after every op issued so far; waits.
  Status CopyToHost(void* host_dst, const void* device_src, size_t bytes) override;
  // Device → host after every op issued so far, on the compute stream; does not wait (into
  // pageable memory the driver itself waits for the copy). Done after Synchronize().
  Status CopyToHostAsync(void* host_dst, const void* device_src, size_t bytes) override;
  // cudaHostRegister / cudaHostUnregister.
  Status PinHostMemory(void* p, size_t bytes) override;
  void UnpinHostMemory(void* p) override;
  // Device → device, in order with the ops (compute stream); does not wait.
  Status CopyOnDevice(void* device_dst, const void* device_src, size_t bytes) override;

  CUstream_st* compute_stream() const { return compute_; }
  int device() const { return device_; }
  int sm_count() const { return sm_count_; }
  const std::string& device_name() const { return device_name_; }
  // cudaMalloc calls made because no hook provided the memory (weights and scratch).
  uint64_t system_allocations() const {
    return weight_fallbacks_ + buffers_->fallback_allocations() + reservations_.size();
  }

 private:
  explicit CudaBackend(const CudaBackendOptions& options);
  Status Init();
  // Runs an op's body unless an earlier op failed; records its failure under the op's name.
  template <typename Body>
  void Run(const char* op, Body&& body);
  Status CheckDevicePointers(const char* op, std::initializer_list<const void*> pointers) const;
  // Copies `host`, op metadata of kind `kind`, to the device on the copy stream (skipped when
  // equal to the last upload of that kind); ops issued after it wait for it. The device address.
  Result<const int32_t*> Upload(int kind, const std::vector<int32_t>& host);
  Status GemmF(const float* x, int64_t m, const WeightMatrix& w, float* y);

  CudaBackendOptions options_;
  int device_ = 0;
  int sm_count_ = 0;
  std::string device_name_;
  CUstream_st* compute_ = nullptr;
  CUstream_st* copy_ = nullptr;
  CUevent_st* copy_done_ = nullptr;
  CUevent_st* compute_mark_ = nullptr;  // ops so far, for the copy stream to wait on
  cublasContext* cublas_ = nullptr;
  MemoryHooks hooks_;
  std::unique_ptr<cuda::DeviceBuffers> buffers_;
  struct PinnedStaging {
    void* p = nullptr;  // cudaHostAlloc'd
    size_t bytes = 0;
  };
  cuda::UploadSlots uploads_;
  std::vector<CUevent_st*> consumed_;     // per upload buffer: its readers have run
  std::vector<CUevent_st*> landed_;       // per upload buffer: its last copy has landed
  std::vector<PinnedStaging> staging_;    // per upload buffer
  uint64_t staging_growths_ = 0;
  std::vector<int32_t> host_meta_;        // reused host buffer where ops build their metadata
  uint64_t weight_fallbacks_ = 0;
  std::vector<void*> reservations_;  // ReserveDeviceMemory's, freed in the destructor
  cuda::StickyStatus status_;
};

}  // namespace bmad::kernels
