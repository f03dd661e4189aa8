#include "coordinator/router/prompt_length_window.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace bmad::coord {
namespace {

// The nearest-rank quantile by sorting, the definition PromptLengthWindow must match.
int64_t SortedQuantile(std::vector<int64_t> values, double q) {
  std::sort(values.begin(), values.end());
  const double n = static_cast<double>(values.size());
  const size_t k = static_cast<size_t>(std::clamp(std::ceil(q * n - 1e-9), 1.0, n));
  return values[k - 1];
}

TEST(PromptLengthWindowTest, EmptyHasNoQuantile) {
  PromptLengthWindow window(8, 0.8);
  EXPECT_FALSE(window.Quantile().has_value());
  EXPECT_EQ(window.size(), 0);
}

TEST(PromptLengthWindowTest, NearestRankOfOneToTen) {
  PromptLengthWindow window(10, 0.8);
  for (int64_t v = 10; v >= 1; --v) window.Add(v);  // order must not matter
  EXPECT_EQ(window.Quantile(), 8);  // 8 of 10 lengths are <= 8
  PromptLengthWindow median(10, 0.5);
  for (int64_t v = 1; v <= 10; ++v) median.Add(v);
  EXPECT_EQ(median.Quantile(), 5);
}

TEST(PromptLengthWindowTest, SlidesOverTheLastCapacityLengths) {
  PromptLengthWindow window(4, 0.5);
  for (int64_t v : {100, 200, 300, 400}) window.Add(v);
  EXPECT_EQ(window.Quantile(), 200);
  for (int64_t v : {1, 2, 3}) window.Add(v);  // window is now {400, 1, 2, 3}
  EXPECT_EQ(window.Quantile(), 2);
  EXPECT_EQ(window.size(), 4);
  EXPECT_EQ(window.total_added(), 7);
}

TEST(PromptLengthWindowTest, OutOfRangeInputsAreClamped) {
  PromptLengthWindow window(0, std::nan(""));  // capacity 1, quantile 1
  window.Add(-5);
  EXPECT_EQ(window.Quantile(), 0);
  window.Add(9);
  EXPECT_EQ(window.Quantile(), 9);
  EXPECT_EQ(window.size(), 1);
  PromptLengthWindow lowest(5, -2.0);  // quantile 0: the minimum
  for (int64_t v : {5, 3, 8}) lowest.Add(v);
  EXPECT_EQ(lowest.Quantile(), 3);
}

TEST(PromptLengthWindowTest, MatchesSortingOverRandomStreams) {
  std::mt19937_64 rng(42);
  for (size_t capacity : {1u, 2u, 7u, 64u, 300u}) {
    for (double q : {0.0, 0.3, 0.5, 0.8, 0.95, 1.0}) {
      PromptLengthWindow window(static_cast<int64_t>(capacity), q);
      std::deque<int64_t> reference;
      for (int i = 0; i < 2000; ++i) {
        // Few distinct values, so duplicates straddle the split point often.
        const int64_t v = static_cast<int64_t>(rng() % 40) * 16;
        window.Add(v);
        reference.push_back(v);
        if (reference.size() > capacity) reference.pop_front();
        ASSERT_EQ(window.Quantile(),
                  SortedQuantile({reference.begin(), reference.end()}, q))
            << "capacity " << capacity << " q " << q << " step " << i;
      }
    }
  }
}

}  // namespace
}  // namespace bmad::coord
