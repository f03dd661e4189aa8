#include "worker/parallel/watchdog.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/log.h"

namespace bmad::parallel {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

// Replaces the process exit with a record, and captures log lines.
class WatchdogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log::SetSink([this](std::string_view line) {
      std::lock_guard lock(mutex_);
      lines_.emplace_back(line);
    });
  }
  void TearDown() override { log::SetSink(nullptr); }

  Watchdog::Options Options(milliseconds timeout) {
    Watchdog::Options options;
    options.replica_id = "r7";
    options.rank = 3;
    options.step_timeout = timeout;
    options.exit = [this](int status) {
      exit_status_ = status;
      exited_at_ = Clock::now();
      exits_.fetch_add(1);
    };
    return options;
  }

  bool WaitForExit(milliseconds limit) {
    const auto deadline = Clock::now() + limit;
    while (exits_.load() == 0 && Clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(2));
    }
    return exits_.load() > 0;
  }

  std::vector<std::string> Lines() {
    std::lock_guard lock(mutex_);
    return lines_;
  }

  std::atomic<int> exits_{0};
  std::atomic<int> exit_status_{-1};
  Clock::time_point exited_at_;
  std::mutex mutex_;
  std::vector<std::string> lines_;
};

TEST_F(WatchdogTest, FiresAfterTheTimeoutNotBefore) {
  // A timeout well past the sleep below, which a loaded machine may stretch.
  Watchdog watchdog(Options(milliseconds(1000)));
  const auto armed_at = Clock::now();
  watchdog.Arm(42);
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(exits_.load(), 0) << "fired before its timeout";
  ASSERT_TRUE(WaitForExit(milliseconds(5000)));
  EXPECT_GE(exited_at_ - armed_at, milliseconds(1000));
  EXPECT_EQ(exit_status_.load(), Watchdog::kExitCode);
  EXPECT_EQ(watchdog.fire_count(), 1);
  const auto lines = Lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("ERROR"));
  EXPECT_THAT(lines[0], HasSubstr("replica r7 rank 3: step 42 did not finish within 1000 ms; a "
                                  "peer rank is hung or dead; exiting"));
}

TEST_F(WatchdogTest, DisarmedStepsNeverFire) {
  Watchdog watchdog(Options(milliseconds(300)));
  // Many steps, each well inside the timeout, spanning several timeouts in total.
  for (uint64_t step = 0; step < 30; ++step) {
    watchdog.Arm(step);
    std::this_thread::sleep_for(milliseconds(30));
    watchdog.Disarm();
  }
  std::this_thread::sleep_for(milliseconds(400));
  EXPECT_EQ(exits_.load(), 0);
  EXPECT_EQ(watchdog.fire_count(), 0);
  EXPECT_TRUE(Lines().empty());
}

TEST_F(WatchdogTest, ReArmingRestartsTheClock) {
  Watchdog watchdog(Options(milliseconds(1000)));
  watchdog.Arm(1);
  std::this_thread::sleep_for(milliseconds(600));
  const auto rearmed_at = Clock::now();
  watchdog.Arm(2);  // a new step without a Disarm in between
  ASSERT_TRUE(WaitForExit(milliseconds(5000)));
  EXPECT_GE(exited_at_ - rearmed_at, milliseconds(1000));
  ASSERT_FALSE(Lines().empty());
  EXPECT_THAT(Lines()[0], HasSubstr("step 2 did not finish"));
}

TEST_F(WatchdogTest, RunsTheCallbackBeforeExiting) {
  std::atomic<bool> called{false};
  std::atomic<bool> called_before_exit{false};
  auto options = Options(milliseconds(50));
  options.on_fire = [&] {
    called = true;
    called_before_exit = exits_.load() == 0;
  };
  Watchdog watchdog(std::move(options));
  watchdog.Arm(5);
  ASSERT_TRUE(WaitForExit(milliseconds(5000)));
  EXPECT_TRUE(called.load());
  EXPECT_TRUE(called_before_exit.load());
}

TEST_F(WatchdogTest, AHungCallbackDoesNotDelayTheExitPastItsGrace) {
  // Shared with the callback's thread, which the watchdog detaches and this test outlives: a
  // flag on this test's stack would be read after the test returned.
  auto release = std::make_shared<std::atomic<bool>>(false);
  auto options = Options(milliseconds(50));
  options.on_fire_grace = milliseconds(100);
  options.on_fire = [release] {
    while (!release->load()) std::this_thread::sleep_for(milliseconds(5));
  };
  Watchdog watchdog(std::move(options));
  const auto armed_at = Clock::now();
  watchdog.Arm(9);
  ASSERT_TRUE(WaitForExit(milliseconds(5000)));
  EXPECT_GE(exited_at_ - armed_at, milliseconds(150));  // timeout + grace
  *release = true;  // let the detached callback thread finish
}

TEST_F(WatchdogTest, AThrowingCallbackStillExits) {
  auto options = Options(milliseconds(30));
  options.on_fire = [] { throw std::runtime_error("coordinator unreachable"); };
  Watchdog watchdog(std::move(options));
  watchdog.Arm(1);
  ASSERT_TRUE(WaitForExit(milliseconds(5000)));
  EXPECT_EQ(exit_status_.load(), Watchdog::kExitCode);
}

TEST_F(WatchdogTest, FiresOncePerArmAndAgainAfterReArming) {
  Watchdog watchdog(Options(milliseconds(30)));
  watchdog.Arm(1);
  ASSERT_TRUE(WaitForExit(milliseconds(5000)));
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(watchdog.fire_count(), 1) << "a fired step must not fire again";
  watchdog.Arm(2);
  const auto deadline = Clock::now() + milliseconds(5000);
  // The count goes up before the exit hook runs: wait for both.
  while ((watchdog.fire_count() < 2 || exits_.load() < 2) && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(2));
  }
  EXPECT_EQ(watchdog.fire_count(), 2);
  EXPECT_EQ(exits_.load(), 2);
}

TEST_F(WatchdogTest, DestroyingAnArmedWatchdogDoesNotFire) {
  {
    // Destroyed long before its timeout, even on a loaded machine; then waited for past it.
    Watchdog watchdog(Options(milliseconds(300)));
    watchdog.Arm(1);
  }
  std::this_thread::sleep_for(milliseconds(600));
  EXPECT_EQ(exits_.load(), 0);
}

}  // namespace
}  // namespace bmad::parallel
