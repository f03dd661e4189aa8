// Counts the calls to the global operator new made on the calling thread. Linked into a test
// binary, heap_allocation_counter.cc replaces operator new/delete (forwarding to malloc/free) for
// the whole binary, so that a test can check that a hot-path call makes no heap allocation at
// all, not only none that SystemAllocations records.
#pragma once

#include <cstdint>

namespace bmad::testing {

uint64_t HeapAllocationsOnThisThread();

}  // namespace bmad::testing
