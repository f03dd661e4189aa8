// The CUDA sampling kernel (kernels/cuda/sampling_kernels.cu, the real source) run by the SIMT
// emulator against the plain definition (kernels/sample_row.h): the same token for every row,
// including ties at every boundary, banned tokens, degenerate rows and rows longer than a block.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/sample_row.h"
// Last: the emulator's header defines CUDA's names (threadIdx, __shared__, ...) as macros.
#include "kernels/cuda/kernel_launchers.h"

namespace bmad::cuda {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
using kernels::RowSampling;

launch::RowSamplingArgs ArgsOf(const RowSampling& p) {
  return {p.temperature, p.top_k, p.top_p, p.min_p, p.uniform};
}

// Runs the kernel over `rows` rows of `x` and checks each against SampleRow.
void ExpectSameDraws(const std::vector<float>& x, int64_t n, const std::vector<RowSampling>& params,
                     const std::string& what) {
  const auto rows = static_cast<int64_t>(params.size());
  std::vector<launch::RowSamplingArgs> args;
  for (const RowSampling& p : params) args.push_back(ArgsOf(p));
  std::vector<int32_t> got(params.size(), -2);
  ASSERT_EQ(launch::SampleRows(x.data(), rows, n, args.data(), got.data(), nullptr), 0);
  std::vector<int32_t> order;
  for (int64_t r = 0; r < rows; ++r) {
    const RowSampling& p = params[static_cast<size_t>(r)];
    const int32_t want =
        kernels::SampleRow({x.data() + r * n, static_cast<size_t>(n)}, p, order);
    EXPECT_EQ(got[static_cast<size_t>(r)], want)
        << what << " row " << r << ": n " << n << " temperature " << p.temperature << " top_k "
        << p.top_k << " top_p " << p.top_p << " min_p " << p.min_p << " uniform " << p.uniform;
  }
}

std::vector<float> RandomRows(std::mt19937_64& rng, int64_t rows, int64_t n) {
  std::vector<float> x(static_cast<size_t>(rows * n));
  std::uniform_int_distribution<int> level(-6, 6);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x.data() + r * n;
    const int shape = static_cast<int>(rng() % 3);
    for (int64_t i = 0; i < n; ++i) {
      // Coarse levels: ties at every boundary; normal: distinct; one dominant token.
      row[i] = shape == 0 ? 0.5f * static_cast<float>(level(rng)) : normal(rng);
    }
    if (shape == 2) row[rng() % static_cast<uint64_t>(n)] = 15.0f;
    for (int64_t i = 0; i < n / 8; ++i) row[rng() % static_cast<uint64_t>(n)] = -kInf;
    row[rng() % static_cast<uint64_t>(n)] = 0.25f;  // at least one finite
  }
  return x;
}

std::vector<RowSampling> RandomParams(std::mt19937_64& rng, int64_t rows, int64_t n) {
  const std::vector<int32_t> top_ks = {0, 1, 2, 7, 40, static_cast<int32_t>(n - 1),
                                       static_cast<int32_t>(n)};
  const std::vector<float> top_ps = {1.0f, 0.95f, 0.6f, 0.1f, 0.0f};
  const std::vector<float> min_ps = {0.0f, 0.02f, 0.4f, 1.0f};
  const std::vector<float> temperatures = {0.0f, 0.25f, 0.8f, 1.0f, 3.0f};
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::vector<RowSampling> params;
  for (int64_t r = 0; r < rows; ++r) {
    RowSampling p;
    p.temperature = temperatures[rng() % temperatures.size()];
    p.top_k = top_ks[rng() % top_ks.size()];
    p.top_p = top_ps[rng() % top_ps.size()];
    p.min_p = min_ps[rng() % min_ps.size()];
    const int edge = static_cast<int>(rng() % 6);
    p.uniform = edge == 0 ? 0.0 : edge == 1 ? 1.0 - 0x1.0p-53 : uniform(rng);
    params.push_back(p);
  }
  return params;
}

TEST(CudaSamplingEmulated, SmallRowsEveryFilterCombination) {
  std::mt19937_64 rng(11);
  for (int64_t n : {1, 2, 5, 33, 200}) {
    for (int round = 0; round < 3; ++round) {
      const int64_t rows = 10;
      ExpectSameDraws(RandomRows(rng, rows, n), n, RandomParams(rng, rows, n),
                      "round " + std::to_string(round));
    }
  }
}

TEST(CudaSamplingEmulated, RowsLongerThanABlock) {
  // 1024 threads, several ids each: the id-order ranks and the running sums cross threads.
  std::mt19937_64 rng(12);
  for (int64_t n : {1500, 5000}) {
    const int64_t rows = 3;
    ExpectSameDraws(RandomRows(rng, rows, n), n, RandomParams(rng, rows, n), "long");
  }
}

TEST(CudaSamplingEmulated, TiesAtTheBoundariesGoToTheLowerIds) {
  const int64_t n = 3000;
  // Every token equal: top-k 5 keeps ids 0-4; top-p 0.5 keeps the first half; a uniform of
  // 0.5 lands on the middle of what is kept.
  const std::vector<float> flat(static_cast<size_t>(n), 1.0f);
  for (const RowSampling& p : {RowSampling{1.0f, 5, 1.0f, 0.0f, 0.5},
                               RowSampling{1.0f, 0, 0.5f, 0.0f, 0.5},
                               RowSampling{1.0f, 0, 0.5f, 0.0f, 0.999},
                               RowSampling{1.0f, 100, 0.5f, 0.0f, 0.999},
                               RowSampling{0.0f, 0, 1.0f, 0.0f, 0.0}}) {
    ExpectSameDraws(flat, n, {p}, "flat");
  }
  std::vector<int32_t> order;
  EXPECT_EQ(kernels::SampleRow(flat, {1.0f, 5, 1.0f, 0.0f, 0.5}, order), 2);
  EXPECT_EQ(kernels::SampleRow(flat, {1.0f, 0, 0.5f, 0.0f, 0.999}, order), 1498);
}

// Parameters the host sampler would have sanitised mean what they mean there: a temperature of
// +inf or NaN is greedy, a NaN min-p is off, a min-p above 1 is 1.
TEST(CudaSamplingEmulated, NonFiniteParametersMeanWhatTheHostSamplerMakesOfThem) {
  const int64_t n = 300;
  std::mt19937_64 rng(13);
  const std::vector<float> one = RandomRows(rng, 1, n);
  std::vector<float> x;
  std::vector<RowSampling> params = {{kInf, 0, 1.0f, 0.0f, 0.7},
                                     {NAN, 5, 0.5f, 0.0f, 0.7},
                                     {1.0f, 0, 1.0f, NAN, 0.7},
                                     {1.0f, 0, 1.0f, 3.0f, 0.7},
                                     {1.0f, 0, NAN, 0.0f, 0.7}};
  for (size_t r = 0; r < params.size(); ++r) x.insert(x.end(), one.begin(), one.end());
  ExpectSameDraws(x, n, params, "non-finite");
  std::vector<int32_t> order;
  const int32_t argmax = kernels::SampleRow(one, RowSampling{}, order);
  EXPECT_EQ(kernels::SampleRow(one, params[0], order), argmax);
  EXPECT_EQ(kernels::SampleRow(one, params[3], order), argmax);  // only weight 1 is kept
}

TEST(CudaSamplingEmulated, RefusesRowsTheHostSamplerRefuses) {
  const int64_t n = 2100;
  std::vector<float> x(static_cast<size_t>(4 * n), 0.5f);
  x[2099] = NAN;         // row 0
  x[n + 1500] = kInf;    // row 1
  for (int64_t i = 0; i < n; ++i) {
    x[static_cast<size_t>(2 * n + i)] = -kInf;  // row 2: nothing above -inf
    x[static_cast<size_t>(3 * n + i)] = -kInf;
  }
  x[static_cast<size_t>(3 * n + 2047)] = -5.0f;  // row 3: one token left
  const RowSampling p{0.7f, 0, 0.9f, 0.0f, 0.3};
  std::vector<launch::RowSamplingArgs> args(4, ArgsOf(p));
  std::vector<int32_t> got(4, -2);
  ASSERT_EQ(launch::SampleRows(x.data(), 4, n, args.data(), got.data(), nullptr), 0);
  EXPECT_EQ(got, (std::vector<int32_t>{-1, -1, -1, 2047}));
}

}  // namespace
}  // namespace bmad::cuda
