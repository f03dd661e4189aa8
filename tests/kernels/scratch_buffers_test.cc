#include "kernels/cpu/scratch_buffers.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>

namespace bmad::kernels::cpu {
namespace {

TEST(ScratchBuffersTest, GetGrowsOnlyTheAskingThreadsBuffer) {
  ScratchBuffers scratch(3);
  float* a = scratch.Get(0, 5000);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(scratch.growths(), 1u);
  EXPECT_EQ(scratch.Get(0, 5000), a);  // reused, no growth
  EXPECT_EQ(scratch.growths(), 1u);
  scratch.Get(1, 10);  // a different thread has its own buffer
  EXPECT_EQ(scratch.growths(), 2u);
}

TEST(ScratchBuffersTest, ReserveGrowsEveryThreadSoLaterGetsNeverGrow) {
  ScratchBuffers scratch(4);
  scratch.Reserve(8000);
  EXPECT_EQ(scratch.growths(), 4u);
  // Whichever thread picks up the largest task, it finds its buffer big enough.
  for (int thread = 0; thread < 4; ++thread) {
    float* p = scratch.Get(thread, 8000);
    ASSERT_NE(p, nullptr);
    p[7999] = 1.0f;  // the whole requested range is usable
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  }
  EXPECT_EQ(scratch.growths(), 4u);
  scratch.Reserve(100);  // smaller than what is there: nothing to do
  EXPECT_EQ(scratch.growths(), 4u);
}

TEST(ScratchBuffersTest, UsesTheHooksWhenSet) {
  int allocated = 0;
  int freed = 0;
  {
    ScratchBuffers scratch(2);
    MemoryHooks hooks;
    hooks.allocate_scratch = [&](size_t bytes) {
      ++allocated;
      return std::aligned_alloc(64, bytes);
    };
    hooks.free_scratch = [&](void* p) {
      ++freed;
      std::free(p);
    };
    scratch.SetHooks(hooks);
    scratch.Reserve(2000);
    scratch.Get(0, 100000);  // regrows thread 0: the old buffer goes back through the hook
    EXPECT_EQ(allocated, 3);
    EXPECT_EQ(freed, 1);
  }
  EXPECT_EQ(freed, 3);
}

}  // namespace
}  // namespace bmad::kernels::cpu
