#include "kernels/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "kernels/cuda/kernel_launchers.h"
#include "kernels/cuda/launch_params.h"
#include "kernels/cuda/op_metadata.h"

namespace bmad::kernels {
namespace {

static_assert(static_cast<int>(WeightType::kF32) == cuda::launch::kTypeF32 &&
                  static_cast<int>(WeightType::kF16) == cuda::launch::kTypeF16 &&
                  static_cast<int>(WeightType::kQ8_0) == cuda::launch::kTypeQ8_0,
              "the kernels number weight types as kernels::WeightType does");

// Scratch slots (DeviceBuffers) the kernels write.
enum Scratch : int {
  kHalfActivations,  // F16 copy of an F16 product's input
  kQ8Activations,    // Q8_0-rounded copy of a Q8_0 product's input
  kDecodePartials,   // split-K partial results
  kScratchCount
};

// Kinds of uploaded op metadata (UploadSlots); their device buffers follow the scratch slots.
enum UploadKind : int {
  kIds,              // Embedding's token ids
  kPositions,        // Rope's positions
  kKvSlots,          // StoreKv's (row, block, slot) triples: prompt chunks
  kKvSlotsDecode,    //   and one-token sequences (a layer stores both: separate slots keep
                     //   both cached across layers)
  kPrefillMeta,      // AttentionPrefill's sequences, block tables and work items
  kDecodeMeta,       // AttentionDecode's sequences and block tables
  kSampling,         // SampleRows' per-row parameters
  kUploadKinds
};

static_assert(sizeof(RowSampling) == sizeof(cuda::launch::RowSamplingArgs) &&
                  offsetof(RowSampling, temperature) ==
                      offsetof(cuda::launch::RowSamplingArgs, temperature) &&
                  offsetof(RowSampling, top_k) == offsetof(cuda::launch::RowSamplingArgs, top_k) &&
                  offsetof(RowSampling, top_p) == offsetof(cuda::launch::RowSamplingArgs, top_p) &&
                  offsetof(RowSampling, min_p) == offsetof(cuda::launch::RowSamplingArgs, min_p) &&
                  offsetof(RowSampling, uniform) ==
                      offsetof(cuda::launch::RowSamplingArgs, uniform) &&
                  sizeof(RowSampling) % sizeof(int32_t) == 0,
              "SampleRows uploads RowSampling as the kernel reads RowSamplingArgs");

cuda::launch::KvArgs KvArgsOf(const KvLayerView& c) {
  cuda::launch::KvArgs a;
  a.k = c.k;
  a.v = c.v;
  a.block_stride = c.block_stride;
  a.n_kv_heads = static_cast<int>(c.n_kv_heads);
  a.block_size = static_cast<int>(c.block_size);
  a.head_dim = static_cast<int>(c.head_dim);
  return a;
}

Status CheckAttentionShape(const KvLayerView& c, int64_t n_heads) {
  if (c.head_dim % 2 != 0 || c.head_dim > cuda::kMaxHeadDim || c.head_dim <= 0) {
    return InvalidArgument("head_dim " + std::to_string(c.head_dim) +
                           " is not supported (the CUDA attention kernels need an even "
                           "head_dim <= " +
                           std::to_string(cuda::kMaxHeadDim) + ")");
  }
  if (c.n_kv_heads <= 0 || n_heads % c.n_kv_heads != 0) {
    return InvalidArgument(std::to_string(n_heads) + " query heads do not group evenly over " +
                           std::to_string(c.n_kv_heads) + " KV heads");
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<CudaBackend>> CudaBackend::Create(const CudaBackendOptions& options) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    return Unavailable(std::string("no CUDA device is available (cudaGetDeviceCount: ") +
                       cudaGetErrorString(e) + ")");
  }
  if (count == 0) return Unavailable("no CUDA device is available (cudaGetDeviceCount: 0 devices)");
  if (options.device < 0 || options.device >= count) {
    return InvalidArgument("CUDA device " + std::to_string(options.device) + " does not exist (" +
                           std::to_string(count) + " visible)");
  }
  std::unique_ptr<CudaBackend> b(new CudaBackend(options));
  BMAD_RETURN_IF_ERROR(b->Init());
  return b;
}

CudaBackend::CudaBackend(const CudaBackendOptions& options)
    : options_(options), device_(options.device), uploads_(kUploadKinds) {}

Status CudaBackend::Init() {
  BMAD_CUDA_CHECK(cudaSetDevice(device_));
  cudaDeviceProp prop{};
  BMAD_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
  device_name_ = prop.name;
  sm_count_ = prop.multiProcessorCount;
  BMAD_CUDA_CHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
  BMAD_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking));
  BMAD_CUDA_CHECK(cudaEventCreateWithFlags(&copy_done_, cudaEventDisableTiming));
  BMAD_CUDA_CHECK(cudaEventCreateWithFlags(&compute_mark_, cudaEventDisableTiming));
  const auto upload_buffers = static_cast<size_t>(uploads_.buffer_count());
  consumed_.assign(upload_buffers, nullptr);
  landed_.assign(upload_buffers, nullptr);
  staging_.assign(upload_buffers, PinnedStaging{});
  for (size_t b = 0; b < upload_buffers; ++b) {
    BMAD_CUDA_CHECK(cudaEventCreateWithFlags(&consumed_[b], cudaEventDisableTiming));
    BMAD_CUDA_CHECK(cudaEventCreateWithFlags(&landed_[b], cudaEventDisableTiming));
  }
  BMAD_CUBLAS_CHECK(cublasCreate(&cublas_));
  BMAD_CUBLAS_CHECK(cublasSetStream(cublas_, compute_));
  cuda::FallbackAllocator fallback;
  fallback.allocate = [](size_t bytes) -> void* {
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) == cudaSuccess) return p;
    cudaGetLastError();  // clear it, or the next launch check would report it
    return static_cast<void*>(nullptr);
  };
  fallback.free = [](void* p) { cudaFree(p); };
  // A buffer is given back only once both streams are done with it: kernels read it on the
  // compute stream, uploads write it on the copy stream.
  buffers_ = std::make_unique<cuda::DeviceBuffers>(
      kScratchCount + uploads_.buffer_count(), fallback, [this] {
        cudaStreamSynchronize(copy_);
        cudaStreamSynchronize(compute_);
      });
  return Status::Ok();
}

CudaBackend::~CudaBackend() {
  cudaSetDevice(device_);
  if (copy_) cudaStreamSynchronize(copy_);
  if (compute_) cudaStreamSynchronize(compute_);
  buffers_.reset();  // its frees wait for the streams, which must still exist
  for (void* p : reservations_) cudaFree(p);
  for (const PinnedStaging& s : staging_) {
    if (s.p != nullptr) cudaFreeHost(s.p);
  }
  for (cudaEvent_t e : consumed_) {
    if (e) cudaEventDestroy(e);
  }
  for (cudaEvent_t e : landed_) {
    if (e) cudaEventDestroy(e);
  }
  if (cublas_) cublasDestroy(cublas_);
  if (copy_done_) cudaEventDestroy(copy_done_);
  if (compute_mark_) cudaEventDestroy(compute_mark_);
  if (copy_) cudaStreamDestroy(copy_);
  if (compute_) cudaStreamDestroy(compute_);
}

template <typename Body>
void CudaBackend::Run(const char* op, Body&& body) {
  if (!status_.ok()) return;
  const Status s = [&]() -> Status {
    BMAD_CUDA_CHECK(cudaSetDevice(device_));
    BMAD_RETURN_IF_ERROR(body());
    if (options_.debug_checks) BMAD_CUDA_CHECK(cudaStreamSynchronize(compute_));
    return Status::Ok();
  }();
  if (!s.ok()) status_.Record(s.WithContext(std::string("CudaBackend::") + op));
}

Status CudaBackend::Synchronize() {
  status_.Record([&]() -> Status {
    BMAD_CUDA_CHECK(cudaSetDevice(device_));
    BMAD_CUDA_CHECK(cudaStreamSynchronize(compute_));
    return Status::Ok();
  }());
  return status_.status();
}

Status CudaBackend::CheckDevicePointers(const char* op,
                                        std::initializer_list<const void*> pointers) const {
  if (!options_.debug_checks) return Status::Ok();
  int i = 0;
  for (const void* p : pointers) {
    cudaPointerAttributes a{};
    const cudaError_t e = cudaPointerGetAttributes(&a, p);
    if (e != cudaSuccess) cudaGetLastError();  // clear it: not a sticky error
    if (e != cudaSuccess || a.type == cudaMemoryTypeUnregistered) {
      return InvalidArgument(std::string(op) + ": pointer argument " + std::to_string(i) +
                             " is not device memory (the CUDA backend computes on device "
                             "pointers only)");
    }
    ++i;
  }
  return Status::Ok();
}

Result<const int32_t*> CudaBackend::Upload(int kind, const std::vector<int32_t>& host) {
  const size_t bytes = host.size() * sizeof(int32_t);
  const cuda::UploadSlots::Plan plan = uploads_.Next(kind, host);
  const auto b = static_cast<size_t>(plan.buffer);
  // A reuse never needs more room than the buffer has: it holds these very bytes.
  void* dst = buffers_->Get(kScratchCount + plan.buffer, std::max<size_t>(bytes, 4));
  if (dst == nullptr) {
    uploads_.Failed(kind);
    return ResourceExhausted("no device memory for " + std::to_string(bytes) +
                             " bytes of op metadata");
  }
  if (plan.reuse || bytes == 0) return static_cast<const int32_t*>(dst);
  Status issued = [&]() -> Status {
    // Every op that can read the buffer given up has been issued: mark the point.
    if (plan.retire >= 0) {
      BMAD_CUDA_CHECK(cudaEventRecord(consumed_[static_cast<size_t>(plan.retire)], compute_));
    }
    if (plan.wait_landed) BMAD_CUDA_CHECK(cudaEventSynchronize(landed_[b]));
    PinnedStaging& staging = staging_[b];
    if (staging.bytes < bytes) {
      if (staging.p != nullptr) BMAD_CUDA_CHECK(cudaFreeHost(staging.p));
      staging = PinnedStaging{};
      const size_t grown = (bytes + bytes / 4 + 255) / 256 * 256;
      BMAD_CUDA_CHECK(cudaHostAlloc(&staging.p, grown, cudaHostAllocDefault));
      staging.bytes = grown;
      ++staging_growths_;
    }
    // From pinned memory the copy is truly asynchronous: the host does not wait for the copy
    // stream, which may itself be waiting for the compute stream.
    std::memcpy(staging.p, host.data(), bytes);
    if (plan.wait_consumed) BMAD_CUDA_CHECK(cudaStreamWaitEvent(copy_, consumed_[b], 0));
    BMAD_CUDA_CHECK(cudaMemcpyAsync(dst, staging.p, bytes, cudaMemcpyHostToDevice, copy_));
    BMAD_CUDA_CHECK(cudaEventRecord(landed_[b], copy_));
    BMAD_CUDA_CHECK(cudaStreamWaitEvent(compute_, landed_[b], 0));
    return Status::Ok();
  }();
  if (!issued.ok()) {
    uploads_.Failed(kind);
    return issued;
  }
  uploads_.Issued(kind, plan, host);
  return static_cast<const int32_t*>(dst);
}

void CudaBackend::SetMemoryHooks(MemoryHooks hooks) {
  hooks_ = hooks;
  buffers_->SetHooks(std::move(hooks));
}

size_t CudaBackend::PreparedBytes(const WeightMatrix& w) const {
  if (w.layout != WeightLayout::kRows) return 0;
  return (w.row_bytes * static_cast<size_t>(w.rows) + 255) / 256 * 256;
}

PreparedWeight CudaBackend::PrepareMatMulWeight(const WeightMatrix& w) {
  PreparedWeight prepared{w, nullptr};
  Run("PrepareMatMulWeight", [&]() -> Status {
    if (w.layout != WeightLayout::kRows) {
      return InvalidArgument("the CUDA backend reads weights in row layout, not the CPU's panels");
    }
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, w.data) == cudaSuccess &&
        (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged)) {
      return Status::Ok();  // already on the device
    }
    cudaGetLastError();
    const size_t bytes = w.row_bytes * static_cast<size_t>(w.rows);
    void* d = hooks_.allocate_weights ? hooks_.allocate_weights(PreparedBytes(w)) : nullptr;
    std::shared_ptr<const void> storage;
    if (d != nullptr) {
      if (cudaPointerGetAttributes(&a, d) != cudaSuccess || a.type != cudaMemoryTypeDevice) {
        cudaGetLastError();
        return FailedPrecondition(
            "MemoryHooks::allocate_weights returned host memory; the "
            "CUDA backend needs device memory (a device arena)");
      }
      storage = std::shared_ptr<const void>(d, [](const void*) {});  // the arena owns it
    } else {
      BMAD_CUDA_CHECK(cudaMalloc(&d, std::max<size_t>(bytes, 1)));
      ++weight_fallbacks_;
      storage =
          std::shared_ptr<const void>(d, [](const void* p) { cudaFree(const_cast<void*>(p)); });
    }
    // On the compute stream (not cudaMemcpy's legacy stream, which our non-blocking streams do
    // not wait for: from pageable memory it may return before the transfer lands).
    BMAD_CUDA_CHECK(cudaMemcpyAsync(d, w.data, bytes, cudaMemcpyHostToDevice, compute_));
    prepared.view.data = d;
    prepared.storage = std::move(storage);
    return Status::Ok();
  });
  return prepared;
}

void CudaBackend::Embedding(const WeightMatrix& table, std::span<const int32_t> ids, float* out) {
  Run("Embedding", [&]() -> Status {
    if (ids.empty()) return Status::Ok();
    if (!HasWeightType(table.type)) {
      return Unimplemented("the CUDA backend has no " + std::string(WeightTypeName(table.type)) + " embedding rows");
    }
    BMAD_RETURN_IF_ERROR(CheckDevicePointers("Embedding", {table.data, out}));
    host_meta_.assign(ids.begin(), ids.end());
    BMAD_ASSIGN_OR_RETURN(const int32_t* d_ids, Upload(kIds, host_meta_));
    BMAD_CUDA_CHECK(cuda::launch::Embedding(static_cast<int>(table.type), table.data,
                                            table.row_bytes, table.cols, d_ids,
                                            static_cast<int64_t>(ids.size()), out, compute_));
    return Status::Ok();
  });
}

void CudaBackend::RmsNorm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps,
                          float* out) {
  Run("RmsNorm", [&]() -> Status {
    BMAD_RETURN_IF_ERROR(CheckDevicePointers("RmsNorm", {x, weight, out}));
    BMAD_CUDA_CHECK(cuda::launch::RmsNorm(x, weight, rows, dim, eps, out, compute_));
    return Status::Ok();
  });
}

static_assert(cuda::launch::kRopeFreqFactorCapacity == kMaxRopeFreqFactors);

void CudaBackend::Rope(float* x, std::span<const int32_t> positions, int64_t n_heads,
                       int64_t head_dim, const RopeConfig& rope) {
  Run("Rope", [&]() -> Status {
    if (positions.empty() || rope.rope_dim == 0) return Status::Ok();
    BMAD_RETURN_IF_ERROR(CheckDevicePointers("Rope", {x}));
    host_meta_.assign(positions.begin(), positions.end());
    BMAD_ASSIGN_OR_RETURN(const int32_t* d_pos, Upload(kPositions, host_meta_));
    if (!rope.freq_factors.empty() &&
        static_cast<int64_t>(rope.freq_factors.size()) != rope.rope_dim / 2) {
      return InvalidArgument("Rope: " + std::to_string(rope.freq_factors.size()) +
                             " frequency factors for rope_dim " + std::to_string(rope.rope_dim));
    }
    BMAD_CUDA_CHECK(cuda::launch::Rope(x, d_pos, static_cast<int64_t>(positions.size()), n_heads,
                                       head_dim, rope.rope_dim, rope.freq_base, rope.freq_scale,
                                       rope.freq_factors.empty() ? nullptr : rope.freq_factors.data(),
                                       compute_));
    return Status::Ok();
  });
}

Status CudaBackend::GemmF(const float* x, int64_t m, const WeightMatrix& w, float* y) {
  const float one = 1.0f, zero = 0.0f;
  const void* b = x;
  cudaDataType_t type = CUDA_R_32F;
  size_t element = sizeof(float);
  if (w.type == WeightType::kF16 && cuda::F16GemvApplies(m, w.cols, w.row_bytes, w.data, x)) {
    BMAD_CUDA_CHECK(
        cuda::launch::F16Gemv(x, m, w.data, w.row_bytes, w.rows, w.cols, y, compute_));
    return Status::Ok();
  }
  if (w.type == WeightType::kF16) {
    void* x16 = buffers_->Get(kHalfActivations, cuda::F16ActivationBytes(m, w.cols));
    if (x16 == nullptr) return ResourceExhausted("no device memory for the F16 activations");
    BMAD_CUDA_CHECK(
        cuda::launch::ConvertToHalf(x, m * w.cols, static_cast<uint16_t*>(x16), compute_));
    b = x16;
    type = CUDA_R_16F;
    element = 2;
  }
  const cuda::GemmArgs g =
      cuda::RowMajorProduct(m, w.rows, w.cols, static_cast<int64_t>(w.row_bytes / element));
  BMAD_CUBLAS_CHECK(cublasGemmEx(cublas_, g.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N,
                                 g.m, g.n, g.k, &one, w.data, type, g.lda, b, type, g.ldb, &zero, y,
                                 CUDA_R_32F, g.ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return Status::Ok();
}

void CudaBackend::MatMul(const float* x, int64_t m, const WeightMatrix& w, float* y) {
  Run("MatMul", [&]() -> Status {
    if (m == 0 || w.rows == 0) return Status::Ok();
    if (w.layout != WeightLayout::kRows) {
      return InvalidArgument("the CUDA backend reads weights in row layout, not the CPU's panels");
    }
    if (!HasWeightType(w.type)) {
      return Unimplemented("the CUDA backend has no " + std::string(WeightTypeName(w.type)) + " products");
    }
    BMAD_RETURN_IF_ERROR(CheckDevicePointers("MatMul", {x, w.data, y}));
    if (w.type == WeightType::kQ8_0) {
      auto* xq = static_cast<float*>(
          buffers_->Get(kQ8Activations, static_cast<size_t>(m * w.cols) * sizeof(float)));
      if (xq == nullptr) return ResourceExhausted("no device memory for the Q8_0 activations");
      BMAD_CUDA_CHECK(cuda::launch::RoundToQ8_0(x, m * w.cols, xq, compute_));
      BMAD_CUDA_CHECK(
          cuda::launch::Q8MatMul(xq, m, w.data, w.row_bytes, w.rows, w.cols, y, compute_));
      return Status::Ok();
    }
    return GemmF(x, m, w, y);
  });
}

void CudaBackend::SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  Run("SwiGlu", [&]() -> Status {
    BMAD_RETURN_IF_ERROR(CheckDevicePointers("SwiGlu", {gate, up, out}));
    BMAD_CUDA_CHECK(cuda::launch::SwiGlu(gate, up, n, out, compute_));
    return Status::Ok();
  });
}

void CudaBackend::Add(float* x, const float* y, int64_t n) {
  Run("Add", [&]() -> Status {
    BMAD_RETURN_IF_ERROR(CheckDevicePointers("Add", {x, y}));
    BMAD_CUDA_CHECK(cuda::launch::Add(x, y, n, compute_));
    return Status::Ok();
  });
}

void CudaBackend::Softmax(float* x, int64_t rows, int64_t n) {
  Run("Softmax", [&]() -> Status {
    BMAD_RETURN_IF_ERROR(CheckDevicePointers("Softmax", {x}));
    BMAD_CUDA_CHECK(cuda::launch::Softmax(x, rows, n, compute_));
    return Status::Ok();
  });
}

void CudaBackend::Argmax(const float* x, int64_t rows, int64_t n, int32_t* out) {
  Run("Argmax", [&]() -> Status {
    BMAD_RETURN_IF_ERROR(CheckDevicePointers("Argmax", {x, out}));
    BMAD_CUDA_CHECK(cuda::launch::Argmax(x, rows, n, out, compute_));
    return Status::Ok();
  });
}

void CudaBackend::SampleRows(const float* x, int64_t rows, int64_t n,
                             std::span<const RowSampling> params, int32_t* out) {
  Run("SampleRows", [&]() -> Status {
    if (rows == 0) return Status::Ok();
    if (params.size() != static_cast<size_t>(rows)) {
      return InvalidArgument("SampleRows: " + std::to_string(params.size()) +
                             " rows of parameters for " + std::to_string(rows) + " rows");
    }
    BMAD_RETURN_IF_ERROR(CheckDevicePointers("SampleRows", {x, out}));
    host_meta_.resize(params.size_bytes() / sizeof(int32_t));
    std::memcpy(host_meta_.data(), params.data(), params.size_bytes());
    BMAD_ASSIGN_OR_RETURN(const int32_t* d_params, Upload(kSampling, host_meta_));
    BMAD_CUDA_CHECK(cuda::launch::SampleRows(
        x, rows, n, reinterpret_cast<const cuda::launch::RowSamplingArgs*>(d_params), out,
        compute_));
    return Status::Ok();
  });
}

void CudaBackend::StoreKv(const KvLayerView& cache, const float* k, const float* v,
                          std::span<const AttentionSequence> sequences) {
  Run("StoreKv", [&]() -> Status {
    if (sequences.empty()) return Status::Ok();
    BMAD_RETURN_IF_ERROR(CheckDevicePointers("StoreKv", {cache.k, cache.v, k, v}));
    host_meta_.clear();
    cuda::AppendKvSlots(sequences, cache.block_size, host_meta_);
    if (host_meta_.empty()) return Status::Ok();
    bool decode = true;
    for (const AttentionSequence& q : sequences) decode = decode && q.row_count == 1;
    BMAD_ASSIGN_OR_RETURN(const int32_t* slots,
                          Upload(decode ? kKvSlotsDecode : kKvSlots, host_meta_));
    BMAD_CUDA_CHECK(cuda::launch::StoreKv(KvArgsOf(cache), k, v, slots,
                                          static_cast<int64_t>(host_meta_.size() / 3), compute_));
    return Status::Ok();
  });
}

void CudaBackend::AttentionPrefill(const KvLayerView& cache, const float* q,
                                   std::span<const AttentionSequence> sequences, int64_t n_heads,
                                   float scale, float* out) {
  Run("AttentionPrefill", [&]() -> Status {
    if (sequences.empty()) return Status::Ok();
    BMAD_RETURN_IF_ERROR(CheckAttentionShape(cache, n_heads));
    BMAD_RETURN_IF_ERROR(CheckDevicePointers("AttentionPrefill", {cache.k, cache.v, q, out}));
    std::vector<int64_t> row_counts;
    row_counts.reserve(sequences.size());
    for (const AttentionSequence& s : sequences) row_counts.push_back(s.row_count);
    const std::vector<cuda::PrefillWorkItem> work = cuda::PrefillWorkItems(row_counts);
    host_meta_.clear();
    cuda::AppendAttentionMeta(sequences, cache.block_size, host_meta_);
    const size_t work_offset = host_meta_.size();
    for (const cuda::PrefillWorkItem& w : work) {
      host_meta_.push_back(w.seq);
      host_meta_.push_back(w.row_lo);
    }
    BMAD_ASSIGN_OR_RETURN(const int32_t* meta, Upload(kPrefillMeta, host_meta_));
    BMAD_CUDA_CHECK(cuda::launch::AttentionPrefill(
        KvArgsOf(cache), q, meta, static_cast<int64_t>(sequences.size()), meta + work_offset,
        static_cast<int64_t>(work.size()), n_heads, scale, out, compute_));
    return Status::Ok();
  });
}

void CudaBackend::AttentionDecode(const KvLayerView& cache, const float* q,
                                  std::span<const AttentionSequence> sequences, int64_t n_heads,
                                  float scale, float* out) {
  Run("AttentionDecode", [&]() -> Status {
    if (sequences.empty()) return Status::Ok();
    BMAD_RETURN_IF_ERROR(CheckAttentionShape(cache, n_heads));
    BMAD_RETURN_IF_ERROR(CheckDevicePointers("AttentionDecode", {cache.k, cache.v, q, out}));
    for (const AttentionSequence& s : sequences) {
      if (s.row_count != 1) {
        return InvalidArgument("AttentionDecode takes one new token per sequence, got " +
                               std::to_string(s.row_count));
      }
    }
    const cuda::DecodeLaunch plan =
        cuda::DecodeLaunchFor(static_cast<int64_t>(sequences.size()), n_heads, cache.n_kv_heads,
                              cache.head_dim, cuda::MaxContext(sequences), sm_count_);
    float* partials = nullptr;
    if (plan.partial_floats > 0) {
      partials =
          static_cast<float*>(buffers_->Get(kDecodePartials, plan.partial_floats * sizeof(float)));
      if (partials == nullptr) return ResourceExhausted("no device memory for split-K partials");
    }
    host_meta_.clear();
    cuda::AppendAttentionMeta(sequences, cache.block_size, host_meta_);
    BMAD_ASSIGN_OR_RETURN(const int32_t* meta, Upload(kDecodeMeta, host_meta_));
    BMAD_CUDA_CHECK(cuda::launch::AttentionDecode(KvArgsOf(cache), q, meta, plan, n_heads, scale,
                                                  partials, out, compute_));
    return Status::Ok();
  });
}

Result<void*> CudaBackend::ReserveDeviceMemory(size_t bytes) {
  if (bytes == 0) return InvalidArgument("cannot reserve 0 bytes of device memory");
  BMAD_CUDA_CHECK(cudaSetDevice(device_));
  void* p = nullptr;
  const Status reserved = [&]() -> Status {
    BMAD_CUDA_CHECK(cudaMalloc(&p, bytes));
    return Status::Ok();
  }();
  if (!reserved.ok()) {
    return reserved.WithContext("reserving " + std::to_string(bytes) + " bytes of device memory on " +
                                device_name_);
  }
  reservations_.push_back(p);
  return p;
}

void* CudaBackend::AllocateDeviceOverflow(size_t bytes) {
  void* p = nullptr;
  const Status allocated = [&]() -> Status {
    BMAD_CUDA_CHECK(cudaSetDevice(device_));
    BMAD_CUDA_CHECK(cudaMalloc(&p, bytes));
    return Status::Ok();
  }();
  if (allocated.ok()) return p;
  cudaGetLastError();  // clear it, or the next launch check would report it
  return nullptr;      // the caller reports that nothing could serve it
}

void CudaBackend::ReleaseDeviceOverflow(void* p) {
  status_.Record([&]() -> Status {
    BMAD_CUDA_CHECK(cudaSetDevice(device_));
    BMAD_CUDA_CHECK(cudaStreamSynchronize(compute_));
    BMAD_CUDA_CHECK(cudaFree(p));
    return Status::Ok();
  }());
}

Result<size_t> CudaBackend::AvailableDeviceMemory() const {
  BMAD_CUDA_CHECK(cudaSetDevice(device_));
  size_t free_bytes = 0, total_bytes = 0;
  BMAD_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return free_bytes;
}

Status CudaBackend::CopyToDevice(void* device_dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return Status::Ok();
  BMAD_CUDA_CHECK(cudaSetDevice(device_));
  // Both ways ordered: the copy waits for the ops issued so far (which may still read the
  // destination), and ops issued after it wait for the copy.
  BMAD_CUDA_CHECK(cudaEventRecord(compute_mark_, compute_));
  BMAD_CUDA_CHECK(cudaStreamWaitEvent(copy_, compute_mark_, 0));
  BMAD_CUDA_CHECK(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, copy_));
  BMAD_CUDA_CHECK(cudaEventRecord(copy_done_, copy_));
  BMAD_CUDA_CHECK(cudaStreamWaitEvent(compute_, copy_done_, 0));
  return Status::Ok();
}

Status CudaBackend::CopyToHost(void* host_dst, const void* device_src, size_t bytes) {
  if (bytes == 0) return Synchronize();
  BMAD_CUDA_CHECK(cudaSetDevice(device_));
  BMAD_CUDA_CHECK(cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, compute_));
  return Synchronize();
}

Status CudaBackend::CopyToHostAsync(void* host_dst, const void* device_src, size_t bytes) {
  if (bytes == 0) return Status::Ok();
  BMAD_CUDA_CHECK(cudaSetDevice(device_));
  BMAD_CUDA_CHECK(cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, compute_));
  return Status::Ok();
}

Status CudaBackend::PinHostMemory(void* p, size_t bytes) {
  if (bytes == 0) return Status::Ok();
  BMAD_CUDA_CHECK(cudaSetDevice(device_));
  const cudaError_t e = cudaHostRegister(p, bytes, cudaHostRegisterDefault);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear it, or the next launch check would report it
    return Unavailable(std::string("cudaHostRegister: ") + cudaGetErrorString(e));
  }
  return Status::Ok();
}

void CudaBackend::UnpinHostMemory(void* p) {
  if (cudaSetDevice(device_) != cudaSuccess || cudaHostUnregister(p) != cudaSuccess) {
    cudaGetLastError();  // nothing to report it to; clear it for the next launch check
  }
}

Status CudaBackend::CopyOnDevice(void* device_dst, const void* device_src, size_t bytes) {
  if (bytes == 0) return Status::Ok();
  BMAD_CUDA_CHECK(cudaSetDevice(device_));
  BMAD_CUDA_CHECK(
      cudaMemcpyAsync(device_dst, device_src, bytes, cudaMemcpyDeviceToDevice, compute_));
  return Status::Ok();
}

}  // namespace bmad::kernels
