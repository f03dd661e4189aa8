#include "worker/memory/system_allocations.h"

#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace bmad::memory {
namespace {

TEST(SystemAllocationsTest, RecordAddsOneAllocationAndItsBytes) {
  const uint64_t count = SystemAllocations::Count();
  const uint64_t bytes = SystemAllocations::Bytes();
  SystemAllocations::Record(4096);
  SystemAllocations::Record(0);
  EXPECT_EQ(SystemAllocations::Count(), count + 2);
  EXPECT_EQ(SystemAllocations::Bytes(), bytes + 4096);
}

TEST(SystemAllocationsTest, ConcurrentRecordsAreAllCounted) {
  const uint64_t count = SystemAllocations::Count();
  const uint64_t bytes = SystemAllocations::Bytes();
  constexpr int kThreads = 4;
  constexpr int kRecordsPerThread = 10000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([] {
      for (int i = 0; i < kRecordsPerThread; ++i) SystemAllocations::Record(3);
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(SystemAllocations::Count(), count + kThreads * kRecordsPerThread);
  EXPECT_EQ(SystemAllocations::Bytes(), bytes + 3 * kThreads * kRecordsPerThread);
}

}  // namespace
}  // namespace bmad::memory
