// Address arithmetic the allocator tests share. Wrapped regions are only arithmetic, so tests
// may also make up addresses nobody mapped.
#pragma once

#include <cstdint>

namespace bmad::memory::testing {

inline uintptr_t Address(const void* p) { return reinterpret_cast<uintptr_t>(p); }
inline void* FakeAddress(uintptr_t address) { return reinterpret_cast<void*>(address); }

}  // namespace bmad::memory::testing
