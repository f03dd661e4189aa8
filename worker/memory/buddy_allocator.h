// A buddy allocator for variable-size, long-lived buffers inside one region.
//
// Blocks are powers of two from `min_block` up to the largest power of two that fits the region.
// A region whose size is not a power of two is covered by several top-level blocks, largest
// first (a 12 KiB region with 4 KiB minimum: one 8 KiB and one 4 KiB block); bytes after the
// last whole minimum block are unused. A request takes the smallest free block that holds it,
// splitting larger blocks in halves on the way down; a freed block merges with its buddy (the
// other half of the block it was split from) whenever that one is free too, all the way up.
//
// The allocator never reads or writes the memory it manages: all metadata (block sizes, states,
// free lists) lives in host arrays allocated once, in Create (about 10 bytes per minimum block,
// recorded in SystemAllocations), so Allocate and Free make no system allocation and the same
// code manages device memory. Both run in O(log(region / min_block)).
//
// Addresses are base + a multiple of the block's size: aligned to the block size when the
// region's base is (an Arena carves 256-byte aligned regions by default).
//
// Thread-safety: none; one owner thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/status.h"
#include "worker/memory/region.h"

namespace bmad::memory {

class BuddyAllocator {
 public:
  struct Stats {
    size_t used_bytes = 0;          // in allocated blocks (requests rounded up to their block)
    size_t free_bytes = 0;          // capacity() - used_bytes
    size_t largest_free_block = 0;  // the largest request that would succeed now
    size_t allocations = 0;         // live allocations
  };

  // Errors (kInvalidArgument): min_block not a power of two; a null base or a range past the
  // end of the address space; a region smaller than min_block; more than 2^32 - 2 minimum
  // blocks (use a larger min_block).
  static Result<BuddyAllocator> Create(Region region, size_t min_block = 4096);

  // A block of at least `bytes`. Errors: kInvalidArgument for 0 bytes or more than
  // max_block() (no state of the allocator could serve it); kResourceExhausted when no free
  // block is large enough now (the message gives the largest free block and the free bytes).
  Result<void*> Allocate(size_t bytes);

  // Returns the block holding `p` (an address Allocate returned) to the free lists. Errors
  // (kInvalidArgument; nothing changes): null, an address outside the region, an address
  // inside a block but not its start, a block already freed (double free), or one never
  // handed out.
  Status Free(void* p);

  Stats stats() const;
  // The size of the block behind a live allocation `p`; 0 when `p` is not one.
  size_t AllocationBytes(const void* p) const;

  const Region& region() const { return region_; }
  size_t min_block() const { return size_t{1} << min_block_shift_; }
  size_t max_block() const { return BlockBytes(num_orders_ - 1); }
  // Bytes covered by blocks: the region rounded down to a multiple of min_block.
  size_t capacity() const { return static_cast<size_t>(num_units_) << min_block_shift_; }

 private:
  // Metadata is indexed by "unit": the position of a minimum block in the region. A block of
  // order k covers 2^k units and starts at a unit that is a multiple of 2^k (from the region's
  // base), so its buddy starts at unit ^ 2^k.
  enum UnitState : uint8_t {
    kInside = 0,    // not the first unit of a block
    kFreeHead = 1,  // the first unit of a free block
    kLiveHead = 2,  // the first unit of an allocated block
  };
  static constexpr uint32_t kNoUnit = UINT32_MAX;

  BuddyAllocator(Region region, int min_block_shift, uint32_t num_units);

  size_t BlockBytes(int order) const { return min_block() << order; }
  // The unit where `p` starts, or kNoUnit when `p` is not on a unit boundary in the region.
  uint32_t UnitOf(const void* p) const;
  void PushFree(uint32_t unit, int order);
  void Unlink(uint32_t unit, int order);
  size_t LargestFreeBlock() const;

  Region region_;
  int min_block_shift_;
  int num_orders_;  // orders 0 .. num_orders_ - 1
  uint32_t num_units_;
  std::vector<UnitState> state_;  // per unit
  std::vector<uint8_t> order_;    // per unit; the block's order, meaningful at heads
  std::vector<uint32_t> next_;    // per unit; free-list links, meaningful at free heads
  std::vector<uint32_t> prev_;
  std::vector<uint32_t> free_list_;  // per order: the first free block's unit, or kNoUnit
  size_t used_bytes_ = 0;
  size_t allocations_ = 0;
};

}  // namespace bmad::memory
