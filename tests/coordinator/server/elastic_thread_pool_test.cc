// ElasticThreadPool starts a thread per concurrent task up to its cap, queues past it, and
// runs what is queued before shutdown returns.
#include "coordinator/server/elastic_thread_pool.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "tests/support/process_limit.h"

namespace bmad::coord {
namespace {

using namespace std::chrono_literals;

// Tasks that block until released, counting how many run at once. Every wait is bounded, so a
// pool that never runs a task fails the test instead of hanging it.
class BlockingTasks {
 public:
  std::function<void()> Task() {
    return [this] {
      std::unique_lock<std::mutex> lock(mutex_);
      ++running_;
      changed_.notify_all();
      changed_.wait_for(lock, 10s, [this] { return open_; });
      --running_;
      ++finished_;
      changed_.notify_all();
    };
  }
  // True once `n` tasks are running at the same time.
  bool WaitRunning(int n) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, 10s, [&] { return running_ == n; });
  }
  bool WaitFinished(int n) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, 10s, [&] { return finished_ == n; });
  }
  int running() {
    std::lock_guard<std::mutex> lock(mutex_);
    return running_;
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int running_ = 0, finished_ = 0;
  bool open_ = false;
};

TEST(ElasticThreadPoolTest, StartsNoThreadUntilATaskComes) {
  ElasticThreadPool pool(64);
  EXPECT_EQ(pool.threads(), 0u);
}

TEST(ElasticThreadPoolTest, RunsEveryBlockedTaskAtOnceUpToTheCap) {
  ElasticThreadPool pool(300);
  BlockingTasks tasks;
  // More than httplib's fixed pool would have held: each one a connection in progress.
  for (int i = 0; i < 300; ++i) pool.enqueue(tasks.Task());
  EXPECT_TRUE(tasks.WaitRunning(300)) << "running: " << tasks.running();
  EXPECT_EQ(pool.threads(), 300u);
  tasks.Open();
  EXPECT_TRUE(tasks.WaitFinished(300));
  pool.shutdown();
}

TEST(ElasticThreadPoolTest, QueuesPastTheCapAndRunsTheRestAsThreadsFree) {
  ElasticThreadPool pool(4);
  BlockingTasks tasks;
  for (int i = 0; i < 6; ++i) pool.enqueue(tasks.Task());
  EXPECT_TRUE(tasks.WaitRunning(4));
  EXPECT_EQ(pool.threads(), 4u);
  EXPECT_EQ(pool.queued(), 2u);
  EXPECT_EQ(tasks.running(), 4);
  tasks.Open();
  EXPECT_TRUE(tasks.WaitFinished(6));
  EXPECT_EQ(pool.threads(), 4u);
}

TEST(ElasticThreadPoolTest, ReusesIdleThreads) {
  ElasticThreadPool pool(64);
  std::atomic<int> done{0};
  for (int i = 0; i < 50; ++i) {
    pool.enqueue([&] { ++done; });
    // Each task ends, and its thread waits again, before the next comes: one thread serves all.
    for (int spin = 0; spin < 100000 && (done.load() <= i || pool.idle() < 1); ++spin) {
      std::this_thread::sleep_for(100us);
    }
  }
  EXPECT_EQ(done.load(), 50);
  EXPECT_EQ(pool.threads(), 1u);
}

TEST(ElasticThreadPoolTest, ShutdownRunsQueuedTasksThenJoins) {
  std::atomic<int> done{0};
  {
    ElasticThreadPool pool(1);
    BlockingTasks tasks;
    pool.enqueue(tasks.Task());
    ASSERT_TRUE(tasks.WaitRunning(1));
    for (int i = 0; i < 5; ++i) pool.enqueue([&] { ++done; });
    tasks.Open();
    pool.shutdown();
    EXPECT_EQ(done.load(), 5);
    pool.shutdown();  // again: nothing to join
  }
  EXPECT_EQ(done.load(), 5);
}

// Under a process limit the system refuses threads: a task then waits for a thread that exists,
// or, with none at all, runs on the caller's (httplib's accept) thread, rather than the
// refusal ending the process.
TEST(ElasticThreadPoolTest, AThreadTheSystemRefusesLeavesTheTaskToAnotherOrToTheCaller) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to become an unprivileged user in a child";
  const int some = testing::UnderAProcessLimit(/*threads_allowed=*/2, [] {
    ElasticThreadPool pool(64);
    std::atomic<int> done{0};
    for (int i = 0; i < 6; ++i) {
      pool.enqueue([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        ++done;
      });
    }
    const size_t threads = pool.threads();
    pool.shutdown();
    if (threads == 64 || threads > 2) return 2;  // the limit did not bind
    return done.load() == 6 ? 0 : 4;
  });
  ASSERT_NE(some, testing::kProcessLimitNotSet) << "could not become user 65534 with a process limit";
  if (some == 2) GTEST_SKIP() << "user 65534 already runs processes here: the limit did not bind as asked";
  EXPECT_EQ(some, 0) << "4: a task was lost; -1: the child died of a signal or hung";

  const int none = testing::UnderAProcessLimit(/*threads_allowed=*/0, [] {
    ElasticThreadPool pool(64);
    int done = 0;
    pool.enqueue([&] { ++done; });
    return done == 1 && pool.threads() == 0 ? 0 : 4;  // ran before enqueue returned
  });
  EXPECT_EQ(none, 0) << "4: the task did not run on the caller's thread; -1: the child died or hung";
}

}  // namespace
}  // namespace bmad::coord
