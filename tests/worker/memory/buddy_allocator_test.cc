#include "worker/memory/buddy_allocator.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/worker/memory/addresses.h"
#include "tests/worker/memory/heap_allocation_counter.h"
#include "tests/worker/memory/prot_none_mapping.h"
#include "worker/memory/system_allocations.h"

namespace bmad::memory {
namespace {

using testing::Address;
using testing::FakeAddress;
using ::testing::HasSubstr;

constexpr size_t kKiB = 1024;

// Every test manages part of a PROT_NONE mapping: an allocator touching its memory would fault.
class BuddyAllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NE(mapping_.base(), nullptr); }

  BuddyAllocator Make(size_t region_bytes, size_t min_block = 4096) {
    Result<BuddyAllocator> buddy =
        BuddyAllocator::Create(Region{"buffers", mapping_.base(), region_bytes}, min_block);
    EXPECT_TRUE(buddy.ok()) << buddy.status().ToString();
    return std::move(buddy).value();
  }
  void* At(size_t offset) const { return static_cast<char*>(mapping_.base()) + offset; }
  size_t OffsetOf(const void* p) const { return Address(p) - Address(mapping_.base()); }

  testing::ProtNoneMapping mapping_{4 << 20};
};

TEST_F(BuddyAllocatorTest, CreateValidatesItsArguments) {
  for (size_t min_block : {size_t{0}, size_t{3}, size_t{4095}}) {
    Result<BuddyAllocator> buddy =
        BuddyAllocator::Create(Region{"b", mapping_.base(), 64 * kKiB}, min_block);
    EXPECT_EQ(buddy.status().code(), StatusCode::kInvalidArgument) << min_block;
    EXPECT_THAT(buddy.status().message(), HasSubstr("power of two"));
  }
  EXPECT_EQ(BuddyAllocator::Create(Region{"b", nullptr, 64 * kKiB}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(BuddyAllocator::Create(Region{"b", mapping_.base(), 4095}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(BuddyAllocator::Create(Region{"b", FakeAddress(UINTPTR_MAX - 4095), 8192})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  // 2^32 one-byte blocks do not fit the 32-bit block indices; checked before any metadata.
  Result<BuddyAllocator> too_many =
      BuddyAllocator::Create(Region{"b", FakeAddress(0x100000), size_t{1} << 32}, 1);
  EXPECT_EQ(too_many.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(too_many.status().message(), HasSubstr("raise min_block"));
}

TEST_F(BuddyAllocatorTest, SplitsTheSmallestFittingBlock) {
  BuddyAllocator buddy = Make(64 * kKiB);
  EXPECT_EQ(buddy.max_block(), 64 * kKiB);
  EXPECT_EQ(buddy.stats().largest_free_block, 64 * kKiB);

  // One 4 KiB block splits 64 into 4 (taken) + 4 + 8 + 16 + 32.
  Result<void*> a = buddy.Allocate(1);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, At(0));
  EXPECT_EQ(buddy.AllocationBytes(*a), 4 * kKiB);
  BuddyAllocator::Stats stats = buddy.stats();
  EXPECT_EQ(stats.used_bytes, 4 * kKiB);
  EXPECT_EQ(stats.free_bytes, 60 * kKiB);
  EXPECT_EQ(stats.largest_free_block, 32 * kKiB);
  EXPECT_EQ(stats.allocations, 1u);

  Result<void*> b = buddy.Allocate(8 * kKiB);  // exactly a power of two
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, At(8 * kKiB));
  Result<void*> c = buddy.Allocate(4 * kKiB - 1);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, At(4 * kKiB));
  Result<void*> d = buddy.Allocate(17 * kKiB);  // rounds up to 32 KiB
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, At(32 * kKiB));
  EXPECT_EQ(buddy.AllocationBytes(*d), 32 * kKiB);

  // Only 16 KiB is left, in one block.
  Result<void*> e = buddy.Allocate(16 * kKiB + 1);
  ASSERT_EQ(e.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(e.status().message(), HasSubstr("buffers"));
  EXPECT_THAT(e.status().message(), HasSubstr("largest free block 16.00 KiB"));
  EXPECT_EQ(buddy.stats().allocations, 4u);  // a failed request changes nothing
}

TEST_F(BuddyAllocatorTest, CoversARegionThatIsNotAPowerOfTwoWithSeveralTopBlocks) {
  BuddyAllocator buddy = Make(12 * kKiB + 100);  // 8 KiB + 4 KiB; the last 100 bytes unused
  EXPECT_EQ(buddy.capacity(), 12 * kKiB);
  EXPECT_EQ(buddy.max_block(), 8 * kKiB);
  EXPECT_EQ(buddy.stats().free_bytes, 12 * kKiB);
  EXPECT_EQ(buddy.stats().largest_free_block, 8 * kKiB);

  Result<void*> eight = buddy.Allocate(8 * kKiB);
  Result<void*> four = buddy.Allocate(4 * kKiB);
  ASSERT_TRUE(eight.ok() && four.ok());
  EXPECT_EQ(*eight, At(0));
  EXPECT_EQ(*four, At(8 * kKiB));
  EXPECT_EQ(buddy.Allocate(1).status().code(), StatusCode::kResourceExhausted);
  // The two top-level blocks are not buddies: freed, they stay two blocks.
  ASSERT_TRUE(buddy.Free(*four).ok());
  ASSERT_TRUE(buddy.Free(*eight).ok());
  EXPECT_EQ(buddy.stats().largest_free_block, 8 * kKiB);
  EXPECT_EQ(buddy.stats().free_bytes, 12 * kKiB);
  EXPECT_EQ(buddy.Allocate(12 * kKiB).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(BuddyAllocatorTest, FreeingEverySmallBlockInAnyOrderCoalescesTheWholeRegion) {
  BuddyAllocator buddy = Make(256 * kKiB);
  std::mt19937 rng(20260611);
  for (int round = 0; round < 20; ++round) {
    std::vector<void*> blocks;
    for (size_t i = 0; i < 64; ++i) {
      Result<void*> p = buddy.Allocate(4 * kKiB);
      ASSERT_TRUE(p.ok()) << i;
      blocks.push_back(*p);
    }
    EXPECT_EQ(buddy.stats().free_bytes, 0u);
    EXPECT_EQ(buddy.stats().largest_free_block, 0u);
    EXPECT_EQ(buddy.Allocate(1).status().code(), StatusCode::kResourceExhausted);
    std::sort(blocks.begin(), blocks.end());
    for (size_t i = 0; i < blocks.size(); ++i) EXPECT_EQ(blocks[i], At(i * 4 * kKiB));

    std::shuffle(blocks.begin(), blocks.end(), rng);
    for (void* p : blocks) ASSERT_TRUE(buddy.Free(p).ok());
    const BuddyAllocator::Stats stats = buddy.stats();
    EXPECT_EQ(stats.used_bytes, 0u);
    EXPECT_EQ(stats.allocations, 0u);
    EXPECT_EQ(stats.free_bytes, 256 * kKiB);
    EXPECT_EQ(stats.largest_free_block, 256 * kKiB) << "round " << round;
  }
}

TEST_F(BuddyAllocatorTest, ReusesTheExactAddressOfAFreedBlock) {
  BuddyAllocator buddy = Make(1 << 20);
  Result<void*> a = buddy.Allocate(5000);  // an 8 KiB block
  Result<void*> b = buddy.Allocate(100);
  Result<void*> c = buddy.Allocate(20000);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  ASSERT_TRUE(buddy.Free(*a).ok());
  Result<void*> again = buddy.Allocate(6000);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *a);

  // The same sequence of requests on the same state gives the same addresses.
  ASSERT_TRUE(buddy.Free(*again).ok());
  ASSERT_TRUE(buddy.Free(*b).ok());
  ASSERT_TRUE(buddy.Free(*c).ok());
  EXPECT_EQ(*buddy.Allocate(5000), *a);
  EXPECT_EQ(*buddy.Allocate(100), *b);
  EXPECT_EQ(*buddy.Allocate(20000), *c);
}

TEST_F(BuddyAllocatorTest, RejectsZeroAndAbsurdSizes) {
  BuddyAllocator buddy = Make(64 * kKiB);
  EXPECT_EQ(buddy.Allocate(0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(buddy.Allocate(64 * kKiB + 1).status().code(), StatusCode::kInvalidArgument);
  Result<void*> huge = buddy.Allocate(std::numeric_limits<size_t>::max());
  EXPECT_EQ(huge.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(huge.status().message(), HasSubstr("largest block"));
  EXPECT_TRUE(buddy.Allocate(64 * kKiB).ok());
  EXPECT_EQ(buddy.Allocate(64 * kKiB).status().code(), StatusCode::kResourceExhausted);
}

TEST_F(BuddyAllocatorTest, DoubleFreesAndForeignPointersAreErrorsThatChangeNothing) {
  BuddyAllocator buddy = Make(64 * kKiB);
  Result<void*> a = buddy.Allocate(8 * kKiB);
  Result<void*> b = buddy.Allocate(4 * kKiB);  // a's buddy stays split, so a stays a block
  Result<void*> c = buddy.Allocate(4 * kKiB);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  const BuddyAllocator::Stats before = buddy.stats();

  auto expect_rejected = [&](void* p, const char* why) {
    Status status = buddy.Free(p);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << why;
    EXPECT_THAT(status.message(), HasSubstr(why));
  };
  expect_rejected(nullptr, "never handed out");
  expect_rejected(At(64 * kKiB), "outside the region");  // one past the end
  expect_rejected(FakeAddress(0x1000), "outside the region");
  expect_rejected(At(1), "not the start of a live allocation");
  expect_rejected(At(4 * kKiB), "not the start of a live allocation");  // inside a
  expect_rejected(At(32 * kKiB), "the block is free");  // a free block never handed out
  EXPECT_EQ(buddy.stats().used_bytes, before.used_bytes);
  EXPECT_EQ(buddy.stats().allocations, before.allocations);

  // A pointer from another allocator.
  testing::ProtNoneMapping other_mapping(64 * kKiB);
  Result<BuddyAllocator> other =
      BuddyAllocator::Create(Region{"other", other_mapping.base(), 64 * kKiB});
  ASSERT_TRUE(other.ok());
  Result<void*> foreign = other->Allocate(4096);
  ASSERT_TRUE(foreign.ok());
  expect_rejected(*foreign, "outside the region");

  // Double free while the block is still a block of its own, then after it merged.
  ASSERT_TRUE(buddy.Free(*a).ok());
  expect_rejected(*a, "double free");
  ASSERT_TRUE(buddy.Free(*c).ok());  // merges with nothing: b is live
  ASSERT_TRUE(buddy.Free(*b).ok());  // b + c merge, then with a, then up to 64 KiB
  EXPECT_EQ(buddy.stats().largest_free_block, 64 * kKiB);
  expect_rejected(*c, "freed already");
  expect_rejected(*a, "double free");  // a's address now starts the merged free block
  EXPECT_EQ(buddy.stats().allocations, 0u);
  EXPECT_EQ(buddy.AllocationBytes(*a), 0u);
}

TEST_F(BuddyAllocatorTest, AllocateAndFreeMakeNoSystemAllocations) {
  const uint64_t before_create = SystemAllocations::Count();
  BuddyAllocator buddy = Make(1 << 20, 256);
  EXPECT_EQ(SystemAllocations::Count(), before_create + 1);  // the metadata arrays, once
  const uint64_t count = SystemAllocations::Count();
  std::vector<void*> live;
  for (int i = 0; i < 1000; ++i) {
    Result<void*> p = buddy.Allocate(static_cast<size_t>(i % 7 + 1) * 300);
    if (p.ok()) live.push_back(*p);
    if (i % 3 == 0 && !live.empty()) {
      ASSERT_TRUE(buddy.Free(live.back()).ok());
      live.pop_back();
    }
  }
  EXPECT_EQ(SystemAllocations::Count(), count);
}

// Nor any heap allocation, counted or not: Free built its error text before every check (two
// std::string allocations per call, on kernel scratch's regrowth path).
TEST_F(BuddyAllocatorTest, AllocateAndAGoodFreeTouchNoHeap) {
  BuddyAllocator buddy = Make(1 << 20, 256);
  const uint64_t before = bmad::testing::HeapAllocationsOnThisThread();
  for (int i = 0; i < 100; ++i) {
    Result<void*> p = buddy.Allocate(static_cast<size_t>(i % 7 + 1) * 300);
    ASSERT_TRUE(p.ok());
    ASSERT_TRUE(buddy.Free(*p).ok());
  }
  EXPECT_EQ(bmad::testing::HeapAllocationsOnThisThread(), before);
  // The counter counts: a refused free builds its message.
  EXPECT_FALSE(buddy.Free(nullptr).ok());
  EXPECT_GT(bmad::testing::HeapAllocationsOnThisThread(), before);
}

// Thousands of random allocations and frees (fixed seed): live blocks never overlap, each lies
// in the region aligned to its size, and the statistics always agree with the live set.
TEST_F(BuddyAllocatorTest, RandomizedAllocateFreeKeepsBlocksDisjointAndStatsConsistent) {
  const size_t region_bytes = 1792 * kKiB + 100;  // top blocks of 1 MiB, 512 KiB, 256 KiB
  BuddyAllocator buddy = Make(region_bytes, 256);
  ASSERT_EQ(buddy.capacity(), 1792 * kKiB);
  std::mt19937_64 rng(0xb3ad);
  std::map<uintptr_t, size_t> live;  // address -> block bytes
  size_t live_bytes = 0;
  int exhausted = 0;

  for (int op = 0; op < 20000; ++op) {
    const bool allocate = live.empty() || rng() % 100 < 55;
    if (allocate) {
      // Log-uniform sizes from 1 byte to 256 KiB.
      const int size_bits = static_cast<int>(rng() % 19);
      const size_t bytes = 1 + rng() % (size_t{1} << size_bits);
      const size_t block = std::bit_ceil(std::max<size_t>(bytes, 256));
      Result<void*> p = buddy.Allocate(bytes);
      if (!p.ok()) {
        ASSERT_EQ(p.status().code(), StatusCode::kResourceExhausted);
        ASSERT_LT(buddy.stats().largest_free_block, block);
        ++exhausted;
        continue;
      }
      const uintptr_t address = Address(*p);
      ASSERT_EQ(buddy.AllocationBytes(*p), block);
      ASSERT_GE(address, Address(mapping_.base()));
      ASSERT_LE(OffsetOf(*p) + block, buddy.capacity());
      ASSERT_EQ(OffsetOf(*p) % block, 0u);
      auto next = live.lower_bound(address);
      if (next != live.end()) {
        ASSERT_GE(next->first, address + block) << "overlaps the next";
      }
      if (next != live.begin()) {
        auto previous = std::prev(next);
        ASSERT_LE(previous->first + previous->second, address) << "overlaps the previous";
      }
      live.emplace(address, block);
      live_bytes += block;
    } else {
      auto victim = live.begin();
      std::advance(victim, static_cast<long>(rng() % live.size()));
      ASSERT_TRUE(buddy.Free(FakeAddress(victim->first)).ok());
      live_bytes -= victim->second;
      live.erase(victim);
    }
    const BuddyAllocator::Stats stats = buddy.stats();
    ASSERT_EQ(stats.used_bytes, live_bytes);
    ASSERT_EQ(stats.free_bytes, buddy.capacity() - live_bytes);
    ASSERT_EQ(stats.allocations, live.size());
    ASSERT_LE(stats.largest_free_block, stats.free_bytes);
  }
  EXPECT_GT(exhausted, 0);  // the test reached a full region too

  std::vector<uintptr_t> addresses;
  for (const auto& [address, bytes] : live) addresses.push_back(address);
  std::shuffle(addresses.begin(), addresses.end(), rng);
  for (uintptr_t address : addresses) ASSERT_TRUE(buddy.Free(FakeAddress(address)).ok());
  EXPECT_EQ(buddy.stats().free_bytes, buddy.capacity());
  EXPECT_EQ(buddy.stats().largest_free_block, 1024 * kKiB);
  // Everything merged back into the three top-level blocks.
  EXPECT_EQ(*buddy.Allocate(1024 * kKiB), At(0));
  EXPECT_EQ(*buddy.Allocate(512 * kKiB), At(1024 * kKiB));
  EXPECT_EQ(*buddy.Allocate(256 * kKiB), At(1536 * kKiB));
  EXPECT_EQ(buddy.Allocate(1).status().code(), StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace bmad::memory
