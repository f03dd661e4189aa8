#include "worker/sampling/token_occurrences.h"

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace bmad::sampling {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAreArray;

// Counts from scratch, the obvious way, for comparison.
void ExpectMatchesRecount(const TokenOccurrences& occurrences, const std::vector<int32_t>& prompt,
                          const std::vector<int32_t>& generated, int32_t vocab) {
  std::map<int32_t, uint32_t> counts;
  std::vector<int32_t> seen;
  for (int32_t t : prompt) seen.push_back(t);
  for (int32_t t : generated) {
    ++counts[t];
    seen.push_back(t);
  }
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  ASSERT_THAT(occurrences.seen_tokens(), UnorderedElementsAreArray(seen));
  for (int32_t t = 0; t < vocab; ++t) {
    const bool in_prompt = std::find(prompt.begin(), prompt.end(), t) != prompt.end();
    ASSERT_EQ(occurrences.in_prompt(t), in_prompt) << "token " << t;
    ASSERT_EQ(occurrences.generated_count(t), counts.count(t) ? counts[t] : 0u) << "token " << t;
  }
}

TEST(TokenOccurrences, CountsPromptAndOutputSeparately) {
  TokenOccurrences occurrences;
  const std::vector<int32_t> prompt = {3, 1, 3};
  const std::vector<int32_t> generated = {1, 4, 4, 4};
  ASSERT_TRUE(occurrences.Update(prompt, generated, 8).ok());
  EXPECT_THAT(occurrences.seen_tokens(), ElementsAre(3, 1, 4));  // order of first appearance
  EXPECT_TRUE(occurrences.in_prompt(3));
  EXPECT_TRUE(occurrences.in_prompt(1));
  EXPECT_FALSE(occurrences.in_prompt(4));
  EXPECT_EQ(occurrences.generated_count(3), 0u);  // prompt occurrences are not output counts
  EXPECT_EQ(occurrences.generated_count(1), 1u);
  EXPECT_EQ(occurrences.generated_count(4), 3u);
  EXPECT_EQ(occurrences.generated_count(0), 0u);
}

TEST(TokenOccurrences, IncrementalUpdatesMatchARecountThroughGrowthShrinkAndPromptChange) {
  std::mt19937_64 rng(7);
  constexpr int32_t kVocab = 12;
  std::uniform_int_distribution<int32_t> token(0, kVocab - 1);
  TokenOccurrences occurrences;
  std::vector<int32_t> prompt = {1, 2, 3};
  std::vector<int32_t> generated;
  for (int step = 0; step < 300; ++step) {
    const int action = static_cast<int>(rng() % 10);
    if (action < 7) {
      generated.push_back(token(rng));  // the usual step: one more token
    } else if (action == 7 && !generated.empty()) {
      generated.resize(rng() % generated.size());  // rollback: shorter output
    } else if (action == 8) {
      prompt.push_back(token(rng));  // another prompt (different length)
    }
    ASSERT_TRUE(occurrences.Update(prompt, generated, kVocab).ok());
    ExpectMatchesRecount(occurrences, prompt, generated, kVocab);
  }
}

TEST(TokenOccurrences, RejectsOutOfVocabularyIdsAndRecoversAfterwards) {
  TokenOccurrences occurrences;
  Status status = occurrences.Update(std::vector<int32_t>{1, 9}, {}, 5);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("prompt"));
  EXPECT_THAT(status.message(), HasSubstr("token id 9 at position 1"));
  EXPECT_TRUE(occurrences.seen_tokens().empty());

  status = occurrences.Update(std::vector<int32_t>{1}, std::vector<int32_t>{2, -1}, 5);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("generated tokens"));
  EXPECT_THAT(status.message(), HasSubstr("token id -1 at position 1"));

  ASSERT_TRUE(occurrences.Update(std::vector<int32_t>{1}, std::vector<int32_t>{2, 2}, 5).ok());
  ExpectMatchesRecount(occurrences, {1}, {2, 2}, 5);
  EXPECT_EQ(occurrences.Update({}, {}, 0).code(), StatusCode::kInvalidArgument);
}

TEST(TokenOccurrences, AChangedVocabularyRecounts) {
  TokenOccurrences occurrences;
  ASSERT_TRUE(occurrences.Update(std::vector<int32_t>{0}, std::vector<int32_t>{3}, 4).ok());
  ASSERT_TRUE(occurrences.Update(std::vector<int32_t>{0}, std::vector<int32_t>{3, 9}, 10).ok());
  ExpectMatchesRecount(occurrences, {0}, {3, 9}, 10);
}

TEST(TokenOccurrences, ResetForgetsEverything) {
  TokenOccurrences occurrences;
  ASSERT_TRUE(occurrences.Update(std::vector<int32_t>{0}, std::vector<int32_t>{3, 3}, 4).ok());
  occurrences.Reset();
  EXPECT_TRUE(occurrences.seen_tokens().empty());
  EXPECT_EQ(occurrences.generated_count(3), 0u);
  EXPECT_FALSE(occurrences.in_prompt(0));
  // Same lengths, different content: only visible after Reset (documented contract).
  ASSERT_TRUE(occurrences.Update(std::vector<int32_t>{1}, std::vector<int32_t>{2, 2}, 4).ok());
  ExpectMatchesRecount(occurrences, {1}, {2, 2}, 4);
}

}  // namespace
}  // namespace bmad::sampling
