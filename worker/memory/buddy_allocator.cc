#include "worker/memory/buddy_allocator.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <utility>

#include "worker/memory/alignment.h"
#include "worker/memory/arena.h"
#include "worker/memory/system_allocations.h"

namespace bmad::memory {
namespace {

std::string PointerText(const void* p) {
  char text[32];
  std::snprintf(text, sizeof(text), "%p", p);
  return text;
}

}  // namespace

Result<BuddyAllocator> BuddyAllocator::Create(Region region, size_t min_block) {
  const std::string what = "buddy allocator '" + region.name + "': ";
  if (!IsPowerOfTwo(min_block)) {
    return InvalidArgument(what + "min_block " + std::to_string(min_block) +
                           " is not a power of two");
  }
  if (region.base == nullptr || RangeWrapsAround(region.base, region.bytes)) {
    return InvalidArgument(what + "the region is not a valid address range");
  }
  const size_t num_units = region.bytes / min_block;
  if (num_units == 0) {
    return InvalidArgument(what + "the region's " + std::to_string(region.bytes) +
                           " bytes do not hold one block of " + std::to_string(min_block));
  }
  if (num_units >= kNoUnit) {
    return InvalidArgument(what + std::to_string(num_units) + " blocks of " +
                           std::to_string(min_block) + " bytes are too many; raise min_block");
  }
  const int min_block_shift = std::countr_zero(min_block);
  return BuddyAllocator(std::move(region), min_block_shift, static_cast<uint32_t>(num_units));
}

BuddyAllocator::BuddyAllocator(Region region, int min_block_shift, uint32_t num_units)
    : region_(std::move(region)),
      min_block_shift_(min_block_shift),
      num_orders_(std::bit_width(num_units)),
      num_units_(num_units),
      state_(num_units, kInside),
      order_(num_units, 0),
      next_(num_units, kNoUnit),
      prev_(num_units, kNoUnit),
      free_list_(static_cast<size_t>(num_orders_), kNoUnit) {
  const size_t bytes_per_unit = sizeof(UnitState) + sizeof(uint8_t) + 2 * sizeof(uint32_t);
  SystemAllocations::Record(num_units * bytes_per_unit + free_list_.size() * sizeof(uint32_t));
  // The top-level blocks, largest first: one per bit of num_units. Each starts at the sum of
  // the larger ones, a multiple of its own size, as buddy arithmetic requires; and its buddy
  // would start where the next, smaller block begins, so top-level blocks never merge.
  uint32_t unit = 0;
  for (int order = num_orders_ - 1; order >= 0; --order) {
    if ((num_units >> order) & 1u) {
      PushFree(unit, order);
      unit += uint32_t{1} << order;
    }
  }
}

Result<void*> BuddyAllocator::Allocate(size_t bytes) {
  if (bytes == 0) return InvalidArgument("buddy allocator '" + region_.name + "': 0 bytes");
  if (bytes > max_block()) {
    return InvalidArgument("buddy allocator '" + region_.name + "': " + std::to_string(bytes) +
                           " bytes exceed its largest block, " + HumanBytes(max_block()));
  }
  const int order = std::countr_zero(std::bit_ceil(std::max(bytes, min_block()))) -
                    min_block_shift_;
  int source = order;
  while (source < num_orders_ && free_list_[static_cast<size_t>(source)] == kNoUnit) ++source;
  if (source == num_orders_) {
    return ResourceExhausted("buddy allocator '" + region_.name + "': no free block of " +
                             HumanBytes(BlockBytes(order)) + " for " + std::to_string(bytes) +
                             " bytes; largest free block " + HumanBytes(LargestFreeBlock()) +
                             ", " + HumanBytes(capacity() - used_bytes_) + " of " +
                             HumanBytes(capacity()) + " free");
  }
  const uint32_t unit = free_list_[static_cast<size_t>(source)];
  Unlink(unit, source);
  // Split down to the order asked for, keeping the lower half and freeing the upper one.
  while (source > order) {
    --source;
    PushFree(unit + (uint32_t{1} << source), source);
  }
  state_[unit] = kLiveHead;
  order_[unit] = static_cast<uint8_t>(order);
  used_bytes_ += BlockBytes(order);
  ++allocations_;
  return OffsetAddress(region_.base, static_cast<size_t>(unit) << min_block_shift_);
}

Status BuddyAllocator::Free(void* p) {
  // Built on the error paths only: a good Free makes no system allocation.
  const auto refused = [&](std::string_view why) {
    return InvalidArgument("buddy allocator '" + region_.name + "': cannot free " + PointerText(p) + ": " +
                           std::string(why));
  };
  if (p == nullptr) return refused("it was never handed out");
  const uintptr_t base = AddressOf(region_.base);
  if (AddressOf(p) < base || AddressOf(p) - base >= capacity()) return refused("outside the region");
  uint32_t unit = UnitOf(p);
  if (unit == kNoUnit || state_[unit] == kInside) {
    return refused("not the start of a live allocation (freed already, or never handed out)");
  }
  if (state_[unit] == kFreeHead) return refused("the block is free (double free, or never handed out)");

  int order = order_[unit];
  used_bytes_ -= BlockBytes(order);
  --allocations_;
  state_[unit] = kInside;
  // Merge with the buddy while it is a free block of the same order. Top-level blocks have no
  // buddy of their order (see the constructor), so this stops at the top by itself.
  while (order + 1 < num_orders_) {
    const uint32_t buddy = unit ^ (uint32_t{1} << order);
    if (buddy >= num_units_ || state_[buddy] != kFreeHead || order_[buddy] != order) break;
    Unlink(buddy, order);
    state_[buddy] = kInside;
    unit = std::min(unit, buddy);
    ++order;
  }
  PushFree(unit, order);
  return Status::Ok();
}

BuddyAllocator::Stats BuddyAllocator::stats() const {
  return Stats{used_bytes_, capacity() - used_bytes_, LargestFreeBlock(), allocations_};
}

size_t BuddyAllocator::AllocationBytes(const void* p) const {
  const uint32_t unit = UnitOf(p);
  if (unit == kNoUnit || state_[unit] != kLiveHead) return 0;
  return BlockBytes(order_[unit]);
}

uint32_t BuddyAllocator::UnitOf(const void* p) const {
  const uintptr_t base = AddressOf(region_.base);
  if (p == nullptr || AddressOf(p) < base) return kNoUnit;
  const uintptr_t offset = AddressOf(p) - base;
  if (offset >= capacity() || (offset & (min_block() - 1)) != 0) return kNoUnit;
  return static_cast<uint32_t>(offset >> min_block_shift_);
}

void BuddyAllocator::PushFree(uint32_t unit, int order) {
  uint32_t& head = free_list_[static_cast<size_t>(order)];
  state_[unit] = kFreeHead;
  order_[unit] = static_cast<uint8_t>(order);
  prev_[unit] = kNoUnit;
  next_[unit] = head;
  if (head != kNoUnit) prev_[head] = unit;
  head = unit;
}

void BuddyAllocator::Unlink(uint32_t unit, int order) {
  if (prev_[unit] != kNoUnit) {
    next_[prev_[unit]] = next_[unit];
  } else {
    free_list_[static_cast<size_t>(order)] = next_[unit];
  }
  if (next_[unit] != kNoUnit) prev_[next_[unit]] = prev_[unit];
  prev_[unit] = next_[unit] = kNoUnit;
}

size_t BuddyAllocator::LargestFreeBlock() const {
  for (int order = num_orders_ - 1; order >= 0; --order) {
    if (free_list_[static_cast<size_t>(order)] != kNoUnit) return BlockBytes(order);
  }
  return 0;
}

}  // namespace bmad::memory
