// The whole subsystem over memory this process may not touch, as it will run over GPU memory:
// an arena wrapped around a PROT_NONE mapping, carved into a workspace, a KV block pool and a
// buffer heap, each exercised. Any read or write of the managed memory would crash the test.
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "tests/worker/memory/prot_none_mapping.h"
#include "worker/memory/arena.h"
#include "worker/memory/buddy_allocator.h"
#include "worker/memory/bump_allocator.h"
#include "worker/memory/fixed_block_pool.h"

namespace bmad::memory {
namespace {

TEST(UntouchedMemoryTest, EveryAllocatorWorksOnMemoryThatFaultsOnAccess) {
  testing::ProtNoneMapping mapping(8 << 20);
  ASSERT_NE(mapping.base(), nullptr);
  std::unique_ptr<Arena> arena = Arena::Wrap(mapping.base(), mapping.bytes());

  Result<Region> workspace = arena->Carve("workspace", 1 << 20);
  Result<Region> kv = arena->Carve("kv_blocks", 4 << 20);
  Result<Region> buffers = arena->Carve("buffers", (2 << 20) + 12345);
  ASSERT_TRUE(workspace.ok() && kv.ok() && buffers.ok()) << arena->Describe();

  BumpAllocator bump(*workspace);
  for (int step = 0; step < 3; ++step) {
    for (int i = 0; i < 100; ++i) ASSERT_NE(bump.Allocate(10000), nullptr);
    bump.Reset();
  }
  EXPECT_EQ(bump.overflow_count(), 0u);

  Result<FixedBlockPool> pool = FixedBlockPool::Create(*kv, 64 * 1024);
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ(pool->num_blocks(), 64);
  EXPECT_EQ(pool->BlockAddress(63), static_cast<char*>(kv->base) + 63 * 64 * 1024);

  Result<BuddyAllocator> heap = BuddyAllocator::Create(*buffers);
  ASSERT_TRUE(heap.ok());
  std::vector<void*> live;
  for (size_t bytes = 1; bytes <= (256 << 10); bytes *= 3) {
    Result<void*> p = heap->Allocate(bytes);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    live.push_back(*p);
  }
  for (void* p : live) ASSERT_TRUE(heap->Free(p).ok());
  EXPECT_EQ(heap->stats().largest_free_block, size_t{2} << 20);
}

}  // namespace
}  // namespace bmad::memory
