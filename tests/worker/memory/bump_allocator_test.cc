#include "worker/memory/bump_allocator.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/log.h"
#include "tests/worker/memory/addresses.h"
#include "tests/worker/memory/prot_none_mapping.h"
#include "worker/memory/system_allocations.h"

namespace bmad::memory {
namespace {

using testing::Address;
using ::testing::HasSubstr;

bool InRegion(const Region& region, const void* p, size_t bytes) {
  return Address(p) >= Address(region.base) &&
         Address(p) + bytes <= Address(region.base) + region.bytes;
}

// A region nobody may touch: any access by the allocator would fault.
class BumpAllocatorTest : public ::testing::Test {
 protected:
  testing::ProtNoneMapping mapping_{1 << 16};
  Region Workspace(size_t bytes) { return Region{"workspace", mapping_.base(), bytes}; }
};

// An overflow allocator that serves chunks from host buffers and remembers every call.
struct RecordingOverflow {
  std::vector<std::vector<unsigned char>> buffers;
  std::vector<size_t> allocated_sizes;
  std::vector<size_t> freed_sizes;
  bool fail = false;

  OverflowAllocator Allocator() {
    return OverflowAllocator{
        [this](size_t bytes) -> void* {
          if (fail) return nullptr;
          allocated_sizes.push_back(bytes);
          buffers.emplace_back(bytes);
          return buffers.back().data();
        },
        [this](void*, size_t bytes) { freed_sizes.push_back(bytes); }};
  }
};

TEST_F(BumpAllocatorTest, AllocatesConsecutivelyAndResetsToTheStart) {
  ASSERT_NE(mapping_.base(), nullptr);
  BumpAllocator bump(Workspace(4096));
  EXPECT_EQ(bump.capacity(), 4096u);
  void* a = bump.Allocate(100);
  void* b = bump.Allocate(100);
  EXPECT_EQ(a, mapping_.base());
  EXPECT_EQ(Address(b), Address(a) + 128);  // 100 rounded up to the default 64 alignment
  EXPECT_EQ(bump.used(), 228u);
  EXPECT_EQ(bump.high_water(), 228u);

  bump.Reset();
  EXPECT_EQ(bump.used(), 0u);
  EXPECT_EQ(bump.high_water(), 228u);  // the high water survives resets
  EXPECT_EQ(bump.Allocate(10), a);     // the same addresses every step
  EXPECT_EQ(bump.used(), 10u);
  EXPECT_EQ(bump.high_water(), 228u);
  EXPECT_EQ(bump.overflow_count(), 0u);
}

TEST_F(BumpAllocatorTest, HonoursAlignmentOfTheAbsoluteAddress) {
  // A region starting 8 bytes past a page boundary.
  BumpAllocator bump(Region{"workspace", static_cast<char*>(mapping_.base()) + 8, 8192});
  void* p1 = bump.Allocate(1, 1);
  EXPECT_EQ(Address(p1), Address(mapping_.base()) + 8);
  void* p64 = bump.Allocate(1);
  EXPECT_EQ(Address(p64) % 64, 0u);
  void* p4096 = bump.Allocate(1, 4096);
  EXPECT_EQ(Address(p4096) % 4096, 0u);
  void* p48 = bump.Allocate(1, 48);  // not a power of two: rounded up to 64
  EXPECT_EQ(Address(p48) % 64, 0u);
  void* p0 = bump.Allocate(1, 0);  // 0 means no alignment
  EXPECT_EQ(Address(p0), Address(p48) + 1);
  EXPECT_EQ(bump.overflow_count(), 0u);
}

TEST_F(BumpAllocatorTest, ZeroByteRequestsGetDistinctAddresses) {
  BumpAllocator bump(Workspace(4096));
  void* a = bump.Allocate(0, 1);
  void* b = bump.Allocate(0, 1);
  EXPECT_NE(a, b);
  EXPECT_EQ(bump.used(), 2u);
}

TEST_F(BumpAllocatorTest, FillsTheRegionExactlyBeforeOverflowing) {
  RecordingOverflow overflow;
  BumpAllocator bump(Workspace(1024), overflow.Allocator());
  for (int i = 0; i < 16; ++i) {
    void* p = bump.Allocate(64);
    EXPECT_TRUE(InRegion(bump.region(), p, 64)) << i;
  }
  EXPECT_EQ(bump.used(), 1024u);
  EXPECT_TRUE(overflow.allocated_sizes.empty());
  void* spill = bump.Allocate(1);
  EXPECT_FALSE(InRegion(bump.region(), spill, 1));
  EXPECT_EQ(overflow.allocated_sizes.size(), 1u);
}

TEST_F(BumpAllocatorTest, OverflowUsesRealMemoryCountedAndFreedOnReset) {
  const uint64_t count = SystemAllocations::Count();
  const uint64_t bytes = SystemAllocations::Bytes();
  BumpAllocator bump(Workspace(1024));  // default fallback: malloc

  void* in_region = bump.Allocate(1000);
  EXPECT_TRUE(InRegion(bump.region(), in_region, 1000));
  // Does not fit: served from a malloc'd chunk, which the test may write (ASan checks bounds).
  void* spill = bump.Allocate(2000, 128);
  ASSERT_NE(spill, nullptr);
  EXPECT_FALSE(InRegion(bump.region(), spill, 2000));
  EXPECT_EQ(Address(spill) % 128, 0u);
  std::memset(spill, 0x5a, 2000);
  // Still fits the region after all: the region is preferred over the chunk.
  void* small = bump.Allocate(16, 8);
  EXPECT_TRUE(InRegion(bump.region(), small, 16));
  // Fits the chunk: no new system allocation.
  void* spill2 = bump.Allocate(3000);
  std::memset(spill2, 0xa5, 3000);
  EXPECT_EQ(bump.overflow_count(), 1u);
  EXPECT_EQ(SystemAllocations::Count(), count + 1);
  EXPECT_EQ(SystemAllocations::Bytes(), bytes + BumpAllocator::kMinOverflowChunkBytes);
  EXPECT_EQ(bump.used(), 1000 + 16 + 2000 + 3000u);  // 1000 is 8-aligned: no padding
  EXPECT_GT(bump.high_water(), bump.capacity());  // says how much the region lacks

  // Reset frees the chunk (a leak would fail the sanitizer build); the next step's overflow
  // allocates and counts again.
  bump.Reset();
  EXPECT_EQ(bump.used(), 0u);
  void* again = bump.Allocate(4000);
  std::memset(again, 1, 4000);
  EXPECT_EQ(bump.overflow_count(), 2u);
  EXPECT_EQ(SystemAllocations::Count(), count + 2);
  // The allocator's destructor frees this last chunk.
}

TEST_F(BumpAllocatorTest, LargeOverflowGetsItsOwnChunkAndOnlyTheFirstIsLogged) {
  std::vector<std::string> lines;
  log::SetSink([&lines](std::string_view line) { lines.emplace_back(line); });
  const log::Level level = log::GetLevel();
  log::SetLevel(log::Level::kInfo);

  RecordingOverflow overflow;
  {
    BumpAllocator bump(Workspace(256), overflow.Allocator());
    const size_t big = BumpAllocator::kMinOverflowChunkBytes + 1;
    ASSERT_NE(bump.Allocate(big, 64), nullptr);
    ASSERT_NE(bump.Allocate(big, 64), nullptr);  // does not fit the first chunk's rest
    bump.Reset();
    ASSERT_NE(bump.Allocate(300), nullptr);
    EXPECT_EQ(bump.overflow_count(), 3u);
    // Each chunk holds its request plus room to align it.
    ASSERT_EQ(overflow.allocated_sizes.size(), 3u);
    EXPECT_EQ(overflow.allocated_sizes[0], big + 63);
    EXPECT_EQ(overflow.allocated_sizes[2], BumpAllocator::kMinOverflowChunkBytes);
    EXPECT_EQ(overflow.freed_sizes, (std::vector<size_t>{big + 63, big + 63}));
  }
  // The destructor freed the last chunk: every allocation was freed with its size.
  EXPECT_EQ(overflow.freed_sizes, overflow.allocated_sizes);

  log::SetSink(nullptr);
  log::SetLevel(level);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("WARN"));
  EXPECT_THAT(lines[0], HasSubstr("region=workspace"));
  EXPECT_THAT(lines[0], HasSubstr("capacity_bytes=256"));
}

TEST_F(BumpAllocatorTest, FailedFallbackReturnsNullAndChangesNothing) {
  const uint64_t count = SystemAllocations::Count();
  RecordingOverflow overflow;
  overflow.fail = true;
  BumpAllocator bump(Workspace(128), overflow.Allocator());
  ASSERT_NE(bump.Allocate(100), nullptr);
  EXPECT_EQ(bump.Allocate(100), nullptr);
  EXPECT_EQ(bump.used(), 100u);
  EXPECT_EQ(bump.overflow_count(), 0u);
  EXPECT_EQ(SystemAllocations::Count(), count);
}

TEST_F(BumpAllocatorTest, AbsurdRequestsReturnNullWithoutCrashing) {
  const uint64_t count = SystemAllocations::Count();
  BumpAllocator bump(Workspace(4096));
  constexpr size_t kMax = std::numeric_limits<size_t>::max();
  EXPECT_EQ(bump.Allocate(kMax), nullptr);
  EXPECT_EQ(bump.Allocate(kMax - 10, 1), nullptr);
  EXPECT_EQ(bump.Allocate(kMax / 2 + 2, 1), nullptr);  // past what malloc may be asked
  EXPECT_EQ(bump.Allocate(1, kMax), nullptr);          // no such power of two
  EXPECT_EQ(bump.Allocate(1, size_t{1} << 63), nullptr);  // a chunk would need 2^63 bytes
  EXPECT_EQ(bump.used(), 0u);
  EXPECT_EQ(bump.overflow_count(), 0u);
  EXPECT_EQ(SystemAllocations::Count(), count);
}

TEST_F(BumpAllocatorTest, EmptyOrInvalidRegionOverflowsEverything) {
  RecordingOverflow overflow;
  BumpAllocator no_memory(Region{"none", nullptr, 4096}, overflow.Allocator());
  EXPECT_EQ(no_memory.capacity(), 0u);
  EXPECT_NE(no_memory.Allocate(8), nullptr);
  EXPECT_EQ(no_memory.overflow_count(), 1u);

  BumpAllocator wraps(Region{"wraps", reinterpret_cast<void*>(UINTPTR_MAX - 10), 4096},
                      overflow.Allocator());
  EXPECT_EQ(wraps.capacity(), 0u);
  EXPECT_NE(wraps.Allocate(8), nullptr);
}

TEST_F(BumpAllocatorTest, EmptyFallbackFunctionsMeanMalloc) {
  BumpAllocator bump(Workspace(64), OverflowAllocator{});
  void* p = bump.Allocate(1000);
  ASSERT_NE(p, nullptr);
  std::memset(p, 0, 1000);
}

}  // namespace
}  // namespace bmad::memory
