// The process-wide count of allocations the memory subsystem had to make outside the arena.
//
// After start-up every buffer of the hot path should come from the one reservation (Arena), so
// any call to the OS or to malloc that the memory code still makes is recorded here: the arena's
// own reservation, allocator metadata, the BumpAllocator's overflow chunks, and buffers other
// components grow (they call Record themselves). The engine exports Count() and Bytes() as
// metrics; after warm-up both must stay flat, and a rising count points at an undersized region.
//
// Thread-safety: every function may be called from any thread (relaxed atomics; the values are
// statistics, not synchronisation).
#pragma once

#include <cstddef>
#include <cstdint>

namespace bmad::memory {

class SystemAllocations {
 public:
  SystemAllocations() = delete;

  // Records one allocation of `bytes` made from the OS or malloc.
  static void Record(size_t bytes);

  // Allocations recorded since the process started.
  static uint64_t Count();
  // Their total size in bytes (cumulative: frees do not subtract).
  static uint64_t Bytes();
};

}  // namespace bmad::memory
