#include "worker/memory/arena.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/worker/memory/addresses.h"
#include "worker/memory/system_allocations.h"

namespace bmad::memory {
namespace {

using testing::Address;
using testing::FakeAddress;
using ::testing::HasSubstr;

TEST(ArenaTest, ReserveHostMapsUsableMemoryAndRecordsOneSystemAllocation) {
  const uint64_t count = SystemAllocations::Count();
  const uint64_t bytes = SystemAllocations::Bytes();
  Result<std::unique_ptr<Arena>> arena = Arena::ReserveHost(1 << 20);
  ASSERT_TRUE(arena.ok()) << arena.status().ToString();
  EXPECT_EQ(SystemAllocations::Count(), count + 1);
  EXPECT_EQ(SystemAllocations::Bytes(), bytes + (1 << 20));
  EXPECT_TRUE((*arena)->owns_memory());
  EXPECT_EQ((*arena)->capacity(), size_t{1} << 20);

  Result<Region> region = (*arena)->Carve("weights", 1 << 20, 4096);
  ASSERT_TRUE(region.ok()) << region.status().ToString();
  // Host memory is real: the test (not the arena) may write and read it.
  std::memset(region->base, 0xab, region->bytes);
  EXPECT_EQ(static_cast<unsigned char*>(region->base)[region->bytes - 1], 0xab);
}

TEST(ArenaTest, ReserveHostBacksEveryPageAtOnce) {
  constexpr size_t kBytes = 8 << 20;
  Result<std::unique_ptr<Arena>> arena = Arena::ReserveHost(kBytes);
  ASSERT_TRUE(arena.ok()) << arena.status().ToString();
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident((kBytes + page - 1) / page);
  ASSERT_EQ(mincore((*arena)->base(), kBytes, resident.data()), 0) << std::strerror(errno);
  size_t backed = 0;
  for (unsigned char r : resident) backed += r & 1;
  EXPECT_EQ(backed, resident.size()) << "pages not yet backed after ReserveHost";
}

// The /proc/self/smaps entry of the mapping that starts at `base`: its field `name`, or -1.
long SmapsField(const void* base, const std::string& name) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in_mapping = false;
  while (std::getline(smaps, line)) {
    uintptr_t start = 0, end = 0;
    if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR " ", &start, &end) == 2 &&
        line.find(':') > line.find(' ')) {
      in_mapping = start == Address(base);
      continue;
    }
    if (in_mapping && line.rfind(name + ":", 0) == 0) return std::stol(line.substr(name.size() + 1));
  }
  return -1;
}

TEST(ArenaTest, ReserveHostStartsOnAHugePageBoundaryAndAsksForHugePages) {
  for (size_t bytes : {size_t{3} << 20, (size_t{8} << 20) + 12345}) {
    Result<std::unique_ptr<Arena>> arena = Arena::ReserveHost(bytes);
    ASSERT_TRUE(arena.ok()) << arena.status().ToString();
    EXPECT_EQ(Address((*arena)->base()) % (size_t{2} << 20), 0u) << bytes;
    // The slack mapped to find that boundary is given back: the page after the arena's last
    // one is not mapped (mincore fails with ENOMEM there).
    const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t after = (Address((*arena)->base()) + bytes + page - 1) / page * page;
    unsigned char resident = 0;
    EXPECT_EQ(mincore(reinterpret_cast<void*>(after), page, &resident), -1) << bytes;
    EXPECT_EQ(errno, ENOMEM) << bytes;
    std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string mode((std::istreambuf_iterator<char>(thp)), std::istreambuf_iterator<char>());
    if (mode.empty() || mode.find("[never]") != std::string::npos) {
      GTEST_SKIP() << "transparent huge pages are off on this system: '" << mode << "'";
    }
    EXPECT_EQ(SmapsField((*arena)->base(), "THPeligible"), 1) << "bytes " << bytes << ", THP " << mode;
  }
}

TEST(ArenaTest, ReserveHostOfZeroBytesIsInvalid) {
  Result<std::unique_ptr<Arena>> arena = Arena::ReserveHost(0);
  EXPECT_EQ(arena.status().code(), StatusCode::kInvalidArgument);
}

TEST(ArenaTest, ImpossibleReservationIsResourceExhaustedWithSizeAndErrno) {
  const uint64_t count = SystemAllocations::Count();
  // 2^60 bytes is far beyond any user address space.
  for (size_t bytes : {size_t{1} << 60, std::numeric_limits<size_t>::max()}) {
    Result<std::unique_ptr<Arena>> arena = Arena::ReserveHost(bytes);
    ASSERT_EQ(arena.status().code(), StatusCode::kResourceExhausted);
    EXPECT_THAT(arena.status().message(), HasSubstr(std::to_string(bytes)));
    EXPECT_THAT(arena.status().message(), HasSubstr(std::strerror(ENOMEM)));
  }
  EXPECT_EQ(SystemAllocations::Count(), count);
}

TEST(ArenaTest, CarvesConsecutiveAlignedRegions) {
  const uintptr_t base = 0x100000 + 3;  // deliberately unaligned
  std::unique_ptr<Arena> arena = Arena::Wrap(FakeAddress(base), 10000);
  EXPECT_FALSE(arena->owns_memory());

  Result<Region> a = arena->Carve("a", 100);  // default alignment 256
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->name, "a");
  EXPECT_EQ(a->bytes, 100u);
  EXPECT_EQ(Address(a->base), 0x100100u);  // base rounded up to 256

  Result<Region> b = arena->Carve("b", 10, 1);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(Address(b->base), 0x100100u + 100);  // right after a

  Result<Region> c = arena->Carve("c", 64, 4096);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(Address(c->base), 0x101000u);
  EXPECT_EQ(arena->used(), 0x101000u + 64 - base);
  EXPECT_EQ(arena->remaining(), 10000 - arena->used());
  ASSERT_EQ(arena->regions().size(), 3u);
  EXPECT_EQ(arena->regions()[1].name, "b");
}

TEST(ArenaTest, RejectsBadCarveArguments) {
  std::unique_ptr<Arena> arena = Arena::Wrap(FakeAddress(0x100000), 4096);
  EXPECT_EQ(arena->Carve("zero", 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(arena->Carve("", 64).status().code(), StatusCode::kInvalidArgument);
  for (size_t alignment : {size_t{0}, size_t{3}, size_t{48}}) {
    Result<Region> region = arena->Carve("odd", 64, alignment);
    EXPECT_EQ(region.status().code(), StatusCode::kInvalidArgument) << alignment;
    EXPECT_THAT(region.status().message(), HasSubstr("power of two"));
  }
  ASSERT_TRUE(arena->Carve("kv", 64).ok());
  EXPECT_EQ(arena->Carve("kv", 64).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(arena->regions().size(), 1u);
}

TEST(ArenaTest, ExhaustionNamesTheRegionWhatItAskedAndWhatIsLeft) {
  std::unique_ptr<Arena> arena = Arena::Wrap(FakeAddress(0x100000), 4096);
  ASSERT_TRUE(arena->Carve("weights", 3000).ok());
  Result<Region> kv = arena->Carve("kv_blocks", 2000);
  ASSERT_EQ(kv.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(kv.status().message(), HasSubstr("kv_blocks"));
  EXPECT_THAT(kv.status().message(), HasSubstr("2000"));
  EXPECT_THAT(kv.status().message(), HasSubstr("1096 B"));  // left
  EXPECT_THAT(kv.status().message(), HasSubstr("4096"));    // of the arena's capacity

  // A failed carve consumes nothing: the rest still fits exactly (3072 is 256-aligned).
  EXPECT_EQ(arena->remaining(), 1096u);
  EXPECT_EQ(arena->Carve("too_big_after_padding", 1096).status().code(),
            StatusCode::kResourceExhausted);
  Result<Region> rest = arena->Carve("rest", 1024);
  ASSERT_TRUE(rest.ok()) << rest.status().ToString();
  EXPECT_EQ(Address(rest->base), 0x100000u + 3072);
  EXPECT_EQ(arena->remaining(), 0u);
  EXPECT_EQ(arena->Carve("one_more", 1, 1).status().code(), StatusCode::kResourceExhausted);
}

TEST(ArenaTest, HugeRequestsDoNotOverflowTheArithmetic) {
  std::unique_ptr<Arena> arena = Arena::Wrap(FakeAddress(0x100000 + 1), 4096);
  EXPECT_EQ(arena->Carve("huge", std::numeric_limits<size_t>::max()).status().code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(arena->Carve("huge_alignment", 1, size_t{1} << 63).status().code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(arena->used(), 0u);
}

TEST(ArenaTest, WrapOfAnInvalidRangeIsAnEmptyArena) {
  std::unique_ptr<Arena> null_base = Arena::Wrap(nullptr, 4096);
  EXPECT_EQ(null_base->capacity(), 0u);
  EXPECT_EQ(null_base->Carve("x", 1).status().code(), StatusCode::kResourceExhausted);

  std::unique_ptr<Arena> wraps = Arena::Wrap(FakeAddress(UINTPTR_MAX - 100), 4096);
  EXPECT_EQ(wraps->capacity(), 0u);
  EXPECT_EQ(wraps->Carve("x", 1, 1).status().code(), StatusCode::kResourceExhausted);
}

TEST(ArenaTest, DescribeListsEveryRegionWithSizeAndOffset) {
  std::unique_ptr<Arena> arena = Arena::Wrap(FakeAddress(0x100000), size_t{3} << 20);
  EXPECT_THAT(arena->Describe(), HasSubstr("no regions"));
  ASSERT_TRUE(arena->Carve("weights", size_t{2} << 20).ok());
  ASSERT_TRUE(arena->Carve("kv_blocks", 1 << 19).ok());
  const std::string text = arena->Describe();
  EXPECT_THAT(text, HasSubstr("wrapped arena 3.00 MiB (3145728 B) at 0x100000"));
  EXPECT_THAT(text, HasSubstr("weights 2.00 MiB (2097152 B) at +0"));
  EXPECT_THAT(text, HasSubstr("kv_blocks 512.00 KiB (524288 B) at +2097152"));
  EXPECT_THAT(text, HasSubstr("free 512.00 KiB (524288 B)"));
  EXPECT_EQ(text.find('\n'), std::string::npos);  // one log line
}

TEST(ArenaTest, HumanBytesPicksTheLargestFittingUnit) {
  EXPECT_EQ(HumanBytes(0), "0 B");
  EXPECT_EQ(HumanBytes(1023), "1023 B");
  EXPECT_EQ(HumanBytes(1536), "1.50 KiB");
  EXPECT_EQ(HumanBytes(size_t{5} << 30), "5.00 GiB");
}

}  // namespace
}  // namespace bmad::memory
