// A device backend simulated on the CPU, for testing that the worker keeps to the device memory
// contract (kernels/backend.h: host_memory() false) without a GPU.
//
// It computes with the CPU backend, but everything a device backend would hold in device memory
// (ReserveDeviceMemory's arena and what UploadRows copies) lives in pages mapped PROT_NONE except
// while one of its own ops or copies runs. Host code that reads or writes device memory
// directly — a std::copy_n where a CopyOnDevice belongs, logits read without CopyToHost — faults
// at once, so the test crashes instead of passing by luck. Results are the CPU backend's, bit for
// bit: a device-resident run must equal a host one exactly.
//
// Copies to the host issued with CopyToHostAsync into pinned memory land only at the next
// Synchronize (or CopyToHost), as on a GPU; until then the destination holds NaNs, so code that
// reads it before waiting computes garbage instead of passing by luck.
//
// One thread issues ops at a time (as for the CUDA backend).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"

namespace bmad::testing {

class GuardedDeviceBackend final : public kernels::Backend {
 public:
  // `free_bytes`: what AvailableDeviceMemory reports.
  GuardedDeviceBackend(int threads, size_t free_bytes);
  ~GuardedDeviceBackend() override;

  std::string_view name() const override { return "guarded-device"; }
  bool host_memory() const override { return false; }
  Result<void*> ReserveDeviceMemory(size_t bytes) override;
  Result<size_t> AvailableDeviceMemory() const override { return free_bytes_; }
  void* AllocateDeviceOverflow(size_t bytes) override;
  void ReleaseDeviceOverflow(void* p) override;
  int64_t overflow_chunks_live() const { return overflow_live_; }
  uint64_t buffer_allocations() const override { return cpu_.buffer_allocations(); }
  // Host work: nothing of the device is touched.
  void ParallelForOnHost(int64_t n, const std::function<void(int64_t i)>& body) override {
    cpu_.ParallelForOnHost(n, body);
  }
  void SetMemoryHooks(kernels::MemoryHooks hooks) override;
  size_t PreparedBytes(const kernels::WeightMatrix& w) const override { return cpu_.PreparedBytes(w); }
  kernels::PreparedWeight PrepareMatMulWeight(const kernels::WeightMatrix& w) override;
  kernels::PreparedWeight UploadRows(const kernels::WeightMatrix& w) override;
  size_t UploadedBytes(const kernels::WeightMatrix& w) const override;
  Status CopyToDevice(void* dst, const void* host_src, size_t bytes) override;
  Status CopyToHost(void* host_dst, const void* src, size_t bytes) override;
  Status CopyOnDevice(void* dst, const void* src, size_t bytes) override;
  Status CopyToHostAsync(void* host_dst, const void* src, size_t bytes) override;
  Status PinHostMemory(void* p, size_t bytes) override;
  void UnpinHostMemory(void* p) override;
  Status Synchronize() override;

  void Embedding(const kernels::WeightMatrix& table, std::span<const int32_t> ids,
                 float* out) override;
  void RmsNorm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps,
               float* out) override;
  void Rope(float* x, std::span<const int32_t> positions, int64_t n_heads, int64_t head_dim,
            const kernels::RopeConfig& rope) override;
  void MatMul(const float* x, int64_t m, const kernels::WeightMatrix& w, float* y) override;
  void SwiGlu(const float* gate, const float* up, int64_t n, float* out) override;
  void Add(float* x, const float* y, int64_t n) override;
  void Softmax(float* x, int64_t rows, int64_t n) override;
  void Argmax(const float* x, int64_t rows, int64_t n, int32_t* out) override;
  void SampleRows(const float* x, int64_t rows, int64_t n,
                  std::span<const kernels::RowSampling> params, int32_t* out) override;
  void StoreKv(const kernels::KvLayerView& cache, const float* k, const float* v,
               std::span<const kernels::AttentionSequence> sequences) override;
  void AttentionPrefill(const kernels::KvLayerView& cache, const float* q,
                        std::span<const kernels::AttentionSequence> sequences, int64_t n_heads,
                        float scale, float* out) override;
  void AttentionDecode(const kernels::KvLayerView& cache, const float* q,
                       std::span<const kernels::AttentionSequence> sequences, int64_t n_heads,
                       float scale, float* out) override;

  // Whether `p` lies in this backend's device memory.
  bool OnDevice(const void* p) const;
  // Ops and copies given a pointer on the wrong side (a host buffer handed to an op, device
  // memory as a copy's host end): each is a contract violation the CUDA backend would fail on.
  int64_t host_pointer_violations() const { return violations_; }
  int64_t ops() const { return ops_; }
  // Copies CopyToHostAsync deferred to the next Synchronize (into pinned memory), and the
  // bytes pinned now.
  int64_t deferred_copies() const { return deferred_copies_; }
  // Everything copied from device memory to the host (CopyToHost and CopyToHostAsync).
  size_t bytes_copied_to_host() const { return bytes_to_host_; }
  size_t pinned_bytes() const;
  // Called at the start of every Synchronize (tests: what the caller had done by then).
  std::function<void()> on_synchronize;
  // When not OK, the next Synchronize returns it (once): a step the device found malformed.
  Status fail_next_synchronize;

 private:
  struct Mapping {
    void* base;
    size_t bytes;
  };
  class Unlocked;  // RAII: device memory readable and writable for one op
  void Protect(int prot) const;
  void ExpectDevice(std::initializer_list<const void*> pointers);
  void ExpectHost(const void* p);
  Result<void*> Map(size_t bytes);

  struct PendingCopy {
    void* host_dst;
    size_t offset;  // into staging_
    size_t bytes;
  };
  void LandPendingCopies();
  void CheckCopyToHost(const void* host_dst, const void* src, size_t bytes);  // and counts it

  std::vector<Mapping> pinned_;
  std::vector<PendingCopy> pending_;
  std::vector<char> staging_;  // what the pending copies read, as of when they were issued
  int64_t deferred_copies_ = 0;
  size_t bytes_to_host_ = 0;
  kernels::CpuBackend cpu_;
  size_t free_bytes_;
  kernels::MemoryHooks hooks_;
  std::vector<Mapping> mappings_;
  int64_t violations_ = 0;
  int64_t overflow_live_ = 0;
  int64_t ops_ = 0;
};

}  // namespace bmad::testing
