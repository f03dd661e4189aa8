// SimdKernels::attend_block_{f16,f32}: one online-softmax step over a KV block. The F16 form
// (decode reads the cache in place) must give bit for bit what the F32 form gives on the
// converted block (prefill converts once for many queries), or a token's attention would depend
// on whether it was prefilled or decoded; and both must match a double-precision computation.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "common/half.h"
#include "kernels/cpu/simd_kernels.h"

namespace bmad::kernels::cpu {
namespace {

std::vector<const SimdKernels*> AllKernels() {
  std::vector<const SimdKernels*> v = {&ScalarSimdKernels()};
  if (const SimdKernels* avx = Avx512SimdKernels()) v.push_back(avx);
  return v;
}

struct State {
  float max = -std::numeric_limits<float>::infinity();
  float sum = 0.0f;
  std::vector<float> acc;
};

TEST(AttendBlock, HalfAndFloatFormsAgreeBitForBitAndMatchDoublePrecision) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  // Head widths below, at and above one vector, odd ones, and past the register-resident 128.
  for (const int64_t hd : {8, 16, 20, 64, 100, 128, 160}) {
    for (const SimdKernels* simd : AllKernels()) {
      const int64_t blocks = 3, n = 21;  // n > 16: scores in two vector chunks
      std::vector<float> q(static_cast<size_t>(hd));
      for (float& x : q) x = 2.0f * dist(rng);
      std::vector<uint16_t> kh(static_cast<size_t>(blocks * n * hd)), vh(kh.size());
      for (auto& x : kh) x = FloatToHalf(dist(rng));
      for (auto& x : vh) x = FloatToHalf(dist(rng));
      std::vector<float> kf(kh.size()), vf(vh.size());
      for (size_t i = 0; i < kh.size(); ++i) {
        kf[i] = HalfToFloat(kh[i]);
        vf[i] = HalfToFloat(vh[i]);
      }
      const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
      State a, b;
      a.acc.assign(static_cast<size_t>(hd), 0.0f);
      b.acc = a.acc;
      std::vector<float> scores(static_cast<size_t>(n));
      for (int64_t blk = 0; blk < blocks; ++blk) {
        const int64_t count = blk == blocks - 1 ? 5 : n;  // a partly filled last block
        const size_t off = static_cast<size_t>(blk * n * hd);
        simd->attend_block_f16(q.data(), kh.data() + off, vh.data() + off, count, hd, scale,
                               scores.data(), &a.max, &a.sum, a.acc.data());
        simd->attend_block_f32(q.data(), kf.data() + off, vf.data() + off, count, hd, scale,
                               scores.data(), &b.max, &b.sum, b.acc.data());
      }
      ASSERT_EQ(a.max, b.max) << simd->isa << " hd " << hd;
      ASSERT_EQ(a.sum, b.sum) << simd->isa << " hd " << hd;
      ASSERT_EQ(a.acc, b.acc) << simd->isa << " hd " << hd;

      // Softmax-weighted sum of the values, in doubles.
      std::vector<double> s;
      std::vector<size_t> rows;
      for (int64_t blk = 0; blk < blocks; ++blk) {
        const int64_t count = blk == blocks - 1 ? 5 : n;
        for (int64_t t = 0; t < count; ++t) {
          const size_t row = static_cast<size_t>((blk * n + t) * hd);
          double dot = 0;
          for (int64_t d = 0; d < hd; ++d) dot += double(q[static_cast<size_t>(d)]) * kf[row + static_cast<size_t>(d)];
          s.push_back(dot * scale);
          rows.push_back(row);
        }
      }
      double mx = -1e300, total = 0;
      for (double x : s) mx = std::max(mx, x);
      std::vector<double> out(static_cast<size_t>(hd), 0.0);
      for (size_t t = 0; t < s.size(); ++t) {
        const double p = std::exp(s[t] - mx);
        total += p;
        for (int64_t d = 0; d < hd; ++d) out[static_cast<size_t>(d)] += p * vf[rows[t] + static_cast<size_t>(d)];
      }
      EXPECT_NEAR(a.max, mx, 1e-5) << simd->isa << " hd " << hd;
      for (int64_t d = 0; d < hd; ++d) {
        EXPECT_NEAR(a.acc[static_cast<size_t>(d)] / a.sum, out[static_cast<size_t>(d)] / total, 2e-6)
            << simd->isa << " hd " << hd << " d " << d;
      }
    }
  }
}

}  // namespace
}  // namespace bmad::kernels::cpu
