#include "kernels/cpu/scratch_buffers.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <new>

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
  ScratchBuffers scratch(5);  // four pool threads and the caller's own slot
  float* callers = scratch.Get(4, 100);
  callers[99] = 3.0f;
  scratch.Reserve(4, 8000);
  EXPECT_EQ(scratch.growths(), 5u);
  // The caller's slot, past the pool threads, keeps its buffer and contents.
  EXPECT_EQ(scratch.Get(4, 100), callers);
  EXPECT_EQ(callers[99], 3.0f);
  // Whichever thread picks up the largest task, it finds its buffer big enough.
  for (int thread = 0; thread < 4; ++thread) {
    float* p = scratch.Get(thread, 8000);
    ASSERT_NE(p, nullptr);
    p[7999] = 1.0f;  // the whole requested range is usable
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  }
  EXPECT_EQ(scratch.growths(), 5u);
  scratch.Reserve(4, 100);  // smaller than what is there: nothing to do
  EXPECT_EQ(scratch.growths(), 5u);
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
    scratch.Reserve(2, 2000);
    scratch.Get(0, 100000);  // regrows thread 0: the old buffer goes back through the hook
    EXPECT_EQ(allocated, 3);
    EXPECT_EQ(freed, 1);
  }
  EXPECT_EQ(freed, 3);
}

// Out of memory is std::bad_alloc, never a null buffer every kernel would write through; the
// slot stays empty and a later request tries again.
TEST(ScratchBuffersTest, AnAllocationThatFailsThrowsBadAlloc) {
  ScratchBuffers scratch(1);
  bool refuse = true;
  MemoryHooks hooks;
  hooks.allocate_scratch = [&](size_t bytes) { return refuse ? nullptr : std::aligned_alloc(64, bytes); };
  hooks.free_scratch = [](void* p) { std::free(p); };
  scratch.SetHooks(hooks);
  EXPECT_THROW(scratch.Get(0, 100), std::bad_alloc);
  EXPECT_THROW(scratch.Reserve(1, 100), std::bad_alloc);
  refuse = false;
  EXPECT_NE(scratch.Get(0, 100), nullptr);
}

}  // namespace
}  // namespace bmad::kernels::cpu
