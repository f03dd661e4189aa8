#include "worker/sampling/nucleus.h"

#include <algorithm>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace bmad::sampling {
namespace {

// The definition, by a full sort.
std::optional<Candidate> ReferenceBoundary(std::vector<Candidate> candidates, double mass) {
  std::sort(candidates.begin(), candidates.end(), MoreLikely);
  double sum = 0.0;
  for (const Candidate& c : candidates) {
    sum += c.prob;
    if (sum >= mass) return c;
  }
  return std::nullopt;
}

TEST(MoreLikely, OrdersByScoreThenLowerId) {
  EXPECT_TRUE(MoreLikely({2.0f, 9, 0.0f}, {1.0f, 0, 0.0f}));
  EXPECT_TRUE(MoreLikely({1.0f, 3, 0.0f}, {1.0f, 4, 0.0f}));
  EXPECT_FALSE(MoreLikely({1.0f, 4, 0.0f}, {1.0f, 3, 0.0f}));
  EXPECT_FALSE(MoreLikely({1.0f, 4, 0.0f}, {1.0f, 4, 0.0f}));
}

TEST(NucleusBoundary, MatchesAFullSortOnRandomSets) {
  std::mt19937_64 rng(21);
  for (int trial = 0; trial < 3000; ++trial) {
    const size_t n = rng() % 600;  // both the partition loop and the final sort
    std::vector<Candidate> candidates;
    double total = 0.0;
    for (size_t i = 0; i < n; ++i) {
      // Few distinct scores, so ties are broken by id; small integer probs, so every sum is
      // exact in any order and the comparison with the reference is exact too.
      const float score = static_cast<float>(rng() % 20);
      const float prob = static_cast<float>(1 + rng() % 9);
      candidates.push_back({score, static_cast<int32_t>(i), prob});
      total += prob;
    }
    std::shuffle(candidates.begin(), candidates.end(), rng);
    // Mostly inside (0, total], sometimes exactly a partial sum, sometimes beyond.
    const double mass = static_cast<double>(rng() % static_cast<uint64_t>(total + 3));
    const std::optional<Candidate> expected = ReferenceBoundary(candidates, mass);
    const std::optional<Candidate> got = NucleusBoundary(candidates, mass);
    ASSERT_EQ(got.has_value(), expected.has_value()) << "trial " << trial;
    if (got) {
      ASSERT_EQ(got->id, expected->id) << "trial " << trial << " mass " << mass;
    }
  }
}

TEST(NucleusBoundary, EdgeCases) {
  std::vector<Candidate> none;
  EXPECT_FALSE(NucleusBoundary(none, 1.0).has_value());

  std::vector<Candidate> three = {{1.0f, 0, 1.0f}, {3.0f, 1, 3.0f}, {2.0f, 2, 2.0f}};
  EXPECT_EQ(NucleusBoundary(three, 0.0)->id, 1);   // a non-positive mass: the top token
  EXPECT_EQ(NucleusBoundary(three, 3.0)->id, 1);   // reached exactly by the top token
  EXPECT_EQ(NucleusBoundary(three, 3.5)->id, 2);
  EXPECT_EQ(NucleusBoundary(three, 6.0)->id, 0);
  EXPECT_FALSE(NucleusBoundary(three, 6.5).has_value());  // beyond the total: everything

  std::vector<Candidate> large;
  for (int32_t i = 0; i < 1000; ++i) large.push_back({static_cast<float>(i), i, 1.0f});
  EXPECT_EQ(NucleusBoundary(large, 0.0)->id, 999);
  EXPECT_EQ(NucleusBoundary(large, 10.0)->id, 990);
  EXPECT_EQ(NucleusBoundary(large, 1000.0)->id, 0);
}

}  // namespace
}  // namespace bmad::sampling
