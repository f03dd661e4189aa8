// The arena: one reservation at start-up that holds a replica's weights, KV blocks and
// workspace, cut into consecutive named regions.
//
// ReserveHost makes one anonymous mmap of huge pages (CPU replicas); Wrap adopts memory someone else reserved
// (the CUDA backend's one cudaMalloc). Carve hands out regions front to back and never takes
// them back: the layout is decided once, at start-up, and lives as long as the replica. The
// arena never reads or writes the memory it manages, so the same code serves device memory.
//
// Typical use:
//   BMAD_ASSIGN_OR_RETURN(std::unique_ptr<Arena> arena, Arena::ReserveHost(total_bytes));
//   BMAD_ASSIGN_OR_RETURN(Region weights, arena->Carve("weights", weight_bytes));
//   BMAD_ASSIGN_OR_RETURN(Region kv, arena->Carve("kv_blocks", kv_bytes));
//   log::Info("memory", arena->Describe());
//
// Lifetime: regions (and the allocators built on them) must not outlive the arena.
// Thread-safety: none; carve from one thread, at start-up.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/memory/region.h"

namespace bmad::memory {

class Arena {
 public:
  // Reserves `bytes` of host memory with one anonymous private mmap, released when the arena is
  // destroyed, and records it as one SystemAllocations entry. The arena starts on a 2 MiB
  // boundary and asks for transparent huge pages (MADV_HUGEPAGE; the system may still give
  // 4 KiB ones), and the kernel is asked to back every page here (best effort), at start-up,
  // not on first use in the middle of a step. Errors: kInvalidArgument for 0 bytes;
  // kResourceExhausted, naming the size and the errno text, when mmap refuses.
  static Result<std::unique_ptr<Arena>> ReserveHost(size_t bytes);

  // Adopts [base, base + bytes), owned by the caller, who frees it after the arena is gone.
  // Nothing is recorded in SystemAllocations (the owner records its own reservation). A null
  // `base`, or a range that runs past the end of the address space, gives an empty arena
  // (capacity 0): every Carve then fails with kResourceExhausted.
  static std::unique_ptr<Arena> Wrap(void* base, size_t bytes);

  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // The next `bytes` of the arena whose start is a multiple of `alignment` (of the absolute
  // address). The padding skipped to align is lost. Errors, none of which consume anything:
  //   kInvalidArgument: 0 bytes, alignment not a power of two, an empty name, or a name already
  //     carved;
  //   kResourceExhausted: the region does not fit; the message names the region, the bytes and
  //     alignment it asked for and the bytes left.
  Result<Region> Carve(std::string name, size_t bytes, size_t alignment = 256);

  void* base() const { return base_; }
  size_t capacity() const { return capacity_; }
  // Bytes consumed by regions and their alignment padding.
  size_t used() const { return used_; }
  size_t remaining() const { return capacity_ - used_; }
  bool owns_memory() const { return owns_memory_; }
  const std::vector<Region>& regions() const { return regions_; }

  // One line for logs: the arena's kind and size, then each region with its size and offset,
  // then what is left, e.g.
  //   "host arena 1.00 GiB (1073741824 B) at 0x7f12...: weights 768.00 MiB (805306368 B) at +0,
  //    kv_blocks 192.00 MiB (201326592 B) at +805306368; free 64.00 MiB (67108864 B)"
  std::string Describe() const;

 private:
  Arena(void* base, size_t capacity, bool owns_memory);

  void* base_;
  size_t capacity_;
  bool owns_memory_;  // true when ReserveHost mapped it, so the destructor unmaps it
  size_t used_ = 0;
  std::vector<Region> regions_;
};

// "1.50 GiB"-style rendering of a byte count, for logs and messages.
std::string HumanBytes(size_t bytes);

}  // namespace bmad::memory
