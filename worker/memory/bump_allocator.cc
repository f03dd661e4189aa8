#include "worker/memory/bump_allocator.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <limits>
#include <utility>

#include "common/log.h"
#include "worker/memory/alignment.h"
#include "worker/memory/system_allocations.h"

namespace bmad::memory {
namespace {

constexpr size_t kMaxSize = std::numeric_limits<size_t>::max();
constexpr size_t kLargestAlignment = (kMaxSize >> 1) + 1;

// A region whose range is unusable (no base, or running past the end of the address space) is
// treated as empty: every request then overflows, which is slow but correct.
Region UsableRegion(Region region) {
  if (region.base == nullptr || RangeWrapsAround(region.base, region.bytes)) region.bytes = 0;
  return region;
}

// Whether `bytes` aligned to `alignment` fit in the `left` bytes that start at `cursor`.
bool Fits(uintptr_t cursor, size_t left, size_t bytes, size_t alignment) {
  const size_t padding = PaddingToAlign(cursor, alignment);
  return padding <= left && bytes <= left - padding;
}

}  // namespace

OverflowAllocator MallocOverflowAllocator() {
  return OverflowAllocator{
      [](size_t bytes) -> void* {
        // malloc refuses these anyway; asking would only make a sanitizer's allocator abort.
        if (bytes > static_cast<size_t>(std::numeric_limits<ptrdiff_t>::max())) return nullptr;
        return std::malloc(bytes);
      },
      [](void* p, size_t) { std::free(p); }};
}

BumpAllocator::BumpAllocator(Region region)
    : BumpAllocator(std::move(region), MallocOverflowAllocator()) {}

BumpAllocator::BumpAllocator(Region region, OverflowAllocator overflow)
    : region_(UsableRegion(std::move(region))), overflow_(std::move(overflow)) {
  if (!overflow_.allocate || !overflow_.free) overflow_ = MallocOverflowAllocator();
}

BumpAllocator::~BumpAllocator() { FreeChunks(); }

void* BumpAllocator::Allocate(size_t bytes, size_t alignment) {
  // A 0-byte request still gets its own address, so callers may use addresses as identities.
  bytes = std::max<size_t>(bytes, 1);
  if (alignment > kLargestAlignment) return nullptr;  // no power of two that large exists
  alignment = std::bit_ceil(std::max<size_t>(alignment, 1));

  const uintptr_t cursor = AddressOf(region_.base) + region_used_;
  if (Fits(cursor, region_.bytes - region_used_, bytes, alignment)) {
    const size_t padding = PaddingToAlign(cursor, alignment);
    void* p = OffsetAddress(region_.base, region_used_ + padding);
    region_used_ += padding + bytes;
    high_water_ = std::max(high_water_, used());
    return p;
  }
  return AllocateOverflow(bytes, alignment);
}

void* BumpAllocator::AllocateOverflow(size_t bytes, size_t alignment) {
  const bool fits_newest_chunk =
      !chunks_.empty() && Fits(AddressOf(chunks_.back().base) + chunks_.back().used,
                               chunks_.back().bytes - chunks_.back().used, bytes, alignment);
  if (!fits_newest_chunk) {
    // The fallback promises no alignment, so the chunk has room to align inside it.
    if (bytes > kMaxSize - (alignment - 1)) return nullptr;
    const size_t chunk_bytes = std::max(kMinOverflowChunkBytes, bytes + (alignment - 1));
    void* chunk = overflow_.allocate(chunk_bytes);
    if (chunk == nullptr) return nullptr;
    chunks_.push_back(Chunk{chunk, chunk_bytes, 0});
    SystemAllocations::Record(chunk_bytes);
    ++overflow_count_;
    if (!overflow_logged_) {
      // Once per allocator: on an undersized workspace this would otherwise repeat every step.
      // The SystemAllocations metric and high_water() keep counting.
      overflow_logged_ = true;
      log::Warn("memory", "workspace region exhausted; using system allocations until reset",
                {{"region", region_.name},
                 {"capacity_bytes", region_.bytes},
                 {"used_bytes", used()},
                 {"requested_bytes", bytes},
                 {"chunk_bytes", chunk_bytes}});
    }
  }
  Chunk& newest = chunks_.back();
  const size_t padding = PaddingToAlign(AddressOf(newest.base) + newest.used, alignment);
  void* p = OffsetAddress(newest.base, newest.used + padding);
  newest.used += padding + bytes;
  overflow_used_ += bytes;
  high_water_ = std::max(high_water_, used());
  return p;
}

void BumpAllocator::Reset() {
  FreeChunks();
  region_used_ = 0;
  overflow_used_ = 0;
}

void BumpAllocator::FreeChunks() {
  for (const Chunk& chunk : chunks_) overflow_.free(chunk.base, chunk.bytes);
  chunks_.clear();
}

}  // namespace bmad::memory
