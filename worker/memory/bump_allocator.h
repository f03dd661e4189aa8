// The per-step workspace: a bump allocator over one region, emptied by Reset() every step.
//
// Allocate moves a cursor forward; Reset moves it back to the start. The region is sized at
// start-up for the largest step, so the hot path does no system allocation. Allocate never
// fails for lack of room: when the region is exhausted it serves the request from an overflow
// chunk obtained from a fallback allocator (malloc by default; the CUDA backend passes a device
// allocator), records each chunk in SystemAllocations, logs a warning the first time, and frees
// every chunk at the next Reset(). The workspace then works, only slower, and the metrics and
// high_water() say by how much the region should grow.
//
// The allocator never reads or writes the memory it hands out (region or chunks), so it works
// on device memory unchanged.
//
// Lifetime: pointers from Allocate are valid until the next Reset() or the destructor.
// Thread-safety: none; one owner thread (the engine's step loop).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "worker/memory/region.h"

namespace bmad::memory {

// Where overflow chunks come from. `allocate` returns nullptr when it cannot; `free` receives a
// pointer `allocate` returned, and the size that was asked for.
struct OverflowAllocator {
  std::function<void*(size_t bytes)> allocate;
  std::function<void(void* p, size_t bytes)> free;
};

// std::malloc and std::free.
OverflowAllocator MallocOverflowAllocator();

class BumpAllocator {
 public:
  // Overflow chunks are at least this large, so a step that overflows by many small requests
  // makes a few system allocations, not one per request.
  static constexpr size_t kMinOverflowChunkBytes = size_t{64} << 10;

  explicit BumpAllocator(Region region);
  // An `overflow` with an empty allocate or free function falls back to malloc/free.
  BumpAllocator(Region region, OverflowAllocator overflow);
  ~BumpAllocator();  // frees the overflow chunks

  BumpAllocator(const BumpAllocator&) = delete;
  BumpAllocator& operator=(const BumpAllocator&) = delete;

  // `bytes` whose address is a multiple of `alignment` (a power of two; other values are
  // rounded up to one, 0 counts as 1). Successive calls return disjoint ranges. A 0-byte
  // request returns a distinct valid address, as a 1-byte request would. Served from the region
  // while it has room, else from an overflow chunk. Returns nullptr only when no memory could
  // serve the request: the fallback allocator failed (e.g. a size near SIZE_MAX), and then
  // nothing is recorded or changed.
  void* Allocate(size_t bytes, size_t alignment = 64);

  // Forgets every allocation and frees the overflow chunks. Call once per step.
  void Reset();

  const Region& region() const { return region_; }
  size_t capacity() const { return region_.bytes; }
  // Bytes asked for since the last Reset, counting alignment padding in the region and the
  // requests served by overflow chunks: what the region would have needed so far this step.
  size_t used() const { return region_used_ + overflow_used_; }
  // The largest used() ever seen; above capacity() means the region is too small by that much.
  size_t high_water() const { return high_water_; }
  // Overflow chunks allocated over the allocator's lifetime.
  uint64_t overflow_count() const { return overflow_count_; }

 private:
  struct Chunk {
    void* base;
    size_t bytes;
    size_t used;
  };

  // Serves the request from the newest chunk, allocating a new one when it has no room.
  void* AllocateOverflow(size_t bytes, size_t alignment);
  void FreeChunks();

  Region region_;
  OverflowAllocator overflow_;
  size_t region_used_ = 0;    // cursor into the region, padding included
  size_t overflow_used_ = 0;  // bytes of this step's requests served by chunks
  size_t high_water_ = 0;
  uint64_t overflow_count_ = 0;
  bool overflow_logged_ = false;
  std::vector<Chunk> chunks_;  // this step's overflow chunks, newest last
};

}  // namespace bmad::memory
