#include "kernels/cpu/thread_pool.h"

#include "kernels/cpu/cpu_backend.h"
#include "tests/support/process_limit.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <functional>
#include <stdexcept>
#include <string>
#include <system_error>
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

// A chunk that throws (std::bad_alloc in a host-side loop): every other chunk still runs once,
// the caller gets the exception after them, and the next loops run whole. (The exception used
// to leave the loop open: chunks were dropped, and their counts landed on the next loop's.)
TEST(ThreadPoolTest, AnExceptionFromAChunkReachesTheCallerAndThePoolGoesOn) {
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    for (int round = 0; round < 200; ++round) {
      const int64_t thrower = round % 64;
      std::vector<std::atomic<int>> hits(64);
      bool caught = false;
      try {
        pool.ParallelFor(64, 1, [&](int64_t b, int64_t e, int) {
          for (int64_t i = b; i < e; ++i) {
            hits[static_cast<size_t>(i)]++;
            if (i == thrower) throw std::runtime_error("chunk " + std::to_string(i));
          }
        });
      } catch (const std::runtime_error& e) {
        caught = true;
        EXPECT_EQ(std::string(e.what()), "chunk " + std::to_string(thrower));
      }
      ASSERT_TRUE(caught);
      for (const auto& h : hits) ASSERT_EQ(h.load(), 1);
      std::atomic<int64_t> total{0};
      pool.ParallelFor(1000, 7, [&](int64_t b, int64_t e, int) { total += e - b; });
      ASSERT_EQ(total.load(), 1000);
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

// Back-to-back loops whose chunk counts alternate, few then many. A worker that saw the last
// chunk of a loop claimed could read the next loop's larger chunk count before the caller had
// published that loop, and claim a chunk of the finished one: it ran part of the next loop
// early and its count spilled into the next loop's, so the caller either returned with a chunk
// still running (wrong results) or waited for ever. Before the fix this hung within about
// 300,000 loops on two cores; more threads than cores make workers lose the CPU at awkward
// moments. A watchdog turns a hang into a failure.
TEST(ThreadPoolTest, AFinishedLoopsChunksCannotBeClaimedOnceTheNextOneIsBeingSetUp) {
  constexpr int kLoops = 1000000;
  std::atomic<int> loops_done{0};
  std::atomic<bool> finished{false};
  std::thread watchdog([&] {
    // Loops take microseconds: 20 s without one finishing is a hang, however slow the machine.
    int last = -1, still = 0;
    while (!finished.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const int now = loops_done.load();
      still = now == last ? still + 1 : 0;
      last = now;
      if (still >= 200) {
        std::fprintf(stderr, "ThreadPool hung: loop %d never returned\n", now);
        std::abort();
      }
    }
  });
  ThreadPool pool(4);
  std::vector<std::atomic<int>> hits(16);
  int64_t wrong = 0;
  for (int loop = 0; loop < kLoops; ++loop) {
    const int64_t n = loop % 2 == 0 ? 2 : 16;
    for (int64_t i = 0; i < n; ++i) hits[static_cast<size_t>(i)].store(0, std::memory_order_relaxed);
    pool.ParallelFor(n, 1, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < std::min(e, n); ++i) {
        hits[static_cast<size_t>(i)].fetch_add(1, std::memory_order_relaxed);
      }
    });
    // Every task ran exactly once, and before ParallelFor returned.
    for (int64_t i = 0; i < n; ++i) wrong += hits[static_cast<size_t>(i)].load() != 1;
    loops_done.store(loop + 1);
  }
  finished.store(true);
  watchdog.join();
  EXPECT_EQ(wrong, 0);
}

TEST(ThreadPoolTest, AvailableCoresIsPositive) { EXPECT_GE(AvailableCores(), 1); }

// Under a process limit, the pool throws (the caller turns that into an error) instead of
// terminating or hanging the process with the threads it had started; CpuBackend::Create
// turns it into kResourceExhausted.
TEST(ThreadPoolTest, ARefusedThreadIsAnErrorNotAnAbort) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to become an unprivileged user in a child";
  const int pool = testing::UnderAProcessLimit(/*threads_allowed=*/3, [] {
    try {
      ThreadPool pool(64);
      return 2;
    } catch (const std::system_error&) {
      return 0;
    }
  });
  ASSERT_NE(pool, testing::kProcessLimitNotSet) << "could not become user 65534 with a process limit";
  if (pool == 2) GTEST_SKIP() << "user 65534 already runs processes here: the limit did not bind";
  EXPECT_EQ(pool, 0) << "-1: the child died of a signal or hung";
  const int backend = testing::UnderAProcessLimit(/*threads_allowed=*/3, [] {
    CpuBackendOptions options;
    options.threads = 64;
    Result<std::unique_ptr<CpuBackend>> b = CpuBackend::Create(options);
    if (b.ok()) return 2;
    const bool named = b.status().code() == StatusCode::kResourceExhausted &&
                       b.status().message().find("cannot start 64 compute threads") != std::string::npos;
    return named ? 0 : 4;
  });
  EXPECT_EQ(backend, 0) << "4: another error; -1: the child died of a signal or hung";
}

}  // namespace
}  // namespace bmad::kernels::cpu
