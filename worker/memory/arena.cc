#include "worker/memory/arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "worker/memory/alignment.h"
#include "worker/memory/system_allocations.h"

namespace bmad::memory {
namespace {

constexpr size_t kHugePageBytes = size_t{2} << 20;  // x86-64's transparent huge page

uintptr_t AlignUp(uintptr_t address, size_t alignment) {
  return address + PaddingToAlign(address, alignment);
}

std::string SizeText(size_t bytes) {
  return HumanBytes(bytes) + " (" + std::to_string(bytes) + " B)";
}

}  // namespace

std::string HumanBytes(size_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(kUnits)) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  if (unit == 0) {
    std::snprintf(text, sizeof(text), "%zu B", bytes);
  } else {
    std::snprintf(text, sizeof(text), "%.2f %s", value, kUnits[unit]);
  }
  return text;
}

Arena::Arena(void* base, size_t capacity, bool owns_memory)
    : base_(base), capacity_(capacity), owns_memory_(owns_memory) {}

Arena::~Arena() {
  if (owns_memory_) munmap(base_, capacity_);
}

Result<std::unique_ptr<Arena>> Arena::ReserveHost(size_t bytes) {
  if (bytes == 0) return InvalidArgument("arena: cannot reserve 0 bytes");
  // No MAP_NORESERVE: with the kernel's default overcommit policy an impossible reservation
  // then fails here, at start-up, instead of as an out-of-memory kill in the middle of serving.
  // One huge page more than asked for, so that the arena can start on a huge-page boundary.
  const size_t slack = bytes > SIZE_MAX - kHugePageBytes ? 0 : kHugePageBytes;
  void* map = mmap(nullptr, bytes + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) {
    const int error = errno;
    return ResourceExhausted("arena: cannot reserve " + SizeText(bytes) +
                             " of host memory: mmap: " + std::strerror(error));
  }
  // Give back the slack before and after the arena (whole pages: the mapping's length was
  // rounded up to them).
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t start = reinterpret_cast<uintptr_t>(map);
  const uintptr_t base = slack == 0 ? start : AlignUp(start, kHugePageBytes);
  const uintptr_t map_end = AlignUp(start + bytes + slack, page);
  const uintptr_t arena_end = AlignUp(base + bytes, page);
  if (base > start) munmap(map, base - start);
  if (map_end > arena_end) munmap(reinterpret_cast<void*>(arena_end), map_end - arena_end);
  void* arena = reinterpret_cast<void*>(base);
  // Transparent huge pages where the system allows them (a no-op where it does not: the pages
  // are then 4 KiB, as before). Decode steps stream every weight and KV block each step, and
  // with 4 KiB pages each page is a TLB miss: huge pages made a batch-32 decode step's F16
  // products 3% faster (bmad-matmul-bench, docs/benchmarks.md).
  (void)madvise(arena, bytes, MADV_HUGEPAGE);
  // Back every page now, so that serving does not wait on the kernel to zero a page: the first
  // use of each KV block used to fault in its pages from inside a decode step (1.2% of a fresh
  // worker's samples in the server benchmark went to zeroing pages). Best effort, as
  // MAP_POPULATE was: a shortage shows at start-up rather than mid-request. The pages land on
  // the NUMA node of the thread that reserves them.
  if (madvise(arena, bytes, MADV_POPULATE_WRITE) != 0 && errno == EINVAL) {
    // Kernels before 5.14 lack MADV_POPULATE_WRITE: touch one byte a page instead.
    for (size_t offset = 0; offset < bytes; offset += page) static_cast<volatile char*>(arena)[offset] = 0;
  }
  SystemAllocations::Record(bytes);
  return std::unique_ptr<Arena>(new Arena(arena, bytes, /*owns_memory=*/true));
}

std::unique_ptr<Arena> Arena::Wrap(void* base, size_t bytes) {
  if (base == nullptr || RangeWrapsAround(base, bytes)) bytes = 0;
  return std::unique_ptr<Arena>(new Arena(base, bytes, /*owns_memory=*/false));
}

Result<Region> Arena::Carve(std::string name, size_t bytes, size_t alignment) {
  if (name.empty()) return InvalidArgument("arena: a region needs a name");
  for (const Region& region : regions_) {
    if (region.name == name) return InvalidArgument("arena: region '" + name + "' exists already");
  }
  if (bytes == 0) return InvalidArgument("arena: region '" + name + "' asks for 0 bytes");
  if (!IsPowerOfTwo(alignment)) {
    return InvalidArgument("arena: region '" + name + "': alignment " +
                           std::to_string(alignment) + " is not a power of two");
  }
  const size_t left = capacity_ - used_;
  const size_t padding = PaddingToAlign(AddressOf(base_) + used_, alignment);
  if (padding > left || bytes > left - padding) {
    return ResourceExhausted("arena: region '" + name + "' asks for " + SizeText(bytes) +
                             " aligned to " + std::to_string(alignment) + " but only " +
                             SizeText(left) + " of " + SizeText(capacity_) + " are left");
  }
  Region region{std::move(name), OffsetAddress(base_, used_ + padding), bytes};
  used_ += padding + bytes;
  regions_.push_back(region);
  return region;
}

std::string Arena::Describe() const {
  char address[32];
  std::snprintf(address, sizeof(address), "0x%" PRIxPTR, AddressOf(base_));
  std::string out = owns_memory_ ? "host arena " : "wrapped arena ";
  out += SizeText(capacity_) + " at " + address + ":";
  if (regions_.empty()) out += " no regions";
  for (size_t i = 0; i < regions_.size(); ++i) {
    const Region& region = regions_[i];
    out += i == 0 ? " " : ", ";
    out += region.name + " " + SizeText(region.bytes) + " at +" +
           std::to_string(AddressOf(region.base) - AddressOf(base_));
  }
  out += "; free " + SizeText(remaining());
  return out;
}

}  // namespace bmad::memory
