#include "coordinator/http/response_choices.h"

#include <gtest/gtest.h>

namespace bmad::http {
namespace {

TEST(ResponseChoices, IndexIsThePositionOfTheRequestId) {
  const ResponseChoices choices({17, 5, 90});
  EXPECT_EQ(choices.size(), 3u);
  EXPECT_EQ(choices.IndexOf(17), 0u);
  EXPECT_EQ(choices.IndexOf(5), 1u);
  EXPECT_EQ(choices.IndexOf(90), 2u);
  EXPECT_EQ(choices.IndexOf(6), std::nullopt);
}

TEST(ResponseChoices, AllFinishedOnlyAfterEveryChoiceOnce) {
  ResponseChoices choices({1, 2, 3});
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
  ResponseChoices choices({42});
  choices.Finish(0, {12, 7, 8});
  EXPECT_TRUE(choices.all_finished());
  EXPECT_EQ(choices.usage(), (proto::Usage{12, 7, 8}));
}

TEST(ResponseChoices, CachedPromptTokensAreTheFewestAnyChoiceHad) {
  ResponseChoices choices({1, 2});
  choices.Finish(1, {64, 3, 48});
  choices.Finish(0, {64, 2, 32});
  EXPECT_EQ(choices.usage(), (proto::Usage{64, 5, 32}));
}

}  // namespace
}  // namespace bmad::http
