#include "coordinator/client/request_watchdog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

namespace bmad::client {
namespace {

TEST(RequestWatchdogTest, StopsOnlyOverdueRequestsAndEachOnce) {
  RequestWatchdog watchdog;
  const auto now = RequestWatchdog::Clock::now();
  int early = 0, late = 0;
  const uint64_t a = watchdog.Watch(now - std::chrono::seconds(1), [&] { ++early; });
  const uint64_t b = watchdog.Watch(now + std::chrono::hours(1), [&] { ++late; });
  EXPECT_EQ(watchdog.StopOverdue(now), 1);
  EXPECT_EQ(watchdog.StopOverdue(now), 0);
  EXPECT_EQ(early, 1);
  EXPECT_EQ(late, 0);
  watchdog.Unwatch(a);  // already stopped: harmless
  watchdog.Unwatch(b);
  EXPECT_EQ(watchdog.StopOverdue(now + std::chrono::hours(2)), 0);
  EXPECT_EQ(late, 0) << "an unwatched request is never stopped";
}

TEST(RequestWatchdogTest, RegistrationUnwatchesOnScopeExit) {
  RequestWatchdog watchdog;
  int stops = 0;
  {
    WatchdogRegistration r(&watchdog, RequestWatchdog::Clock::now(), [&] { ++stops; });
  }
  EXPECT_EQ(watchdog.StopOverdue(), 0);
  EXPECT_EQ(stops, 0);
  WatchdogRegistration without(nullptr, RequestWatchdog::Clock::now(), [&] { ++stops; });
  EXPECT_EQ(stops, 0);
}

TEST(RequestWatchdogTest, ASlowStopHoldsUpNeitherWatchNorUnwatchOfOthers) {
  // httplib's Client::stop() waits for a connect in progress. The watchdog used to call it
  // under its one lock, so every other request's Watch and Unwatch waited as long. Unwatch of
  // the request being stopped still waits: its owner may destroy the client afterwards.
  RequestWatchdog watchdog;
  std::mutex gate;
  std::unique_lock<std::mutex> hold(gate);
  std::atomic<bool> stop_entered{false}, stop_returned{false};
  const uint64_t slow = watchdog.Watch(RequestWatchdog::Clock::now() - std::chrono::seconds(1), [&] {
    stop_entered.store(true);
    std::lock_guard<std::mutex> wait_for_the_test(gate);
    stop_returned.store(true);
  });
  std::thread stopper([&] { EXPECT_EQ(watchdog.StopOverdue(), 1); });
  for (int i = 0; i < 5000 && !stop_entered.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!stop_entered.load()) {  // (no ASSERT: the thread must be joined)
    ADD_FAILURE() << "the overdue request's stop was never called";
    hold.unlock();
    stopper.join();
    return;
  }
  // While that stop runs: other requests come and go at once (within 5 s; the old code held
  // them until the stop returned, which here is never before the gate opens).
  std::atomic<bool> others_done{false};
  std::thread others([&] {
    const uint64_t other = watchdog.Watch(RequestWatchdog::Clock::now() + std::chrono::hours(1), [] {});
    watchdog.Unwatch(other);
    others_done.store(true);
  });
  for (int i = 0; i < 5000 && !others_done.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(others_done.load()) << "another request's Watch/Unwatch waited for a stop in progress";
  std::atomic<bool> unwatched{false};
  std::thread owner([&] {
    watchdog.Unwatch(slow);
    unwatched.store(true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(unwatched.load()) << "Unwatch returned while its stop still ran";
  hold.unlock();
  others.join();
  owner.join();
  stopper.join();
  EXPECT_TRUE(stop_returned.load());
  EXPECT_TRUE(unwatched.load());
}

}  // namespace
}  // namespace bmad::client
