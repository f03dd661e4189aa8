#include "worker/memory/system_allocations.h"

#include <atomic>

namespace bmad::memory {
namespace {

std::atomic<uint64_t> g_count{0};
std::atomic<uint64_t> g_bytes{0};

}  // namespace

void SystemAllocations::Record(size_t bytes) {
  g_count.fetch_add(1, std::memory_order_relaxed);
  g_bytes.fetch_add(bytes, std::memory_order_relaxed);
}

uint64_t SystemAllocations::Count() { return g_count.load(std::memory_order_relaxed); }

uint64_t SystemAllocations::Bytes() { return g_bytes.load(std::memory_order_relaxed); }

}  // namespace bmad::memory
