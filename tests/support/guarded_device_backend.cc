#include "tests/support/guarded_device_backend.h"

#include <utility>

#include <algorithm>

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

namespace bmad::testing {
namespace {

kernels::CpuBackendOptions Threads(int threads) {
  kernels::CpuBackendOptions o;
  o.threads = threads;
  return o;
}

}  // namespace

class GuardedDeviceBackend::Unlocked {
 public:
  explicit Unlocked(GuardedDeviceBackend& b) : b_(b) {
    ++b_.ops_;
    b_.Protect(PROT_READ | PROT_WRITE);
  }
  ~Unlocked() { b_.Protect(PROT_NONE); }
  Unlocked(const Unlocked&) = delete;
  Unlocked& operator=(const Unlocked&) = delete;

 private:
  GuardedDeviceBackend& b_;
};

GuardedDeviceBackend::GuardedDeviceBackend(int threads, size_t free_bytes)
    : cpu_(Threads(threads)), free_bytes_(free_bytes) {}

GuardedDeviceBackend::~GuardedDeviceBackend() {
  // The CPU backend hands its scratch back through the hooks when it is destroyed (after this
  // body): the allocators keep their bookkeeping on the host, so unmapping first is safe.
  for (const Mapping& m : mappings_) munmap(m.base, m.bytes);
}

Result<void*> GuardedDeviceBackend::Map(size_t bytes) {
  const size_t page = 4096;
  const size_t rounded = (bytes + page - 1) / page * page;
  void* p = mmap(nullptr, rounded, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return ResourceExhausted(std::string("mmap: ") + std::strerror(errno));
  mappings_.push_back({p, rounded});
  return p;
}

Result<void*> GuardedDeviceBackend::ReserveDeviceMemory(size_t bytes) {
  if (bytes == 0) return InvalidArgument("cannot reserve 0 bytes of device memory");
  if (bytes > free_bytes_) return ResourceExhausted("the simulated device has too little free memory");
  return Map(bytes);
}

void* GuardedDeviceBackend::AllocateDeviceOverflow(size_t bytes) {
  Result<void*> p = Map(bytes == 0 ? 1 : bytes);
  if (!p.ok()) return nullptr;
  ++overflow_live_;
  return *p;
}

void GuardedDeviceBackend::ReleaseDeviceOverflow(void* p) {
  for (size_t i = 0; i < mappings_.size(); ++i) {
    if (mappings_[i].base == p) {
      munmap(p, mappings_[i].bytes);
      mappings_.erase(mappings_.begin() + static_cast<std::ptrdiff_t>(i));
      --overflow_live_;
      return;
    }
  }
  ++violations_;  // not ours
}

void GuardedDeviceBackend::Protect(int prot) const {
  for (const Mapping& m : mappings_) mprotect(m.base, m.bytes, prot);
}

bool GuardedDeviceBackend::OnDevice(const void* p) const {
  const auto* c = static_cast<const char*>(p);
  for (const Mapping& m : mappings_) {
    const auto* base = static_cast<const char*>(m.base);
    if (c >= base && c < base + m.bytes) return true;
  }
  return false;
}

void GuardedDeviceBackend::ExpectDevice(std::initializer_list<const void*> pointers) {
  for (const void* p : pointers) {
    if (p != nullptr && !OnDevice(p)) ++violations_;
  }
}

void GuardedDeviceBackend::SetMemoryHooks(kernels::MemoryHooks hooks) {
  hooks_ = hooks;
  cpu_.SetMemoryHooks(std::move(hooks));
}

kernels::PreparedWeight GuardedDeviceBackend::PrepareMatMulWeight(const kernels::WeightMatrix& w) {
  Unlocked u(*this);
  kernels::PreparedWeight p = cpu_.PrepareMatMulWeight(w);
  ExpectDevice({p.view.data});
  return p;
}

size_t GuardedDeviceBackend::UploadedBytes(const kernels::WeightMatrix& w) const {
  return w.row_bytes * static_cast<size_t>(w.rows);
}

kernels::PreparedWeight GuardedDeviceBackend::UploadRows(const kernels::WeightMatrix& w) {
  const size_t bytes = UploadedBytes(w);
  void* d = hooks_.allocate_weights ? hooks_.allocate_weights(bytes) : nullptr;
  if (d == nullptr) {
    // As CUDA falls back to cudaMalloc: memory of its own, still device memory.
    Result<void*> mapped = Map(bytes);
    if (!mapped.ok()) return {w, nullptr};
    d = *mapped;
  }
  Unlocked u(*this);
  std::memcpy(d, w.data, bytes);
  kernels::PreparedWeight p{w, nullptr};
  p.view.data = d;
  return p;
}

void GuardedDeviceBackend::ExpectHost(const void* p) {
  if (p != nullptr && OnDevice(p)) ++violations_;
}

Status GuardedDeviceBackend::CopyToDevice(void* dst, const void* host_src, size_t bytes) {
  ExpectDevice({dst});
  ExpectHost(host_src);
  Unlocked u(*this);
  if (bytes != 0) std::memcpy(dst, host_src, bytes);
  return Status::Ok();
}

Status GuardedDeviceBackend::CopyToHostAsync(void* host_dst, const void* src, size_t bytes) {
  const auto* dst = static_cast<const char*>(host_dst);
  const bool pinned = std::any_of(pinned_.begin(), pinned_.end(), [&](const Mapping& m) {
    const auto* base = static_cast<const char*>(m.base);
    return dst >= base && dst + bytes <= base + m.bytes;
  });
  if (!pinned) return CopyToHost(host_dst, src, bytes);  // pageable: the copy blocks
  CheckCopyToHost(host_dst, src, bytes);
  const size_t offset = staging_.size();
  staging_.resize(offset + bytes);
  {
    Unlocked u(*this);
    if (bytes != 0) std::memcpy(staging_.data() + offset, src, bytes);
  }
  std::memset(host_dst, 0xff, bytes);  // NaN until it lands
  pending_.push_back({host_dst, offset, bytes});
  ++deferred_copies_;
  return Status::Ok();
}

void GuardedDeviceBackend::CheckCopyToHost(const void* host_dst, const void* src, size_t bytes) {
  ExpectDevice({src});
  ExpectHost(host_dst);
  bytes_to_host_ += bytes;
}

void GuardedDeviceBackend::LandPendingCopies() {
  for (const PendingCopy& c : pending_) std::memcpy(c.host_dst, staging_.data() + c.offset, c.bytes);
  pending_.clear();
  staging_.clear();
}

Status GuardedDeviceBackend::PinHostMemory(void* p, size_t bytes) {
  ExpectHost(p);
  pinned_.push_back({p, bytes});
  return Status::Ok();
}

void GuardedDeviceBackend::UnpinHostMemory(void* p) {
  std::erase_if(pinned_, [&](const Mapping& m) { return m.base == p; });
}

size_t GuardedDeviceBackend::pinned_bytes() const {
  size_t total = 0;
  for (const Mapping& m : pinned_) total += m.bytes;
  return total;
}

Status GuardedDeviceBackend::CopyToHost(void* host_dst, const void* src, size_t bytes) {
  LandPendingCopies();  // it waits for everything issued before it
  CheckCopyToHost(host_dst, src, bytes);
  Unlocked u(*this);
  if (bytes != 0) std::memcpy(host_dst, src, bytes);
  return Status::Ok();
}

Status GuardedDeviceBackend::CopyOnDevice(void* dst, const void* src, size_t bytes) {
  ExpectDevice({dst, src});
  Unlocked u(*this);
  if (bytes != 0) std::memcpy(dst, src, bytes);
  return Status::Ok();
}

Status GuardedDeviceBackend::Synchronize() {
  if (on_synchronize) on_synchronize();
  LandPendingCopies();
  if (violations_ != 0) {
    return Internal(std::to_string(violations_) + " ops were given host memory for device memory");
  }
  if (!fail_next_synchronize.ok()) return std::exchange(fail_next_synchronize, Status::Ok());
  return Status::Ok();
}

void GuardedDeviceBackend::Embedding(const kernels::WeightMatrix& table,
                                     std::span<const int32_t> ids, float* out) {
  ExpectDevice({table.data, out});
  Unlocked u(*this);
  cpu_.Embedding(table, ids, out);
}

void GuardedDeviceBackend::RmsNorm(const float* x, const float* weight, int64_t rows, int64_t dim,
                                   float eps, float* out) {
  ExpectDevice({x, weight, out});
  Unlocked u(*this);
  cpu_.RmsNorm(x, weight, rows, dim, eps, out);
}

void GuardedDeviceBackend::Rope(float* x, std::span<const int32_t> positions, int64_t n_heads,
                                int64_t head_dim, const kernels::RopeConfig& rope) {
  ExpectDevice({x});
  Unlocked u(*this);
  cpu_.Rope(x, positions, n_heads, head_dim, rope);
}

void GuardedDeviceBackend::MatMul(const float* x, int64_t m, const kernels::WeightMatrix& w,
                                  float* y) {
  ExpectDevice({x, w.data, y});
  Unlocked u(*this);
  cpu_.MatMul(x, m, w, y);
}

void GuardedDeviceBackend::SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  ExpectDevice({gate, up, out});
  Unlocked u(*this);
  cpu_.SwiGlu(gate, up, n, out);
}

void GuardedDeviceBackend::Add(float* x, const float* y, int64_t n) {
  ExpectDevice({x, y});
  Unlocked u(*this);
  cpu_.Add(x, y, n);
}

void GuardedDeviceBackend::Softmax(float* x, int64_t rows, int64_t n) {
  ExpectDevice({x});
  Unlocked u(*this);
  cpu_.Softmax(x, rows, n);
}

void GuardedDeviceBackend::Argmax(const float* x, int64_t rows, int64_t n, int32_t* out) {
  ExpectDevice({x, out});
  Unlocked u(*this);
  cpu_.Argmax(x, rows, n, out);
}

void GuardedDeviceBackend::SampleRows(const float* x, int64_t rows, int64_t n,
                                      std::span<const kernels::RowSampling> params,
                                      int32_t* out) {
  ExpectDevice({x, out});
  Unlocked u(*this);
  cpu_.SampleRows(x, rows, n, params, out);
}

void GuardedDeviceBackend::StoreKv(const kernels::KvLayerView& cache, const float* k,
                                   const float* v,
                                   std::span<const kernels::AttentionSequence> sequences) {
  ExpectDevice({cache.k, cache.v, k, v});
  Unlocked u(*this);
  cpu_.StoreKv(cache, k, v, sequences);
}

void GuardedDeviceBackend::AttentionPrefill(const kernels::KvLayerView& cache, const float* q,
                                            std::span<const kernels::AttentionSequence> sequences,
                                            int64_t n_heads, float scale, float* out) {
  ExpectDevice({cache.k, cache.v, q, out});
  Unlocked u(*this);
  cpu_.AttentionPrefill(cache, q, sequences, n_heads, scale, out);
}

void GuardedDeviceBackend::AttentionDecode(const kernels::KvLayerView& cache, const float* q,
                                           std::span<const kernels::AttentionSequence> sequences,
                                           int64_t n_heads, float scale, float* out) {
  ExpectDevice({cache.k, cache.v, q, out});
  Unlocked u(*this);
  cpu_.AttentionDecode(cache, q, sequences, n_heads, scale, out);
}

}  // namespace bmad::testing
