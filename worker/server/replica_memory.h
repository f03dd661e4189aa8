// A replica's memory: one arena reserved at start-up and carved into
//   weights    the backend's prepared (packed) matrices, handed out linearly, never freed
//   kv         the KV block pool (fixed-size blocks)
//   workspace  a bump allocator for each step's activations, reset every step
//   scratch    a buddy allocator for the backend's growable per-thread buffers
// so that after start-up the engine reaches the system allocator only if a region was sized too
// small (each such fallback is counted in memory::SystemAllocations).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "common/status.h"
#include "kernels/backend.h"
#include "worker/memory/arena.h"
#include "worker/memory/buddy_allocator.h"
#include "worker/memory/bump_allocator.h"
#include "worker/memory/fixed_block_pool.h"

namespace bmad::worker {

struct ReplicaMemorySizes {
  size_t weights_bytes = 0;
  size_t kv_block_bytes = 0;
  int64_t kv_blocks = 0;
  size_t workspace_bytes = 0;
  size_t scratch_bytes = 0;
  size_t Total() const;
};

class ReplicaMemory {
 public:
  // Reserves the arena: `arena_bytes` when non-zero (kInvalidArgument naming every part when it
  // is too small), else exactly what `sizes` needs.
  static Result<std::unique_ptr<ReplicaMemory>> Create(const ReplicaMemorySizes& sizes,
                                                       size_t arena_bytes);

  // Hooks that take weights and scratch from the arena.
  kernels::MemoryHooks BackendHooks();
  void* KvMemory() const { return kv_pool_->base(); }
  memory::BumpAllocator& workspace() { return *workspace_; }
  std::string Describe() const { return arena_->Describe(); }

 private:
  ReplicaMemory() = default;
  void* AllocateWeights(size_t bytes);
  void* AllocateScratch(size_t bytes);
  void FreeScratch(void* p);

  std::unique_ptr<memory::Arena> arena_;
  memory::Region weights_;
  size_t weights_used_ = 0;
  std::optional<memory::FixedBlockPool> kv_pool_;
  std::unique_ptr<memory::BumpAllocator> workspace_;
  std::optional<memory::BuddyAllocator> scratch_;
  std::mutex scratch_mutex_;  // compute threads grow their scratch concurrently
};

}  // namespace bmad::worker
