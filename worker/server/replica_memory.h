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
#include "worker/model/llama/llama_model.h"

namespace bmad::worker {

struct ReplicaMemorySizes {
  size_t weights_bytes = 0;
  size_t kv_block_bytes = 0;
  int64_t kv_blocks = 0;
  size_t workspace_bytes = 0;
  size_t scratch_bytes = 0;
  size_t Total() const;
};

// What a replica of `model` needs besides its KV blocks (kv_blocks is left 0) to run steps of
// up to `max_tokens` tokens and `max_rows` sequences and rows of logits over `block_size`-token
// blocks.
ReplicaMemorySizes SizeReplicaMemory(const model::LlamaModel& model, int64_t max_tokens,
                                     int64_t max_rows, int64_t block_size);

class ReplicaMemory {
 public:
  // Reserves the arena: `arena_bytes` when non-zero (kInvalidArgument naming every part when it
  // is too small), else exactly what `sizes` needs. In host memory (one mmap), or, given a
  // `device` backend, in its memory (one ReserveDeviceMemory, owned by the backend, which must
  // outlive this object); then an allocation that does not fit its region gets nullptr from the
  // hooks, and the backend falls back to its own (counted) allocator, and a step that overflows
  // the workspace gets device memory from the backend (AllocateDeviceOverflow). Such overflow
  // chunks live until the workspace's next Reset(), which the owner calls before destroying the
  // backend.
  static Result<std::unique_ptr<ReplicaMemory>> Create(const ReplicaMemorySizes& sizes,
                                                       size_t arena_bytes,
                                                       kernels::Backend* device = nullptr);

  // Hooks that take weights and scratch from the arena.
  kernels::MemoryHooks BackendHooks();
  void* KvMemory() const { return kv_pool_->base(); }
  size_t capacity() const { return arena_->capacity(); }
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
  bool on_device_ = false;
};

}  // namespace bmad::worker
