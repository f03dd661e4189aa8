// The load generators' length distributions: the three forms, their bounds, and what they refuse.
#include "worker/tools/length_distribution.h"

#include <gtest/gtest.h>

#include <set>

namespace bmad::tools {
namespace {

TEST(LengthDistributionTest, TheThreeFormsSampleWhatTheySay) {
  std::mt19937_64 rng(1);
  auto fixed = LengthDistribution::Parse("128", "--len");
  ASSERT_TRUE(fixed.ok()) << fixed.status().ToString();
  EXPECT_EQ(fixed->max(), 128);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(fixed->Sample(rng), 128);

  auto range = LengthDistribution::Parse("32-40", "--len");
  ASSERT_TRUE(range.ok());
  EXPECT_EQ(range->max(), 40);
  std::set<int64_t> seen;
  for (int i = 0; i < 1000; ++i) seen.insert(range->Sample(rng));
  EXPECT_EQ(seen, (std::set<int64_t>{32, 33, 34, 35, 36, 37, 38, 39, 40}));

  auto choices = LengthDistribution::Parse("64,8,512", "--len");
  ASSERT_TRUE(choices.ok());
  EXPECT_EQ(choices->max(), 512);
  seen.clear();
  for (int i = 0; i < 200; ++i) seen.insert(choices->Sample(rng));
  EXPECT_EQ(seen, (std::set<int64_t>{8, 64, 512}));
  EXPECT_EQ(choices->text(), "64,8,512");
}

TEST(LengthDistributionTest, TheLongestLengthIsAccepted) {
  const std::string longest = std::to_string(LengthDistribution::kMaxLength);
  for (const std::string& text : {longest, "1-" + longest, "1," + longest}) {
    auto d = LengthDistribution::Parse(text, "--len");
    ASSERT_TRUE(d.ok()) << text << ": " << d.status().ToString();
    EXPECT_EQ(d->max(), LengthDistribution::kMaxLength);
  }
}

TEST(LengthDistributionTest, BadTextAndLengthsOutOfRangeNameTheFlag) {
  // Lengths near INT64_MAX used to pass, and their sums with other lengths wrapped negative.
  const std::string over = std::to_string(LengthDistribution::kMaxLength + 1);
  for (const std::string& text : {std::string(""), std::string("0"), std::string("-3"), std::string("x"),
                                  std::string("5-2"), std::string("1-"), std::string("4,,8"), std::string("4,0"),
                                  std::string("9223372036854775807"), std::string("1-9223372036854775807"),
                                  std::string("2,9223372036854775807"), over, "1-" + over, "1," + over,
                                  std::string("99999999999999999999")}) {
    auto d = LengthDistribution::Parse(text, "--prompt-len");
    ASSERT_FALSE(d.ok()) << "'" << text << "' was accepted";
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_NE(d.status().message().find("--prompt-len expects N, A-B or A,B,C (token counts from 1 to 16777216)"),
              std::string::npos)
        << d.status().message();
  }
}

}  // namespace
}  // namespace bmad::tools
