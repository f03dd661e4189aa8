#include "kernels/cpu/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace bmad::kernels::cpu {
namespace {

TEST(ThreadPoolTest, EveryTaskRunsExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {0, 1, 7, 100, 1001}) {
      for (int64_t grain : {1, 3, 64}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::atomic<int> max_thread{0};
        pool.ParallelFor(n, grain, [&](int64_t b, int64_t e, int t) {
          if (threads > 1 && n > grain) {
            EXPECT_LE(e - b, grain);
          }
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
          int cur = max_thread.load();
          while (t > cur && !max_thread.compare_exchange_weak(cur, t)) {
          }
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1);
        EXPECT_LT(max_thread.load(), threads);
      }
    }
  }
}

TEST(ThreadPoolTest, ManyShortLoopsInARow) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  for (int round = 0; round < 20000; ++round) {
    pool.ParallelFor(4, 1, [&](int64_t b, int64_t e, int) { total += e - b; });
  }
  EXPECT_EQ(total.load(), 80000);
}

TEST(ThreadPoolTest, AvailableCoresIsPositive) { EXPECT_GE(AvailableCores(), 1); }

}  // namespace
}  // namespace bmad::kernels::cpu
