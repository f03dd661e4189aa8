#include "coordinator/http/response_choices.h"

#include <gtest/gtest.h>

namespace bmad::http {
namespace {

TEST(ResponseChoices, IndexIsThePositionOfTheRequestId) {
  const ResponseChoices choices({17, 5, 90}, 3);
  EXPECT_EQ(choices.size(), 3u);
  EXPECT_EQ(choices.IndexOf(17), 0u);
  EXPECT_EQ(choices.IndexOf(5), 1u);
  EXPECT_EQ(choices.IndexOf(90), 2u);
  EXPECT_EQ(choices.IndexOf(6), std::nullopt);
}

TEST(ResponseChoices, AllFinishedOnlyAfterEveryChoiceOnce) {
  ResponseChoices choices({1, 2, 3}, 3);
  EXPECT_FALSE(choices.all_finished());
  choices.Finish(1, {10, 4, 0});
  choices.Finish(1, {10, 4, 0});  // again: ignored
  choices.Finish(7, {10, 4, 0});  // no such choice: ignored
  EXPECT_TRUE(choices.finished(1));
  EXPECT_FALSE(choices.finished(0));
  EXPECT_FALSE(choices.all_finished());
  choices.Finish(0, {10, 5, 8});
  EXPECT_FALSE(choices.all_finished());
  choices.Finish(2, {10, 6, 8});
  EXPECT_TRUE(choices.all_finished());
  // The prompt once, the completions summed, the cached prompt tokens every choice had.
  EXPECT_EQ(choices.usage(), (proto::Usage{10, 15, 0}));
}

TEST(ResponseChoices, OneChoiceKeepsItsOwnUsage) {
  ResponseChoices choices({42}, 1);
  choices.Finish(0, {12, 7, 8});
  EXPECT_TRUE(choices.all_finished());
  EXPECT_EQ(choices.usage(), (proto::Usage{12, 7, 8}));
}

TEST(ResponseChoices, CachedPromptTokensAreTheFewestAnyChoiceHad) {
  ResponseChoices choices({1, 2}, 2);
  choices.Finish(1, {64, 3, 48});
  choices.Finish(0, {64, 2, 32});
  EXPECT_EQ(choices.usage(), (proto::Usage{64, 5, 32}));
}

// A batch of two prompts with two choices each: choices 0-1 answer prompt 0, 2-3 prompt 1. Each
// prompt counts once, with the cached tokens all its choices had.
TEST(ResponseChoices, EachPromptOfABatchCountsOnce) {
  ResponseChoices choices({11, 12, 13, 14}, 2);
  choices.Finish(3, {20, 4, 16});
  EXPECT_EQ(choices.usage(), (proto::Usage{20, 4, 16}));  // only prompt 1 so far
  choices.Finish(0, {7, 3, 0});
  choices.Finish(2, {20, 5, 8});
  choices.Finish(1, {7, 6, 0});
  EXPECT_TRUE(choices.all_finished());
  EXPECT_EQ(choices.usage(), (proto::Usage{27, 18, 8}));
}

}  // namespace
}  // namespace bmad::http
