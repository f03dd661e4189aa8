// Address arithmetic shared by the allocators. Nothing here dereferences an address.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace bmad::memory {

inline bool IsPowerOfTwo(size_t value) { return std::has_single_bit(value); }

// Bytes to add to `address` to reach the next multiple of `alignment` (a power of two).
inline size_t PaddingToAlign(uintptr_t address, size_t alignment) {
  return static_cast<size_t>((alignment - (address & (alignment - 1))) & (alignment - 1));
}

inline uintptr_t AddressOf(const void* p) { return reinterpret_cast<uintptr_t>(p); }

// Whether [base, base + bytes) runs past the end of the address space; such a range cannot be
// memory, and offsets into it would wrap around.
inline bool RangeWrapsAround(const void* base, size_t bytes) {
  return bytes > std::numeric_limits<uintptr_t>::max() - AddressOf(base);
}

// `base` advanced by `offset` bytes, computed as an integer: the memory may not be ours to touch
// (a PROT_NONE mapping, device memory), so this must not be pointer arithmetic on a char*.
inline void* OffsetAddress(void* base, size_t offset) {
  return reinterpret_cast<void*>(AddressOf(base) + offset);
}

}  // namespace bmad::memory
