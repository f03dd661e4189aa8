#include "tests/worker/memory/heap_allocation_counter.h"

#include <cstdlib>
#include <new>

namespace {

thread_local uint64_t t_allocations = 0;

void* CountedAllocate(std::size_t bytes) {
  ++t_allocations;
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
  throw std::bad_alloc();
}

}  // namespace

namespace bmad::testing {

uint64_t HeapAllocationsOnThisThread() { return t_allocations; }

}  // namespace bmad::testing

void* operator new(std::size_t bytes) { return CountedAllocate(bytes); }
void* operator new[](std::size_t bytes) { return CountedAllocate(bytes); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
