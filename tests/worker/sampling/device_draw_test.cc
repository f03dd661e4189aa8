// A draw made where the logits are (Sampler::PrepareDeviceDraw, then Backend::SampleRows, whose
// definition is kernels::SampleRow) gives the token the host sampler gives for the same seed,
// and a draw thrown away leaves the generator where it was.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/sample_row.h"
#include "tests/worker/sampling/sampling_test_values.h"
#include "worker/sampling/sampler.h"

namespace bmad::sampling {
namespace {

using testing::kInf;
using testing::kNoTokens;

kernels::RowSampling RowOf(const DeviceDraw& d) {
  return {d.temperature, d.top_k, d.top_p, d.min_p, d.uniform};
}

int32_t DrawOnDevice(Sampler& s, const std::vector<float>& logits) {
  std::vector<int32_t> order;
  const int32_t token = kernels::SampleRow(logits, RowOf(s.PrepareDeviceDraw()), order);
  s.DrawnOnDevice();
  return token;
}

int32_t DrawOnHost(Sampler& s, const std::vector<float>& logits) {
  const Result<SampleResult> r = s.Sample(logits, kNoTokens, kNoTokens);
  return r.ok() ? r->token_id : -1;
}

proto::SamplingParams Params(float temperature, int32_t top_k, float top_p, float min_p,
                             uint64_t seed) {
  proto::SamplingParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.seed = seed;
  p.has_seed = true;
  return p;
}

// Logits with the shapes that make the filters interesting: repeated values (ties at every
// boundary), some -inf, sometimes one dominant token.
std::vector<float> RandomLogits(std::mt19937_64& rng, size_t n) {
  std::vector<float> x(n);
  std::uniform_int_distribution<int> level(-8, 8);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  const bool coarse = rng() % 2 == 0;  // few distinct values: many ties
  for (float& v : x) v = coarse ? 0.5f * static_cast<float>(level(rng)) : normal(rng);
  for (size_t i = 0; i < n / 10; ++i) x[rng() % n] = -kInf;
  if (rng() % 4 == 0) x[rng() % n] = 12.0f;
  x[rng() % n] = 1.0f;  // at least one finite
  return x;
}

TEST(DeviceDrawTest, GivesTheHostSamplersTokensForTheSameSeed) {
  std::mt19937_64 rng(2026);
  const std::vector<int32_t> top_ks = {0, 1, 3, 17, 1000};
  const std::vector<float> top_ps = {1.0f, 0.9f, 0.5f, 0.05f, 0.0f};
  const std::vector<float> min_ps = {0.0f, 0.05f, 0.3f, 1.0f};
  const std::vector<float> temperatures = {0.0f, 0.3f, 1.0f, 2.5f};
  int compared = 0, sampled = 0;
  for (int c = 0; c < 3000; ++c) {
    const size_t n = 1 + rng() % 300;
    const std::vector<float> logits = RandomLogits(rng, n);
    const proto::SamplingParams p =
        Params(temperatures[rng() % temperatures.size()], top_ks[rng() % top_ks.size()],
               top_ps[rng() % top_ps.size()], min_ps[rng() % min_ps.size()], rng());
    Sampler host(p, 0), device(p, 0);
    ASSERT_TRUE(device.device_samplable(0));
    for (int step = 0; step < 3; ++step) {  // the generators stay in step
      const int32_t want = DrawOnHost(host, logits);
      ASSERT_GE(want, 0);
      EXPECT_EQ(DrawOnDevice(device, logits), want)
          << "case " << c << " step " << step << ": n " << n << " temperature " << p.temperature
          << " top_k " << p.top_k << " top_p " << p.top_p << " min_p " << p.min_p;
      ++compared;
      sampled += p.temperature > 0.0f;
    }
  }
  EXPECT_GT(sampled, compared / 2);
}

TEST(DeviceDrawTest, RefusesWhatTheHostSamplerRefuses) {
  std::vector<int32_t> order;
  const kernels::RowSampling sample{1.0f, 0, 1.0f, 0.0f, 0.5};
  const kernels::RowSampling greedy{};
  for (const kernels::RowSampling& p : {sample, greedy}) {
    EXPECT_EQ(kernels::SampleRow(std::vector<float>{1.0f, NAN, 2.0f}, p, order), -1);
    EXPECT_EQ(kernels::SampleRow(std::vector<float>{1.0f, kInf}, p, order), -1);
    EXPECT_EQ(kernels::SampleRow(std::vector<float>{-kInf, -kInf}, p, order), -1);
    EXPECT_EQ(kernels::SampleRow(std::vector<float>{-kInf, -3.0f}, p, order), 1);
  }
}

TEST(DeviceDrawTest, WalksInIdOrderWithoutTopKAndMostLikelyFirstWithIt) {
  // Weights 1, e^-1, 1 (ids 0, 1, 2): total 2.37. A uniform of 0.45 lands at 1.07: past token
  // 0 (1.0) in id order, so token 1; most likely first (0, 2, 1) it would be token 2.
  const std::vector<float> logits = {0.0f, -1.0f, 0.0f};
  std::vector<int32_t> order;
  EXPECT_EQ(kernels::SampleRow(logits, {1.0f, 0, 1.0f, 0.0f, 0.45}, order), 1);
  // Top-k below the row's length walks most likely first, even when it cuts nothing finite.
  const std::vector<float> with_banned = {0.0f, -1.0f, 0.0f, -kInf};
  EXPECT_EQ(kernels::SampleRow(with_banned, {1.0f, 3, 1.0f, 0.0f, 0.45}, order), 2);
  EXPECT_EQ(kernels::SampleRow(with_banned, {1.0f, 0, 1.0f, 0.0f, 0.45}, order), 1);
  // Top-2 keeps 0 and 2 (weights 1 and 1): 0.45 lands in token 0, 0.6 in token 2.
  EXPECT_EQ(kernels::SampleRow(logits, {1.0f, 2, 1.0f, 0.0f, 0.45}, order), 0);
  EXPECT_EQ(kernels::SampleRow(logits, {1.0f, 2, 1.0f, 0.0f, 0.6}, order), 2);
  EXPECT_EQ(kernels::SampleRow(logits, {1.0f, 0, 1.0f, 0.0f, 0.0}, order), 0);
  // Top-k of at least the row's length is off: id order again.
  EXPECT_EQ(kernels::SampleRow(logits, {1.0f, 3, 1.0f, 0.0f, 0.45}, order), 1);
  // Top-p 0 keeps the most likely token (the lower id of the two tied).
  EXPECT_EQ(kernels::SampleRow(logits, {1.0f, 0, 0.0f, 0.0f, 0.99}, order), 0);
  // Min-p 1 keeps only weight-1 tokens: 0 and 2.
  EXPECT_EQ(kernels::SampleRow(logits, {1.0f, 0, 1.0f, 1.0f, 0.99}, order), 2);
}

TEST(DeviceDrawTest, AThrownAwayDrawLeavesTheGeneratorWhereItWas) {
  const std::vector<float> logits = {0.1f, 0.4f, 0.2f, 0.3f, -0.5f, 0.0f};
  const proto::SamplingParams p = Params(1.0f, 0, 1.0f, 0.0f, 99);
  Sampler reference(p, 0), device(p, 0), mixed(p, 0);
  std::vector<int32_t> want;
  for (int i = 0; i < 20; ++i) want.push_back(DrawOnHost(reference, logits));
  for (int i = 0; i < 20; ++i) {
    // The step that would have drawn this token is thrown away, on the device, then redone.
    (void)device.PrepareDeviceDraw();
    EXPECT_EQ(DrawOnDevice(device, logits), want[static_cast<size_t>(i)]) << i;
    // Or redone on the host.
    (void)mixed.PrepareDeviceDraw();
    EXPECT_EQ(DrawOnHost(mixed, logits), want[static_cast<size_t>(i)]) << i;
  }
}

TEST(DeviceDrawTest, GreedyDrawsNoUniform) {
  const std::vector<float> logits = {0.1f, 0.4f, 0.2f};
  Sampler greedy(Params(0.0f, 0, 1.0f, 0.0f, 5), 0);
  const DeviceDraw d = greedy.PrepareDeviceDraw();
  EXPECT_EQ(d.temperature, 0.0f);
  EXPECT_EQ(d.uniform, 0.0);
  std::vector<int32_t> order;
  EXPECT_EQ(kernels::SampleRow(logits, RowOf(d), order), 1);
}

TEST(DeviceDrawTest, PenaltiesAndLogprobsStayOnTheHost) {
  proto::SamplingParams p = Params(1.0f, 0, 1.0f, 0.0f, 5);
  p.presence_penalty = 0.5f;
  EXPECT_FALSE(Sampler(p, 0).device_samplable(0));
  p = Params(1.0f, 0, 1.0f, 0.0f, 5);
  p.logprobs = true;
  EXPECT_FALSE(Sampler(p, 0).device_samplable(0));
  EXPECT_TRUE(Sampler(Params(0.7f, 40, 0.9f, 0.05f, 5), 0).device_samplable(0));
}

}  // namespace
}  // namespace bmad::sampling
