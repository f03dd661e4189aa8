// The KV block pool: a region cut into `num_blocks` equal blocks addressed by id.
//
// Only address arithmetic plus validation: which blocks are in use, shared or cached is the KV
// block manager's business, and nothing here reads or writes the blocks (they may be device
// memory). Block `id` starts at base() + id * block_bytes(); bytes after the last whole block
// are unused.
//
// Thread-safety: immutable after Create; safe to share between threads.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "common/status.h"
#include "worker/memory/alignment.h"
#include "worker/memory/region.h"

namespace bmad::memory {

class FixedBlockPool {
 public:
  // Blocks are multiples of 64 bytes on a 64-byte aligned base, so every block is aligned for
  // vector loads. Errors (kInvalidArgument): block_bytes 0 or not a multiple of 64; a null or
  // unaligned base, or a range past the end of the address space; a region smaller than one
  // block; more than INT32_MAX blocks (ids are int32).
  static Result<FixedBlockPool> Create(Region region, size_t block_bytes);

  int32_t num_blocks() const { return num_blocks_; }
  size_t block_bytes() const { return block_bytes_; }
  void* base() const { return region_.base; }
  const Region& region() const { return region_; }

  // The first byte of block `id`, for id in [0, num_blocks()). An id out of range is a bug in
  // the caller: debug builds assert; release builds return nullptr.
  void* BlockAddress(int32_t id) const {
    assert(id >= 0 && id < num_blocks_ && "block id out of range");
    if (id < 0 || id >= num_blocks_) return nullptr;
    return OffsetAddress(region_.base, static_cast<size_t>(id) * block_bytes_);
  }

 private:
  FixedBlockPool(Region region, size_t block_bytes, int32_t num_blocks)
      : region_(std::move(region)), block_bytes_(block_bytes), num_blocks_(num_blocks) {}

  Region region_;
  size_t block_bytes_;
  int32_t num_blocks_;
};

}  // namespace bmad::memory
