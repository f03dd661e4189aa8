// Benchmark latency summaries: nearest-rank percentiles, and their JSON.
#include "worker/tools/latency_summary.h"

#include <gtest/gtest.h>

#include <numeric>

namespace bmad::tools {
namespace {

TEST(LatencySummaryTest, NearestRankPercentilesOfOneToAHundred) {
  std::vector<double> samples(100);
  std::iota(samples.rbegin(), samples.rend(), 1.0);  // 100 .. 1: the order must not matter
  const LatencySummary s = LatencySummary::Of(samples);
  EXPECT_EQ(s.count, 100u);
  EXPECT_DOUBLE_EQ(s.mean, 50.5);
  EXPECT_DOUBLE_EQ(s.p50, 50);
  EXPECT_DOUBLE_EQ(s.p90, 90);
  EXPECT_DOUBLE_EQ(s.p99, 99);
  EXPECT_DOUBLE_EQ(s.max, 100);
}

TEST(LatencySummaryTest, OneSampleIsEveryPercentileAndNoneIsNullInJson) {
  const LatencySummary one = LatencySummary::Of({0.25});
  EXPECT_DOUBLE_EQ(one.p50, 0.25);
  EXPECT_DOUBLE_EQ(one.p99, 0.25);
  EXPECT_DOUBLE_EQ(one.max, 0.25);
  const LatencySummary none = LatencySummary::Of({});
  EXPECT_EQ(none.count, 0u);
  EXPECT_DOUBLE_EQ(none.p99, 0);
  // No samples (every request failed, say) is no latency, not zero latency.
  EXPECT_EQ(none.Json(1000), "{\"mean\":null,\"p50\":null,\"p90\":null,\"p99\":null,\"max\":null}");
}

TEST(LatencySummaryTest, JsonScalesEveryValue) {
  const LatencySummary s = LatencySummary::Of({0.001, 0.002, 0.003, 0.004});
  EXPECT_EQ(s.Json(1000), "{\"mean\":2.50,\"p50\":2.00,\"p90\":4.00,\"p99\":4.00,\"max\":4.00}");
}

}  // namespace
}  // namespace bmad::tools
