#include "worker/parallel/bounded_poll.h"

#include <signal.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "worker/parallel/abort_flag.h"

namespace bmad::parallel {
namespace {

using std::chrono::milliseconds;

class BoundedPollTest : public ::testing::Test {
 protected:
  void SetUp() override { ClearAbortRequest(); }
  void TearDown() override { ClearAbortRequest(); }
};

TEST_F(BoundedPollTest, ReturnsDoneWhenThePollSucceeds) {
  int polls = 0;
  auto outcome = PollUntil([&]() -> Result<bool> { return ++polls == 5; },
                           Deadline::After(milliseconds(5000)));
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(*outcome, PollOutcome::kDone);
  EXPECT_EQ(polls, 5);
}

TEST_F(BoundedPollTest, WorkAlreadyDoneWinsOverAPassedDeadline) {
  auto outcome = PollUntil([]() -> Result<bool> { return true; }, Deadline::After(milliseconds(0)));
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(*outcome, PollOutcome::kDone);
}

TEST_F(BoundedPollTest, TimesOutWithinTheDeadlinePlusAMargin) {
  const auto start = SteadyClock::now();
  auto outcome = PollUntil([]() -> Result<bool> { return false; },
                           Deadline::After(milliseconds(100)));
  const auto elapsed = SteadyClock::now() - start;
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(*outcome, PollOutcome::kTimedOut);
  EXPECT_GE(elapsed, milliseconds(100));
  EXPECT_LT(elapsed, milliseconds(2000));
}

TEST_F(BoundedPollTest, NegativeTimeoutsCountAsZero) {
  const Deadline deadline = Deadline::After(milliseconds(-50));
  EXPECT_EQ(deadline.timeout, milliseconds(0));
  EXPECT_TRUE(deadline.Passed());
}

TEST_F(BoundedPollTest, ATimeoutBeyondTheClocksRangeNeverPasses) {
  // now + milliseconds::max() overflows the clock: it must saturate, not wrap into the past.
  for (const milliseconds huge : {milliseconds::max(), milliseconds::max() / 2}) {
    const Deadline deadline = Deadline::After(huge);
    EXPECT_FALSE(deadline.Passed());
    EXPECT_GT(deadline.at, SteadyClock::now() + std::chrono::hours(24 * 365));
  }
}

TEST_F(BoundedPollTest, APollErrorIsReturned) {
  auto outcome = PollUntil([]() -> Result<bool> { return Unavailable("peer gone"); },
                           Deadline::After(milliseconds(5000)));
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.status().code(), StatusCode::kUnavailable);
}

TEST_F(BoundedPollTest, TheAbortFlagEndsAWaitPromptly) {
  std::thread raiser([] {
    std::this_thread::sleep_for(milliseconds(50));
    RequestAbort();
  });
  const auto start = SteadyClock::now();
  auto outcome = PollUntil([]() -> Result<bool> { return false; },
                           Deadline::After(milliseconds(20000)));
  const auto elapsed = SteadyClock::now() - start;
  raiser.join();
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(*outcome, PollOutcome::kAborted);
  EXPECT_LT(elapsed, milliseconds(2000));
}

TEST_F(BoundedPollTest, LongWaitsSleepInsteadOfSpinning) {
  // A wait of 300 ms should poll a few hundred times (sleeps of up to 1 ms), not millions.
  int polls = 0;
  auto outcome = PollUntil([&]() -> Result<bool> { ++polls; return false; },
                           Deadline::After(milliseconds(300)));
  ASSERT_TRUE(outcome.ok());
  EXPECT_LT(polls, 50'000);
  EXPECT_GT(polls, 10);
}

TEST_F(BoundedPollTest, TheSignalHandlerRaisesTheFlag) {
  struct sigaction previous {};
  ASSERT_EQ(sigaction(SIGUSR2, nullptr, &previous), 0);
  ASSERT_TRUE(InstallAbortSignalHandler(SIGUSR2).ok());
  EXPECT_FALSE(AbortRequested());
  ASSERT_EQ(raise(SIGUSR2), 0);
  EXPECT_TRUE(AbortRequested());
  ClearAbortRequest();
  EXPECT_FALSE(AbortRequested());
  sigaction(SIGUSR2, &previous, nullptr);
}

TEST_F(BoundedPollTest, SigkillCannotBeCaught) {
  const Status status = InstallAbortSignalHandler(SIGKILL);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace bmad::parallel
