#include "worker/sampling/penalties.h"

#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

namespace bmad::sampling {
namespace {

// Logits after applying `penalties` for the given history.
std::vector<float> Penalized(const Penalties& penalties, std::vector<float> logits,
                             const std::vector<int32_t>& prompt,
                             const std::vector<int32_t>& generated) {
  TokenOccurrences occurrences;
  EXPECT_TRUE(
      occurrences.Update(prompt, generated, static_cast<int32_t>(logits.size())).ok());
  ApplyPenalties(penalties, occurrences, logits);
  return logits;
}

TEST(Penalties, ActiveOnlyWhenSomethingIsSet) {
  EXPECT_FALSE(Penalties{}.active());
  EXPECT_TRUE((Penalties{1.1f, 0.0f, 0.0f}.active()));
  EXPECT_TRUE((Penalties{1.0f, -0.5f, 0.0f}.active()));
  EXPECT_TRUE((Penalties{1.0f, 0.0f, 0.25f}.active()));
}

TEST(Penalties, RepetitionDividesPositiveAndMultipliesNegativeOverPromptAndOutput) {
  // Token 0 in the prompt, token 1 in the output, tokens 2 and 3 unseen.
  const std::vector<float> out =
      Penalized({2.0f, 0.0f, 0.0f}, {3.0f, -1.5f, 5.0f, -2.0f}, {0}, {1, 1});
  EXPECT_EQ(out[0], 1.5f);   // 3 / 2
  EXPECT_EQ(out[1], -3.0f);  // -1.5 * 2
  EXPECT_EQ(out[2], 5.0f);
  EXPECT_EQ(out[3], -2.0f);
}

TEST(Penalties, RepetitionBelowOneEncouragesRepeats) {
  const std::vector<float> out = Penalized({0.5f, 0.0f, 0.0f}, {3.0f, -1.5f}, {}, {0, 1});
  EXPECT_EQ(out[0], 6.0f);
  EXPECT_EQ(out[1], -0.75f);
}

TEST(Penalties, RepetitionLeavesZeroAndMinusInfinityAlone) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> out = Penalized({1.5f, 0.0f, 0.0f}, {0.0f, -inf}, {0, 1}, {});
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], -inf);
}

TEST(Penalties, AFiniteLogitStaysFiniteUnderExtremePenalties) {
  // A tiny repetition penalty used to overflow 10 / 1e-38 to +inf, which the sampler refuses
  // mid-generation; the logit now stops at the largest float, in the penalty's direction.
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> out = Penalized({1e-38f, 0.0f, 0.0f}, {10.0f, -10.0f, 1.0f}, {0, 1}, {});
  EXPECT_EQ(out[0], std::numeric_limits<float>::max());
  EXPECT_EQ(out[1], -1e-37f);  // -10 * 1e-38
  EXPECT_EQ(out[2], 1.0f);
  out = Penalized({1e38f, 0.0f, 0.0f}, {-10.0f}, {0}, {});
  EXPECT_EQ(out[0], -std::numeric_limits<float>::max());
  out = Penalized({1e-38f, 0.0f, 0.0f}, {inf, nan}, {0, 1}, {});  // broken logits stay broken
  EXPECT_EQ(out[0], inf);
  EXPECT_TRUE(std::isnan(out[1]));
}

TEST(Penalties, PresenceIsOncePerOutputTokenAndIgnoresThePrompt) {
  const std::vector<float> out =
      Penalized({1.0f, 0.5f, 0.0f}, {1.0f, 1.0f, 1.0f, 1.0f}, {0, 3}, {1, 2, 2, 2, 3});
  EXPECT_EQ(out[0], 1.0f);  // prompt only
  EXPECT_EQ(out[1], 0.5f);  // once
  EXPECT_EQ(out[2], 0.5f);  // three times: still once
  EXPECT_EQ(out[3], 0.5f);  // prompt and output
}

TEST(Penalties, FrequencyScalesWithTheOutputCount) {
  const std::vector<float> out =
      Penalized({1.0f, 0.0f, 0.25f}, {1.0f, 1.0f, 1.0f}, {0, 0, 0}, {1, 2, 2, 2});
  EXPECT_EQ(out[0], 1.0f);   // prompt occurrences do not count
  EXPECT_EQ(out[1], 0.75f);  // 1 - 0.25 * 1
  EXPECT_EQ(out[2], 0.25f);  // 1 - 0.25 * 3
}

TEST(Penalties, NegativePresenceAndFrequencyRaiseLogits) {
  const std::vector<float> out = Penalized({1.0f, -0.5f, -0.25f}, {0.0f, 0.0f}, {}, {1, 1});
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 1.0f);  // 0 + 0.5 + 0.25 * 2
}

TEST(Penalties, AllThreeCombineRepetitionFirst) {
  // Token 0: prompt once, output twice. (4 / 2) - 0.5 - 0.25 * 2 = 1.
  // Token 1: output once, negative. (-1 * 2) - 0.5 - 0.25 = -2.75.
  const std::vector<float> out =
      Penalized({2.0f, 0.5f, 0.25f}, {4.0f, -1.0f, 7.0f}, {0}, {0, 1, 0});
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.75f);
  EXPECT_EQ(out[2], 7.0f);
}

}  // namespace
}  // namespace bmad::sampling
