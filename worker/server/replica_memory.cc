#include "worker/server/replica_memory.h"

#include <algorithm>
#include <cstdlib>

#include "common/log.h"
#include "worker/memory/system_allocations.h"

namespace bmad::worker {
namespace {

size_t Align(size_t n, size_t a) { return (n + a - 1) / a * a; }

}  // namespace

size_t ReplicaMemorySizes::Total() const {
  // Each carve may lose up to its alignment (256) to padding.
  return Align(weights_bytes, 256) + kv_block_bytes * static_cast<size_t>(kv_blocks) +
         Align(workspace_bytes, 256) + Align(scratch_bytes, 256) + 4 * 256;
}

ReplicaMemorySizes SizeReplicaMemory(const model::LlamaModel& model, int64_t max_tokens,
                                     int64_t max_rows, int64_t block_size) {
  const model::LlamaConfig& c = model.config();
  ReplicaMemorySizes sizes;
  sizes.weights_bytes = model.PreparedWeightBytes();
  sizes.kv_block_bytes = model.CacheShape(1, block_size).BytesPerBlock();
  sizes.workspace_bytes = model.WorkspaceBytes(max_tokens, max_rows);
  // The backends' per-thread tiles and attention buffers grow to a few rows of the widest
  // activation per token.
  const int64_t widest = std::max({c.n_embd, c.n_ff, c.q_dim()});
  sizes.scratch_bytes =
      static_cast<size_t>(4 * max_tokens * widest) * sizeof(float) + (size_t{16} << 20);
  return sizes;
}

Result<std::unique_ptr<ReplicaMemory>> ReplicaMemory::Create(const ReplicaMemorySizes& sizes,
                                                             size_t arena_bytes,
                                                             kernels::Backend* device) {
  const size_t needed = sizes.Total();
  if (arena_bytes != 0 && arena_bytes < needed) {
    const std::string knobs = device != nullptr
                                  ? "lower cache.num_blocks, or raise worker.gpu_memory_fraction "
                                    "or worker.arena_bytes"
                                  : "lower cache.kv_bytes or raise arena_bytes";
    return InvalidArgument(
        std::string(device != nullptr ? "the device arena" : "worker.arena_bytes") + " is " +
        memory::HumanBytes(arena_bytes) + " but this replica needs " +
        memory::HumanBytes(needed) + ": weights " + memory::HumanBytes(sizes.weights_bytes) +
        " + KV cache " + memory::HumanBytes(sizes.kv_block_bytes * static_cast<size_t>(sizes.kv_blocks)) +
        " + workspace " + memory::HumanBytes(sizes.workspace_bytes) + " + scratch " +
        memory::HumanBytes(sizes.scratch_bytes) + " (" + knobs + ")");
  }
  std::unique_ptr<ReplicaMemory> m(new ReplicaMemory());
  const size_t reserve = arena_bytes ? arena_bytes : needed;
  if (device != nullptr) {
    BMAD_ASSIGN_OR_RETURN(void* base, device->ReserveDeviceMemory(reserve));
    m->arena_ = memory::Arena::Wrap(base, reserve);
    m->on_device_ = true;
  } else {
    BMAD_ASSIGN_OR_RETURN(m->arena_, memory::Arena::ReserveHost(reserve));
  }
  BMAD_ASSIGN_OR_RETURN(m->weights_, m->arena_->Carve("weights", std::max<size_t>(sizes.weights_bytes, 64)));
  BMAD_ASSIGN_OR_RETURN(memory::Region kv, m->arena_->Carve("kv", sizes.kv_block_bytes * static_cast<size_t>(sizes.kv_blocks)));
  BMAD_ASSIGN_OR_RETURN(memory::FixedBlockPool pool, memory::FixedBlockPool::Create(kv, sizes.kv_block_bytes));
  m->kv_pool_.emplace(std::move(pool));
  BMAD_ASSIGN_OR_RETURN(memory::Region ws, m->arena_->Carve("workspace", std::max<size_t>(sizes.workspace_bytes, 64)));
  if (device != nullptr) {
    // A step larger than the workspace must still get device memory.
    memory::OverflowAllocator overflow;
    overflow.allocate = [device](size_t bytes) { return device->AllocateDeviceOverflow(bytes); };
    overflow.free = [device](void* p, size_t) { device->ReleaseDeviceOverflow(p); };
    m->workspace_ = std::make_unique<memory::BumpAllocator>(ws, std::move(overflow));
  } else {
    m->workspace_ = std::make_unique<memory::BumpAllocator>(ws);
  }
  BMAD_ASSIGN_OR_RETURN(memory::Region scratch, m->arena_->Carve("scratch", std::max<size_t>(sizes.scratch_bytes, 1 << 16)));
  BMAD_ASSIGN_OR_RETURN(memory::BuddyAllocator buddy, memory::BuddyAllocator::Create(scratch));
  m->scratch_.emplace(std::move(buddy));
  return m;
}

void* ReplicaMemory::AllocateWeights(size_t bytes) {
  const size_t start = Align(weights_used_, 64);
  if (start + bytes <= weights_.bytes) {
    weights_used_ = start + bytes;
    return static_cast<char*>(weights_.base) + start;
  }
  // The estimate was short: fall back (counted) rather than fail a load that can still work. A
  // device backend falls back to its own allocator (and counts it) when given nothing.
  if (on_device_) return nullptr;
  memory::SystemAllocations::Record(bytes);
  log::Warn("memory", "weights region too small; using the system allocator", {{"bytes", bytes}});
  return std::aligned_alloc(64, Align(bytes, 64));
}

void* ReplicaMemory::AllocateScratch(size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(scratch_mutex_);
    Result<void*> p = scratch_->Allocate(bytes);
    if (p.ok()) return *p;
  }
  if (on_device_) return nullptr;
  memory::SystemAllocations::Record(bytes);
  return std::aligned_alloc(64, Align(bytes, 64));
}

void ReplicaMemory::FreeScratch(void* p) {
  std::lock_guard<std::mutex> lock(scratch_mutex_);
  if (!scratch_->Free(p).ok()) std::free(p);  // came from the fallback
}

kernels::MemoryHooks ReplicaMemory::BackendHooks() {
  kernels::MemoryHooks hooks;
  hooks.allocate_weights = [this](size_t bytes) { return AllocateWeights(bytes); };
  hooks.allocate_scratch = [this](size_t bytes) { return AllocateScratch(bytes); };
  hooks.free_scratch = [this](void* p) { FreeScratch(p); };
  return hooks;
}

}  // namespace bmad::worker
