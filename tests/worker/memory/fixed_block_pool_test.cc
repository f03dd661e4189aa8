#include "worker/memory/fixed_block_pool.h"

#include <cstdint>
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/worker/memory/addresses.h"
#include "tests/worker/memory/prot_none_mapping.h"

namespace bmad::memory {
namespace {

using testing::Address;
using testing::FakeAddress;
using ::testing::HasSubstr;

TEST(FixedBlockPoolTest, AddressesBlocksByIdOverAnUntouchableRegion) {
  testing::ProtNoneMapping mapping(1 << 20);
  ASSERT_NE(mapping.base(), nullptr);
  // 10 blocks of 1536 bytes and 100 bytes left over.
  Result<FixedBlockPool> pool =
      FixedBlockPool::Create(Region{"kv_blocks", mapping.base(), 10 * 1536 + 100}, 1536);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  EXPECT_EQ(pool->num_blocks(), 10);
  EXPECT_EQ(pool->block_bytes(), 1536u);
  EXPECT_EQ(pool->base(), mapping.base());
  EXPECT_EQ(pool->region().name, "kv_blocks");
  for (int32_t id = 0; id < pool->num_blocks(); ++id) {
    EXPECT_EQ(Address(pool->BlockAddress(id)), Address(mapping.base()) + id * 1536u);
    EXPECT_EQ(Address(pool->BlockAddress(id)) % 64, 0u);
  }
}

TEST(FixedBlockPoolTest, RejectsInvalidBlockSizes) {
  const Region region{"kv", FakeAddress(0x100000), 1 << 20};
  for (size_t block_bytes : {size_t{0}, size_t{1}, size_t{63}, size_t{100}}) {
    Result<FixedBlockPool> pool = FixedBlockPool::Create(region, block_bytes);
    EXPECT_EQ(pool.status().code(), StatusCode::kInvalidArgument) << block_bytes;
    EXPECT_THAT(pool.status().message(), HasSubstr("multiple of 64"));
  }
  EXPECT_TRUE(FixedBlockPool::Create(region, 64).ok());
}

TEST(FixedBlockPoolTest, RejectsRegionsThatCannotHoldABlock) {
  Result<FixedBlockPool> small =
      FixedBlockPool::Create(Region{"kv", FakeAddress(0x100000), 127}, 128);
  EXPECT_EQ(small.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(small.status().message(), HasSubstr("kv"));
  EXPECT_EQ(FixedBlockPool::Create(Region{"kv", FakeAddress(0x100000), 0}, 64).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(FixedBlockPool::Create(Region{"kv", nullptr, 4096}, 64).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(FixedBlockPool::Create(Region{"kv", FakeAddress(0x100000 + 32), 4096}, 64)
                .status()
                .code(),
            StatusCode::kInvalidArgument);  // unaligned base
  EXPECT_EQ(FixedBlockPool::Create(Region{"kv", FakeAddress(UINTPTR_MAX - 4095), 8192}, 64)
                .status()
                .code(),
            StatusCode::kInvalidArgument);  // runs past the end of the address space
}

TEST(FixedBlockPoolTest, RejectsMoreBlocksThanInt32Ids) {
  const size_t max_blocks = static_cast<size_t>(std::numeric_limits<int32_t>::max());
  const Region exact{"kv", FakeAddress(0x100000), max_blocks * 64};
  Result<FixedBlockPool> pool = FixedBlockPool::Create(exact, 64);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  EXPECT_EQ(pool->num_blocks(), std::numeric_limits<int32_t>::max());
  EXPECT_EQ(Address(pool->BlockAddress(pool->num_blocks() - 1)),
            0x100000 + (max_blocks - 1) * 64);

  const Region one_more{"kv", FakeAddress(0x100000), (max_blocks + 1) * 64};
  EXPECT_EQ(FixedBlockPool::Create(one_more, 64).status().code(), StatusCode::kInvalidArgument);
}

TEST(FixedBlockPoolTest, OutOfRangeIdsAreCaught) {
  Result<FixedBlockPool> pool =
      FixedBlockPool::Create(Region{"kv", FakeAddress(0x100000), 256}, 64);
  ASSERT_TRUE(pool.ok());
#ifdef NDEBUG
  EXPECT_EQ(pool->BlockAddress(-1), nullptr);
  EXPECT_EQ(pool->BlockAddress(4), nullptr);
  EXPECT_EQ(pool->BlockAddress(std::numeric_limits<int32_t>::max()), nullptr);
#else
  EXPECT_DEATH(pool->BlockAddress(-1), "block id out of range");
  EXPECT_DEATH(pool->BlockAddress(4), "block id out of range");
#endif
  EXPECT_NE(pool->BlockAddress(3), nullptr);
}

}  // namespace
}  // namespace bmad::memory
