// A named, contiguous range of memory carved from an Arena.
//
// A Region is only an address and a size: it owns nothing and says nothing about whether the
// memory is host or device memory. The allocators built on it (BumpAllocator, FixedBlockPool,
// BuddyAllocator) never read or write through `base`; they only do arithmetic on it.
#pragma once

#include <cstddef>
#include <string>

namespace bmad::memory {

struct Region {
  std::string name;      // for logs and error messages, e.g. "kv_blocks"
  void* base = nullptr;  // the first byte; may point at memory this process cannot touch
  size_t bytes = 0;
};

}  // namespace bmad::memory
