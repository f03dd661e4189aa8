// Rounding activations to Q8_0 (kernels/q8_0.h), and the CPU's integer form of it
// (SimdKernels::quantize_q8_rows), which must hold exactly the same values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/half.h"
#include "kernels/cpu/simd_kernels.h"
#include "kernels/q8_0.h"
#include "tests/support/random_floats.h"

namespace bmad::kernels {
namespace {

using bmad::testing::RandomFloats;

TEST(Q8Activations, ScaleIsTheF16OfMaxOver127AndTiesRoundToEven) {
  std::vector<float> x(32);
  x[0] = -127.0f;  // max |x| = 127: scale 1, q = x rounded
  for (int j = 1; j < 32; ++j) x[static_cast<size_t>(j)] = static_cast<float>(j) - 15.5f;
  const ActivationBlockQ8_0 b = QuantizeActivationBlockQ8_0(x.data());
  EXPECT_EQ(b.scale, 1.0f);
  EXPECT_EQ(b.q[0], -127);
  EXPECT_EQ(b.q[1], -14);  // -14.5 -> -14 (even)
  EXPECT_EQ(b.q[2], -14);  // -13.5 -> -14 (even)
  EXPECT_EQ(b.q[16], 0);   // 0.5 -> 0
  EXPECT_EQ(b.q[17], 2);   // 1.5 -> 2

  std::vector<float> y = RandomFloats(32, 3, 0.3f);
  const ActivationBlockQ8_0 c = QuantizeActivationBlockQ8_0(y.data());
  float amax = 0;
  for (float v : y) amax = std::fmax(amax, std::fabs(v));
  EXPECT_EQ(c.scale, RoundToHalf(amax / 127.0f));
}

TEST(Q8Activations, RoundTripStaysWithinHalfAStepAndKeepsZeros) {
  std::vector<float> x = RandomFloats(32 * 9, 5, 2.0f);
  for (int j = 0; j < 32; ++j) x[static_cast<size_t>(32 * 4 + j)] = 0.0f;  // an all-zero block
  std::vector<float> r(x.size());
  RoundToQ8_0(x.data(), static_cast<int64_t>(x.size()), r.data());
  for (size_t b = 0; b < 9; ++b) {
    float amax = 0;
    for (size_t j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[b * 32 + j]));
    for (size_t j = 0; j < 32; ++j) {
      // Half a step, plus the F16 rounding of the scale (relative 2^-11 of up to 127 steps).
      EXPECT_LE(std::fabs(r[b * 32 + j] - x[b * 32 + j]), amax / 127.0f * (0.5f + 127.0f / 2048.0f))
          << b << "," << j;
    }
  }
  for (size_t j = 0; j < 32; ++j) EXPECT_EQ(r[32 * 4 + j], 0.0f);
  // In place gives the same.
  std::vector<float> in_place = x;
  RoundToQ8_0(in_place.data(), static_cast<int64_t>(in_place.size()), in_place.data());
  EXPECT_EQ(in_place, r);
}

TEST(Q8Activations, NonFiniteAndTinyInputsGiveDefinedValues) {
  std::vector<float> x(32, 0.25f);
  x[3] = std::nanf("");
  x[7] = -1.0f;
  const ActivationBlockQ8_0 nan_block = QuantizeActivationBlockQ8_0(x.data());
  EXPECT_EQ(nan_block.scale, RoundToHalf(1.0f / 127.0f));  // NaN is skipped by the max
  EXPECT_EQ(nan_block.q[3], 0);
  EXPECT_EQ(nan_block.q[7], -127);
  // A max so small that 127 / max overflows: every q clamps into [-127, 127] (and the F16 scale
  // is 0, so the block stands for zeros).
  std::vector<float> tiny(32, 0.0f);
  tiny[0] = 1e-38f;
  tiny[1] = -1e-38f;
  const ActivationBlockQ8_0 tiny_block = QuantizeActivationBlockQ8_0(tiny.data());
  EXPECT_EQ(tiny_block.scale, 0.0f);
  EXPECT_EQ(tiny_block.q[0], 127);
  EXPECT_EQ(tiny_block.q[1], -127);
  EXPECT_EQ(tiny_block.q[2], 0);
}

TEST(Q8Activations, IntegerRecordsHoldTheSameValues) {
  const cpu::SimdKernels* simd = cpu::Avx512SimdKernels();
  if (simd == nullptr || simd->quantize_q8_rows == nullptr) {
    GTEST_SKIP() << "this CPU has no AVX-512 VNNI, so the integer Q8_0 kernels are not used";
  }
  const int64_t m = 3, k = 96, nb = k / 32;
  std::vector<float> x = RandomFloats(static_cast<size_t>(m * k), 7, 4.0f);
  for (int j = 0; j < 32; ++j) x[static_cast<size_t>(k + j)] = 0.0f;  // row 1, block 0
  // Row 2, block 1: max |x| = 127, so x * 127 / max is x and the halves are ties (to even).
  for (int j = 0; j < 32; ++j) x[static_cast<size_t>(2 * k + 32 + j)] = j == 0 ? 127.0f : j - 15.5f;
  // Row 0, block 2: a NaN, an infinity; row 2, block 2: a max too small for 127 / max.
  x[static_cast<size_t>(64 + 5)] = std::nanf("");
  x[static_cast<size_t>(64 + 9)] = -INFINITY;
  for (int j = 0; j < 32; ++j) x[static_cast<size_t>(2 * k + 64 + j)] = j % 3 == 0 ? -2e-38f : 1e-38f;
  std::vector<uint8_t> rec(cpu::Q8ActivationRowBytes(k) * static_cast<size_t>(m), 0xcd);
  simd->quantize_q8_rows(x.data(), m, k, rec.data());
  for (int64_t r = 0; r < m; ++r) {
    const uint8_t* base = rec.data() + static_cast<size_t>(r) * cpu::Q8ActivationRowBytes(k);
    for (int64_t b = 0; b < nb; ++b) {
      const ActivationBlockQ8_0 want = QuantizeActivationBlockQ8_0(x.data() + r * k + b * 32);
      float scale;
      int32_t offset;
      std::memcpy(&scale, base + b * 4, 4);
      std::memcpy(&offset, base + nb * 4 + b * 4, 4);
      const auto* q = reinterpret_cast<const int8_t*>(base + nb * 8 + b * 32);
      EXPECT_EQ(scale, want.scale) << r << "," << b;
      int32_t sum = 0;
      for (int j = 0; j < 32; ++j) {
        EXPECT_EQ(q[j], want.q[j]) << r << "," << b << "," << j;
        sum += want.q[j];
      }
      EXPECT_EQ(offset, -128 * sum) << r << "," << b;
    }
  }
}

}  // namespace
}  // namespace bmad::kernels
