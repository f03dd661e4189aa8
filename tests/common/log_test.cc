#include "common/log.h"
#include "common/log_throttle.h"

#include <gtest/gtest.h>

#include <vector>

namespace bmad::log {
namespace {

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SetSink([this](std::string_view line) { lines_.emplace_back(line); });
  }
  void TearDown() override {
    SetSink(nullptr);
    SetLevel(Level::kInfo);
  }
  std::vector<std::string> lines_;
};

TEST_F(LogTest, LineHasTimeLevelComponentAndFields) {
  SetLevel(Level::kDebug);
  Info("scheduler", "admitted", {{"req", 12}, {"tokens", 40}, {"who", "a b"}});
  ASSERT_EQ(lines_.size(), 1u);
  const std::string& line = lines_[0];
  // 2026-11-29T17:40:01.123Z INFO  scheduler: admitted req=12 tokens=40 who="a b"
  EXPECT_EQ(line[4], '-');
  EXPECT_EQ(line[10], 'T');
  EXPECT_NE(line.find("Z INFO  scheduler: admitted req=12 tokens=40 who=\"a b\""),
            std::string::npos)
      << line;
}

TEST_F(LogTest, LevelFilters) {
  SetLevel(Level::kWarn);
  Info("x", "hidden");
  Debug("x", "hidden");
  Warn("x", "shown");
  Error("x", "shown too");
  ASSERT_EQ(lines_.size(), 2u);
  EXPECT_NE(lines_[0].find("WARN"), std::string::npos);
  EXPECT_NE(lines_[1].find("ERROR"), std::string::npos);
  SetLevel(Level::kOff);
  Error("x", "nothing");
  EXPECT_EQ(lines_.size(), 2u);
}

TEST_F(LogTest, QuotesAndEscapesValues) {
  Info("c", "m", {{"empty", ""}, {"eq", "a=b"}, {"nl", "x\ny"}, {"q", "say \"hi\""}});
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_NE(lines_[0].find("empty=\"\" eq=\"a=b\" nl=\"x\\ny\" q=\"say \\\"hi\\\"\""),
            std::string::npos)
      << lines_[0];
}

// A carriage return or a terminal escape in a value from a peer cannot start or hide a line.
TEST_F(LogTest, ControlBytesInValuesAreEscaped) {
  Info("c", "m", {{"id", "r1\rERROR forged"}, {"esc", "a\x1b[2Kb"}, {"del", "x\x7F"}});
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_NE(lines_[0].find("id=\"r1\\rERROR forged\" esc=\"a\\x1B[2Kb\" del=\"x\\x7F\""), std::string::npos)
      << lines_[0];
  for (char c : lines_[0]) EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 && c != '\n') << int(c);
  // C1 controls (U+009B is a CSI), bidirectional overrides, and bytes that are not UTF-8 too;
  // other characters stay as they are.
  lines_.clear();
  Info("c", "m", {{"v", "a\xC2\x9B" "2K\xE2\x80\xAE" "b\xFF\xC3\xA9"}});
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_NE(lines_[0].find("v=\"a\\xC2\\x9B2K\\xE2\\x80\\xAEb\\xFF\xC3\xA9\""), std::string::npos) << lines_[0];
  // The bidirectional marks (LRM, RLM, ALM) reorder neutral text around them as well.
  lines_.clear();
  Info("c", "m", {{"v", "1\xE2\x80\x8E" "2\xE2\x80\x8F" "3\xD8\x9C" "4\xE2\x80\x8D"}});
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_NE(lines_[0].find("v=\"1\\xE2\\x80\\x8E2\\xE2\\x80\\x8F3\\xD8\\x9C4\xE2\x80\x8D\""), std::string::npos)
      << lines_[0];
}

TEST_F(LogTest, FieldTypes) {
  Info("c", "m", {{"b", true}, {"d", 0.25}, {"s", InvalidArgument("bad")}});
  EXPECT_NE(lines_[0].find("b=true d=0.25 s=\"INVALID_ARGUMENT: bad\""), std::string::npos)
      << lines_[0];
}

TEST(LogLevelTest, Parse) {
  EXPECT_EQ(*ParseLevel("debug"), Level::kDebug);
  EXPECT_EQ(*ParseLevel("WARNING"), Level::kWarn);
  EXPECT_EQ(*ParseLevel("Error"), Level::kError);
  Result<Level> bad = ParseLevel("loud");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("loud"), std::string::npos);
}

TEST(LogThrottleTest, SaysTheFirstThenOncePerIntervalWithTheCountLeftUnsaid) {
  Throttle throttle(10);
  uint64_t unsaid = 99;
  EXPECT_TRUE(throttle.Allow(1000, &unsaid));  // the first is always said, whatever the clock
  EXPECT_EQ(unsaid, 0u);
  EXPECT_FALSE(throttle.Allow(1000, &unsaid));
  EXPECT_FALSE(throttle.Allow(1005, &unsaid));
  EXPECT_FALSE(throttle.Allow(1009, &unsaid));
  EXPECT_TRUE(throttle.Allow(1010, &unsaid));  // a whole interval after the last said
  EXPECT_EQ(unsaid, 3u);
  EXPECT_TRUE(throttle.Allow(1100, &unsaid));  // a lone one after quiet is said at once
  EXPECT_EQ(unsaid, 0u);
  EXPECT_FALSE(throttle.Allow(1101, &unsaid));
  EXPECT_TRUE(throttle.Allow(1111, &unsaid));
  EXPECT_EQ(unsaid, 1u);
}

TEST(LogThrottleTest, AClockAtZeroStillSaysTheFirst) {
  Throttle throttle(1'000'000'000);
  uint64_t unsaid = 0;
  EXPECT_TRUE(throttle.Allow(0, &unsaid));
  EXPECT_FALSE(throttle.Allow(0, &unsaid));
}

}  // namespace
}  // namespace bmad::log
