// PromptLogprobScorer: a prompt token's raw log-probability, its rank and the alternatives.
#include "worker/sampling/prompt_logprob.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace bmad::sampling {
namespace {

// log_softmax, in double.
std::vector<double> LogSoftmax(const std::vector<float>& row) {
  double max = -std::numeric_limits<double>::infinity();
  for (float v : row) max = std::max(max, double(v));
  double sum = 0;
  for (float v : row) sum += std::exp(double(v) - max);
  std::vector<double> out;
  for (float v : row) out.push_back(double(v) - max - std::log(sum));
  return out;
}

TEST(PromptLogprobScorer, LogprobRankAndAlternativesOfTheRawDistribution) {
  const std::vector<float> row = {0.5f, 3.0f, -1.0f, 3.0f, 2.0f, -std::numeric_limits<float>::infinity()};
  const std::vector<double> expected = LogSoftmax(row);
  PromptLogprobScorer scorer;
  Result<PromptTokenLogprob> s = scorer.Score(row, 4, 3);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_NEAR(s->logprob, expected[4], 1e-6);
  EXPECT_EQ(s->rank, 3u);  // behind the two 3.0s
  ASSERT_EQ(s->top.size(), 3u);
  // Most likely first; equal logits by the lower id.
  EXPECT_EQ(s->top[0].first, 1);
  EXPECT_EQ(s->top[1].first, 3);
  EXPECT_EQ(s->top[2].first, 4);
  EXPECT_NEAR(s->top[0].second, expected[1], 1e-6);
  EXPECT_FLOAT_EQ(s->top[2].second, s->logprob);
  // The most likely token is rank 1 (a tie shares it); no alternatives asked, none given.
  s = scorer.Score(row, 3, 0);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->rank, 1u);
  EXPECT_TRUE(s->top.empty());
  // A token the model rules out entirely: -inf, last.
  s = scorer.Score(row, 5, 10);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->logprob, -std::numeric_limits<float>::infinity());
  EXPECT_EQ(s->rank, 6u);
  EXPECT_EQ(s->top.size(), row.size());  // at most the vocabulary
}

TEST(PromptLogprobScorer, RowsWithoutADistributionAndTokensOutsideAreErrors) {
  PromptLogprobScorer scorer;
  std::vector<float> row = {0.0f, std::numeric_limits<float>::quiet_NaN()};
  EXPECT_EQ(scorer.Score(row, 0, 1).status().code(), StatusCode::kInternal);
  row = {std::numeric_limits<float>::infinity(), 0.0f};
  EXPECT_EQ(scorer.Score(row, 1, 1).status().code(), StatusCode::kInternal);
  row = {-std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()};
  EXPECT_EQ(scorer.Score(row, 1, 1).status().code(), StatusCode::kInternal);
  row = {0.0f, 1.0f};
  EXPECT_EQ(scorer.Score(row, 2, 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(scorer.Score(row, -1, 1).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace bmad::sampling
