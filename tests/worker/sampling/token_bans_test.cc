#include "worker/sampling/token_bans.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

namespace bmad::sampling {
namespace {

// Which of `vocab` tokens the bans leave, after `generated`.
std::vector<int> Left(TokenBans& bans, size_t vocab, const std::vector<int32_t>& generated) {
  std::vector<float> scores(vocab, 0.0f);
  bans.Apply(scores, generated);
  std::vector<int> left;
  for (size_t i = 0; i < vocab; ++i) {
    if (!std::isinf(scores[i])) left.push_back(static_cast<int>(i));
  }
  return left;
}

TEST(TokenBans, NothingGivenBansNothing) {
  TokenBans bans;
  EXPECT_FALSE(bans.active());
  EXPECT_EQ(Left(bans, 3, {}), (std::vector<int>{0, 1, 2}));
  TokenBans empty_words({}, {{}, {}});  // empty sequences ban nothing either
  EXPECT_FALSE(empty_words.active());
}

TEST(TokenBans, AllowedTokenIdsLeaveOnlyThemselves) {
  TokenBans bans({4, 1, 4, 99}, {});  // a duplicate, and an id beyond the row (ignored)
  EXPECT_TRUE(bans.active());
  EXPECT_EQ(Left(bans, 6, {}), (std::vector<int>{1, 4}));
  EXPECT_EQ(Left(bans, 6, {1, 4, 4}), (std::vector<int>{1, 4}));
  // Another row width (a vocabulary padded differently) rebuilds the set.
  EXPECT_EQ(Left(bans, 3, {}), (std::vector<int>{1}));
}

TEST(TokenBans, ABadWordsLastTokenIsBannedWhereTheOutputEndsWithTheRest) {
  TokenBans bans({}, {{2}, {0, 1, 3}, {5, 4}});
  EXPECT_EQ(Left(bans, 6, {}), (std::vector<int>{0, 1, 3, 4, 5}));         // 2 always
  EXPECT_EQ(Left(bans, 6, {0}), (std::vector<int>{0, 1, 3, 4, 5}));        // "0 1" not yet
  EXPECT_EQ(Left(bans, 6, {4, 0, 1}), (std::vector<int>{0, 1, 4, 5}));     // 3 would finish "0 1 3"
  EXPECT_EQ(Left(bans, 6, {0, 1, 1}), (std::vector<int>{0, 1, 3, 4, 5}));  // the tail moved on
  EXPECT_EQ(Left(bans, 6, {0, 1, 5}), (std::vector<int>{0, 1, 3, 5}));     // 4 would finish "5 4"
}

TEST(TokenBans, BothKindsTogether) {
  TokenBans bans({1, 2, 3}, {{1, 2}});
  EXPECT_EQ(Left(bans, 5, {}), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(Left(bans, 5, {1}), (std::vector<int>{1, 3}));
}

}  // namespace
}  // namespace bmad::sampling
