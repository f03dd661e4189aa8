// The CUDA backend's scratch policy (kernels/cuda/device_buffers.h) over memory that faults on
// any access, as device memory would from the host: the arena hooks hand out addresses inside a
// PROT_NONE mapping, the fallback allocator made-up addresses nobody mapped. Any read or write
// through them would crash the test. Runs in CI, without a GPU.
#include "kernels/cuda/device_buffers.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/worker/memory/prot_none_mapping.h"

namespace bmad::cuda {
namespace {

// A bump "arena" over a PROT_NONE mapping that records what it is asked to do.
struct FakeArena {
  explicit FakeArena(size_t bytes) : mapping(bytes) {}
  memory::testing::ProtNoneMapping mapping;
  size_t used = 0;
  bool exhausted = false;
  std::vector<std::string>* events = nullptr;

  kernels::MemoryHooks Hooks() {
    kernels::MemoryHooks h;
    h.allocate_scratch = [this](size_t bytes) -> void* {
      if (exhausted || used + bytes > mapping.bytes()) return nullptr;
      void* p = static_cast<char*>(mapping.base()) + used;
      used += bytes;
      return p;
    };
    h.free_scratch = [this](void* p) {
      if (events) events->push_back("arena free " + std::to_string(Offset(p)));
    };
    return h;
  }
  bool Contains(const void* p) const {
    const auto* c = static_cast<const char*>(p);
    const auto* base = static_cast<const char*>(mapping.base());
    return c >= base && c < base + mapping.bytes();
  }
  size_t Offset(const void* p) const {
    return static_cast<size_t>(static_cast<const char*>(p) -
                               static_cast<const char*>(mapping.base()));
  }
};

// Addresses far from anything mapped, as cudaMalloc's would be.
struct FakeCudaMalloc {
  uintptr_t next = uintptr_t{0x7e0000000000};
  int live = 0;
  bool fail = false;
  std::vector<std::string>* events = nullptr;
  FallbackAllocator Allocator() {
    FallbackAllocator a;
    a.allocate = [this](size_t bytes) -> void* {
      if (fail) return nullptr;
      void* p = reinterpret_cast<void*>(next);
      next += (bytes + 4095) / 4096 * 4096;
      ++live;
      return p;
    };
    a.free = [this](void*) {
      --live;
      if (events) events->push_back("cudaFree");
    };
    return a;
  }
};

TEST(CudaDeviceBuffers, GrowsOnlyWhenAskedForMoreAndReusesOtherwise) {
  std::vector<std::string> events;
  FakeArena arena(1 << 20);
  arena.events = &events;
  FakeCudaMalloc cuda;
  DeviceBuffers buffers(3, cuda.Allocator(), [&] { events.push_back("sync"); });
  buffers.SetHooks(arena.Hooks());

  void* a = buffers.Get(0, 1000);
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(arena.Contains(a));
  EXPECT_EQ(buffers.capacity(0) % 256, 0u);
  EXPECT_GE(buffers.capacity(0), 1250u) << "grows with headroom";
  EXPECT_EQ(buffers.Get(0, 1000), a);
  EXPECT_EQ(buffers.Get(0, 10), a);
  EXPECT_EQ(buffers.Get(0, buffers.capacity(0)), a);
  EXPECT_EQ(buffers.growths(), 1u);
  EXPECT_TRUE(events.empty()) << "no wait and no free without growth";

  void* b = buffers.Get(1, 64);  // another slot is independent
  EXPECT_TRUE(arena.Contains(b));
  EXPECT_NE(b, a);

  void* bigger = buffers.Get(0, 5000);
  EXPECT_TRUE(arena.Contains(bigger));
  EXPECT_NE(bigger, a);
  EXPECT_EQ(buffers.growths(), 3u);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0], "sync") << "the stream is drained before the old buffer goes back";
  EXPECT_EQ(events[1], "arena free " + std::to_string(arena.Offset(a)));
  EXPECT_EQ(buffers.fallback_allocations(), 0u);
  EXPECT_EQ(cuda.live, 0);
}

TEST(CudaDeviceBuffers, FallsBackToCudaMallocAndCountsIt) {
  std::vector<std::string> events;
  FakeArena arena(4096);
  FakeCudaMalloc cuda;
  cuda.events = &events;
  {
    DeviceBuffers buffers(2, cuda.Allocator(), [&] { events.push_back("sync"); });
    buffers.SetHooks(arena.Hooks());
    void* small = buffers.Get(0, 1000);
    EXPECT_TRUE(arena.Contains(small));
    void* large = buffers.Get(1, 1 << 20);  // more than the arena holds
    ASSERT_NE(large, nullptr);
    EXPECT_FALSE(arena.Contains(large));
    EXPECT_EQ(buffers.fallback_allocations(), 1u);
    EXPECT_EQ(buffers.growths(), 2u);
    EXPECT_EQ(cuda.live, 1);
  }
  // Destruction: one wait for the stream, then each buffer back to where it came from.
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0], "sync");
  EXPECT_EQ(events[1], "cudaFree");
  EXPECT_EQ(cuda.live, 0);
}

TEST(CudaDeviceBuffers, WithoutHooksEverythingIsAFallback) {
  FakeCudaMalloc cuda;
  DeviceBuffers buffers(1, cuda.Allocator(), nullptr);
  ASSERT_NE(buffers.Get(0, 10), nullptr);
  ASSERT_NE(buffers.Get(0, 100000), nullptr);
  EXPECT_EQ(buffers.fallback_allocations(), 2u);
  EXPECT_EQ(cuda.live, 1) << "the first buffer was freed when the slot grew";
}

TEST(CudaDeviceBuffers, WhenEverythingFailsGetReturnsNullAndCountsNothing) {
  FakeArena arena(4096);
  arena.exhausted = true;
  FakeCudaMalloc cuda;
  cuda.fail = true;
  DeviceBuffers buffers(1, cuda.Allocator(), nullptr);
  buffers.SetHooks(arena.Hooks());
  EXPECT_EQ(buffers.Get(0, 100), nullptr);
  EXPECT_EQ(buffers.growths(), 0u);
  EXPECT_EQ(buffers.fallback_allocations(), 0u);
  cuda.fail = false;
  EXPECT_NE(buffers.Get(0, 100), nullptr) << "a later request may succeed";
  EXPECT_EQ(buffers.fallback_allocations(), 1u);
}

TEST(CudaDeviceBuffers, SteadyStateAllocatesNothing) {
  FakeArena arena(8 << 20);
  FakeCudaMalloc cuda;
  DeviceBuffers buffers(4, cuda.Allocator(), [] {});
  buffers.SetHooks(arena.Hooks());
  // A warm-up of rising sizes, then steps that repeat them: growths stay flat.
  for (size_t n = 100; n < 100000; n = n * 3 / 2) buffers.Get(static_cast<int>(n % 4), n);
  const uint64_t warm = buffers.growths();
  for (int step = 0; step < 100; ++step) {
    for (size_t n = 100; n < 100000; n = n * 3 / 2) buffers.Get(static_cast<int>(n % 4), n);
  }
  EXPECT_EQ(buffers.growths(), warm);
}

}  // namespace
}  // namespace bmad::cuda
