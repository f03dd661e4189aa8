#include "coordinator/client/request_watchdog.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace bmad::client
