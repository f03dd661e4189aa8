// Q4_0, Q5_0, Q4_1, Q5_1 and BF16 against llama.cpp itself: the blocks ggml's quantizer writes
// (llama.cpp b9586, a small harness linked to libggml; the inputs are the integer-hash values of
// Input() below), the values ggml's dequantizer reads from them, and the products ggml's CPU
// vec_dot computes with activations it rounded to Q8_0 (Q8_1 for the _1 types; BF16: to BF16). Then ggml's BF16 rounding of
// chosen bit patterns, and the vector rounding against the portable one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/bfloat16.h"
#include "common/half.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/simd_kernels.h"
#include "kernels/legacy_quants.h"
#include "kernels/reference/reference_backend.h"
#include "tests/support/ggml_fixture.h"

namespace bmad::kernels {
namespace legacy_quants_test {
namespace {

constexpr int kFixtureElements = 96;  // three 32-weight blocks

using bmad::testing::FromHex;

float Input(uint32_t i, uint32_t salt, float scale) { return bmad::testing::GgmlFixtureInput(i, salt, scale); }

// Block 0 mixed signs; block 1 all positive (its largest magnitude is positive, so the scale is
// negative); block 2 one large negative weight.
std::vector<float> FixtureWeights() {
  std::vector<float> w(kFixtureElements);
  for (uint32_t i = 0; i < kFixtureElements; ++i) w[i] = Input(i, 1, 0.05f);
  for (uint32_t i = 32; i < 64; ++i) w[i] = 0.01f + Input(i, 3, 0.02f) * Input(i, 3, 0.02f) * 10;
  w[70] = -0.2f;
  return w;
}

std::vector<float> FixtureActivations() {
  std::vector<float> a(kFixtureElements);
  for (uint32_t i = 0; i < kFixtureElements; ++i) a[i] = Input(i, 2, 3.0f);
  return a;
}

// ggml_quantize_chunk's output for the fixture weights (ggml_cpu_fp32_to_bf16's for BF16),
// every value ggml's to_float reads back, and ggml's vec_dot with the fixture activations.
constexpr const char* kQ4_0Bytes =
    "181e4266bf92254feeff28ce8c56559feee022971221222202021022220101120222222266269999a797986870768a89"
    "8769a899a8a6";
constexpr float kQ4_0Values[kFixtureElements] = {
    -0x1.248p-5f, -0x1.86p-7f, 0x1.554p-5f, -0x1.248p-5f, -0x1.248p-6f, 0x1.554p-5f, 0x1.248p-5f,
    0x1.554p-5f, 0x0p+0f, 0x1.248p-5f, 0x1.86p-6f, -0x1.86p-7f, -0x1.248p-6f, 0x1.554p-5f,
    0x1.248p-5f, -0x1.86p-5f, -0x1.86p-6f, -0x1.86p-7f, 0x1.248p-6f, 0x1.86p-8f, -0x1.248p-5f,
    -0x1.86p-6f, 0x1.248p-5f, 0x1.554p-5f, -0x1.248p-5f, 0x1.86p-6f, 0x0p+0f, -0x1.248p-6f,
    -0x1.248p-6f, 0x1.86p-8f, 0x1.248p-5f, 0x1.248p-5f, 0x1.566p-7f, 0x1.8f7p-7f, 0x1.566p-7f,
    0x1.566p-7f, 0x1.566p-7f, 0x1.566p-7f, 0x1.c88p-7f, 0x1.566p-7f, 0x1.566p-7f, 0x1.8f7p-7f,
    0x1.8f7p-7f, 0x1.566p-7f, 0x1.566p-7f, 0x1.566p-7f, 0x1.566p-7f, 0x1.566p-7f, 0x1.8f7p-7f,
    0x1.566p-7f, 0x1.566p-7f, 0x1.566p-7f, 0x1.c88p-7f, 0x1.c88p-7f, 0x1.8f7p-7f, 0x1.566p-7f,
    0x1.566p-7f, 0x1.c88p-7f, 0x1.c88p-7f, 0x1.8f7p-7f, 0x1.c88p-7f, 0x1.566p-7f, 0x1.566p-7f,
    0x1.566p-7f, 0x1.998p-6f, 0x1.998p-6f, -0x1.998p-6f, -0x1.998p-6f, 0x0p+0f, 0x0p+0f,
    -0x1.998p-3f, -0x1.998p-5f, 0x1.998p-5f, 0x1.998p-6f, -0x1.998p-6f, 0x1.998p-6f, 0x0p+0f,
    0x1.998p-6f, 0x0p+0f, -0x1.998p-5f, 0x1.998p-6f, 0x1.998p-6f, 0x1.998p-5f, 0x1.998p-6f,
    0x1.998p-6f, -0x1.998p-5f, -0x1.998p-6f, -0x1.998p-6f, 0x0p+0f, 0x0p+0f, 0x0p+0f, -0x1.998p-5f,
    0x1.998p-5f, 0x1.998p-6f, 0x1.998p-5f, 0x1.998p-5f,};
constexpr float kQ4_0Dot = -0x1.df7082p-3f;
constexpr const char* kQ5_0Bytes =
    "181ae467cce673cc7d234a8dcdfd308b07bcba1fccd0229300000000344344551405104454020124044444446622333b"
    "1ff611224e2f10c1e0edf3120ed140334f4c";
constexpr float kQ5_0Values[kFixtureElements] = {
    -0x1.3cep-5f, -0x1.86p-7f, 0x1.3cep-5f, -0x1.3cep-5f, -0x1.248p-6f, 0x1.3cep-5f, 0x1.3cep-5f,
    0x1.3cep-5f, 0x0p+0f, 0x1.0c2p-5f, 0x1.554p-6f, -0x1.86p-7f, -0x1.248p-6f, 0x1.6dap-5f,
    0x1.248p-5f, -0x1.86p-5f, -0x1.b6cp-6f, -0x1.86p-7f, 0x1.554p-6f, 0x1.86p-8f, -0x1.248p-5f,
    -0x1.86p-6f, 0x1.248p-5f, 0x1.6dap-5f, -0x1.3cep-5f, 0x1.86p-6f, 0x0p+0f, -0x1.e78p-7f,
    -0x1.e78p-7f, 0x1.86p-9f, 0x1.248p-5f, 0x1.3cep-5f, 0x1.566p-7f, 0x1.72e8p-7f, 0x1.566p-7f,
    0x1.39d8p-7f, 0x1.566p-7f, 0x1.39d8p-7f, 0x1.c88p-7f, 0x1.566p-7f, 0x1.566p-7f, 0x1.8f7p-7f,
    0x1.abf8p-7f, 0x1.566p-7f, 0x1.566p-7f, 0x1.566p-7f, 0x1.566p-7f, 0x1.566p-7f, 0x1.72e8p-7f,
    0x1.566p-7f, 0x1.566p-7f, 0x1.39d8p-7f, 0x1.abf8p-7f, 0x1.c88p-7f, 0x1.abf8p-7f, 0x1.566p-7f,
    0x1.39d8p-7f, 0x1.c88p-7f, 0x1.c88p-7f, 0x1.8f7p-7f, 0x1.c88p-7f, 0x1.566p-7f, 0x1.566p-7f,
    0x1.566p-7f, 0x1.998p-7f, 0x1.998p-6f, -0x1.998p-6f, -0x1.998p-7f, 0x0p+0f, 0x1.998p-7f,
    -0x1.998p-3f, -0x1.332p-5f, 0x1.332p-5f, 0x1.998p-6f, -0x1.998p-6f, 0x1.998p-7f, 0x0p+0f,
    0x1.332p-5f, -0x1.998p-7f, -0x1.998p-5f, 0x1.998p-7f, 0x1.998p-6f, 0x1.998p-5f, 0x1.998p-6f,
    0x1.998p-7f, -0x1.998p-5f, -0x1.998p-6f, -0x1.998p-6f, -0x1.998p-7f, 0x1.998p-7f, 0x0p+0f,
    -0x1.332p-5f, 0x1.998p-5f, 0x1.332p-5f, 0x1.998p-5f, 0x1.998p-5f,};
constexpr float kQ5_0Dot = -0x1.5923bp-5f;
constexpr const char* kBF16Bytes =
    "1ebd32bc233d1bbd9bbc243d193d1f3d033a093db13c3ebc91bc3c3d183d43bdd2bc45bca43ccd3b13bdb9bc0e3d433d"
    "1dbdb93c90ba83bc83bc793b0f3d1c3d273c3d3c263c243c253c243c643c243c283c4b3c543c2b3c273c2f3c313c253c"
    "3e3c243c243c243c583c5f3c4f3c2a3c243c613c633c4b3c643c283c323c273c523cf83ca1bc65bc213b1b3c4dbe1dbd"
    "303dd23cf7bc803c17bb193d3abc3fbd863cf43c4a3dfb3c693c42bdc5bcbebc0abc153c3bbb25bd483d043d493d3e3d";
constexpr float kBF16Dot = -0x1.0c501p-4f;
constexpr const char* kQ4_1Bytes =
    "7e1e18aa3166be82254eddfe18bd7b56558fdde04a0c1f2161060100c0e0af1001e9fb92f1133310412466b2ddeefbeb"
    "dc9db0bacfdecaadfceefbf9";
constexpr float kQ4_1Values[kFixtureElements] = {
    -0x1.521p-5f, -0x1.398p-7f, 0x1.512p-5f, -0x1.1e2p-5f, -0x1.04ap-6f, 0x1.512p-5f, 0x1.1d3p-5f,
    0x1.512p-5f, 0x1.98p-9f, 0x1.1d3p-5f, 0x1.6aap-6f, -0x1.398p-7f, -0x1.04ap-6f, 0x1.851p-5f,
    0x1.1d3p-5f, -0x1.86p-5f, -0x1.d46p-6f, -0x1.398p-7f, 0x1.6aap-6f, 0x1.98p-9f, -0x1.1e2p-5f,
    -0x1.6c8p-6f, 0x1.1d3p-5f, 0x1.851p-5f, -0x1.521p-5f, 0x1.6aap-6f, -0x1.a7p-9f, -0x1.04ap-6f,
    -0x1.04ap-6f, 0x1.98p-9f, 0x1.1d3p-5f, 0x1.512p-5f, 0x1.5054p-7f, 0x1.7b38p-7f, 0x1.5054p-7f,
    0x1.47cp-7f, 0x1.47cp-7f, 0x1.47cp-7f, 0x1.c86cp-7f, 0x1.47cp-7f, 0x1.5054p-7f, 0x1.94f4p-7f,
    0x1.a61cp-7f, 0x1.58e8p-7f, 0x1.5054p-7f, 0x1.617cp-7f, 0x1.617cp-7f, 0x1.47cp-7f, 0x1.7b38p-7f,
    0x1.47cp-7f, 0x1.47cp-7f, 0x1.47cp-7f, 0x1.aebp-7f, 0x1.bfd8p-7f, 0x1.9d88p-7f, 0x1.5054p-7f,
    0x1.47cp-7f, 0x1.bfd8p-7f, 0x1.c86cp-7f, 0x1.94f4p-7f, 0x1.c86cp-7f, 0x1.5054p-7f, 0x1.617cp-7f,
    0x1.5054p-7f, 0x1.074p-6f, 0x1.0bcp-5f, -0x1.194p-6f, -0x1.194p-6f, -0x1.2p-11f, 0x1.074p-6f,
    -0x1.998p-3f, -0x1.14cp-5f, 0x1.93ep-5f, 0x1.0bcp-5f, -0x1.14cp-5f, 0x1.074p-6f, -0x1.2p-11f,
    0x1.0bcp-5f, -0x1.194p-6f, -0x1.9cep-5f, 0x1.074p-6f, 0x1.0bcp-5f, 0x1.93ep-5f, 0x1.0bcp-5f,
    0x1.074p-6f, -0x1.9cep-5f, -0x1.194p-6f, -0x1.194p-6f, -0x1.2p-11f, 0x1.074p-6f, -0x1.2p-11f,
    -0x1.14cp-5f, 0x1.93ep-5f, 0x1.0bcp-5f, 0x1.93ep-5f, 0x1.93ep-5f,};
constexpr float kQ4_1Dot = -0x1.02014p-5f;
constexpr const char* kQ5_1Bytes =
    "481a18aae467cce273cc6c23498dbcfc307af7acaa1ebcc027081f214006701ed20c010091d05f3002d3e733f2267621"
    "1e2066b2bfffffffbaddf6d7b93a60648eac954bf9def7f3";
constexpr float kQ5_1Values[kFixtureElements] = {
    -0x1.3aap-5f, -0x1.62p-7f, 0x1.398p-5f, -0x1.3aap-5f, -0x1.47cp-6f, 0x1.52ap-5f, 0x1.398p-5f,
    0x1.398p-5f, 0x1.8p-10f, 0x1.074p-5f, 0x1.77cp-6f, -0x1.62p-7f, -0x1.158p-6f, 0x1.6bcp-5f,
    0x1.398p-5f, -0x1.86p-5f, -0x1.ac4p-6f, -0x1.62p-7f, 0x1.458p-6f, 0x1.f2p-8f, -0x1.218p-5f,
    -0x1.7ap-6f, 0x1.206p-5f, 0x1.84ep-5f, -0x1.3aap-5f, 0x1.77cp-6f, -0x1.a4p-10f, -0x1.158p-6f,
    -0x1.158p-6f, 0x1.29p-8f, 0x1.206p-5f, 0x1.398p-5f, 0x1.500ep-7f, 0x1.7994p-7f, 0x1.4be7p-7f,
    0x1.47cp-7f, 0x1.4be7p-7f, 0x1.47cp-7f, 0x1.c879p-7f, 0x1.47cp-7f, 0x1.500ep-7f, 0x1.96a5p-7f,
    0x1.a741p-7f, 0x1.5435p-7f, 0x1.500ep-7f, 0x1.60aap-7f, 0x1.60aap-7f, 0x1.4be7p-7f,
    0x1.7dbbp-7f, 0x1.47cp-7f, 0x1.47cp-7f, 0x1.47cp-7f, 0x1.af8fp-7f, 0x1.c02bp-7f, 0x1.9ef3p-7f,
    0x1.5435p-7f, 0x1.47cp-7f, 0x1.c02bp-7f, 0x1.c452p-7f, 0x1.96a5p-7f, 0x1.c879p-7f, 0x1.500ep-7f,
    0x1.64d1p-7f, 0x1.500ep-7f, 0x1.2bp-7f, 0x1.106p-5f, -0x1.798p-6f, -0x1.eb8p-7f, 0x1.1cp-10f,
    0x1.2bp-7f, -0x1.998p-3f, -0x1.408p-5f, 0x1.524p-5f, 0x1.9dp-6f, -0x1.fd4p-6f, 0x1.194p-6f,
    0x1.1cp-10f, 0x1.524p-5f, -0x1.eb8p-7f, -0x1.826p-5f, 0x1.194p-6f, 0x1.106p-5f, 0x1.942p-5f,
    0x1.106p-5f, 0x1.194p-6f, -0x1.826p-5f, -0x1.798p-6f, -0x1.798p-6f, -0x1.c8p-8f, 0x1.2bp-7f,
    0x1.1cp-10f, -0x1.408p-5f, 0x1.942p-5f, 0x1.106p-5f, 0x1.942p-5f, 0x1.942p-5f,};
constexpr float kQ5_1Dot = -0x1.2a27p-7f;

TEST(LegacyQuantsTest, QuantizersWriteWhatGgmlWrites) {
  const std::vector<float> w = FixtureWeights();
  std::vector<uint8_t> q4(3 * sizeof(BlockQ4_0)), q5(3 * sizeof(BlockQ5_0)), q41(3 * sizeof(BlockQ4_1)),
      q51(3 * sizeof(BlockQ5_1)), bf(2 * kFixtureElements);
  QuantizeRowQ4_0(w.data(), kFixtureElements, reinterpret_cast<BlockQ4_0*>(q4.data()));
  QuantizeRowQ5_0(w.data(), kFixtureElements, reinterpret_cast<BlockQ5_0*>(q5.data()));
  QuantizeRowQ4_1(w.data(), kFixtureElements, reinterpret_cast<BlockQ4_1*>(q41.data()));
  QuantizeRowQ5_1(w.data(), kFixtureElements, reinterpret_cast<BlockQ5_1*>(q51.data()));
  for (int i = 0; i < kFixtureElements; ++i) {
    const uint16_t h = FloatToBf16(w[static_cast<size_t>(i)]);
    std::memcpy(bf.data() + 2 * i, &h, 2);
  }
  EXPECT_EQ(q4, FromHex(kQ4_0Bytes));
  EXPECT_EQ(q5, FromHex(kQ5_0Bytes));
  EXPECT_EQ(q41, FromHex(kQ4_1Bytes));
  EXPECT_EQ(q51, FromHex(kQ5_1Bytes));
  EXPECT_EQ(bf, FromHex(kBF16Bytes));
}

TEST(LegacyQuantsTest, DecodesBlocksAsGgmlDoes) {
  const std::vector<uint8_t> q4 = FromHex(kQ4_0Bytes), q5 = FromHex(kQ5_0Bytes);
  ASSERT_EQ(q4.size(), 3 * sizeof(BlockQ4_0));
  ASSERT_EQ(q5.size(), 3 * sizeof(BlockQ5_0));
  std::vector<float> y4(kFixtureElements), y5(kFixtureElements);
  DequantizeRowQ4_0(reinterpret_cast<const BlockQ4_0*>(q4.data()), kFixtureElements, y4.data());
  DequantizeRowQ5_0(reinterpret_cast<const BlockQ5_0*>(q5.data()), kFixtureElements, y5.data());
  const std::vector<uint8_t> q41 = FromHex(kQ4_1Bytes), q51 = FromHex(kQ5_1Bytes);
  ASSERT_EQ(q41.size(), 3 * sizeof(BlockQ4_1));
  ASSERT_EQ(q51.size(), 3 * sizeof(BlockQ5_1));
  std::vector<float> y41(kFixtureElements), y51(kFixtureElements);
  DequantizeRowQ4_1(reinterpret_cast<const BlockQ4_1*>(q41.data()), kFixtureElements, y41.data());
  DequantizeRowQ5_1(reinterpret_cast<const BlockQ5_1*>(q51.data()), kFixtureElements, y51.data());
  for (int i = 0; i < kFixtureElements; ++i) {
    EXPECT_EQ(y4[static_cast<size_t>(i)], kQ4_0Values[i]) << "q4_0 element " << i;
    EXPECT_EQ(y5[static_cast<size_t>(i)], kQ5_0Values[i]) << "q5_0 element " << i;
    EXPECT_EQ(y41[static_cast<size_t>(i)], kQ4_1Values[i]) << "q4_1 element " << i;
    EXPECT_EQ(y51[static_cast<size_t>(i)], kQ5_1Values[i]) << "q5_1 element " << i;
  }
  // The Q8_0 block of a block stands for the same values (the CPU backend packs those).
  for (int b = 0; b < 3; ++b) {
    const BlockQ8_0 from4 = ToQ8_0(reinterpret_cast<const BlockQ4_0*>(q4.data())[b]);
    const BlockQ8_0 from5 = ToQ8_0(reinterpret_cast<const BlockQ5_0*>(q5.data())[b]);
    float v4[32], v5[32];
    DequantizeRowQ8_0(&from4, 32, v4);
    DequantizeRowQ8_0(&from5, 32, v5);
    for (int j = 0; j < 32; ++j) {
      EXPECT_EQ(v4[j], kQ4_0Values[32 * b + j]) << "q4_0 as q8_0, element " << 32 * b + j;
      EXPECT_EQ(v5[j], kQ5_0Values[32 * b + j]) << "q5_0 as q8_0, element " << 32 * b + j;
      EXPECT_GE(from4.q[j], -8);
      EXPECT_LE(from4.q[j], 7);
      EXPECT_GE(from5.q[j], -16);
      EXPECT_LE(from5.q[j], 15);
    }
  }
}

// A NaN among a block's weights (first, where a running min and max would start from it) does
// not make the _1 quantizers' scale and min NaN: as ggml's comparisons, it is skipped.
TEST(LegacyQuantsTest, ANanWeightLeavesTheScaleAndMinFinite) {
  std::vector<float> w = FixtureWeights();
  std::vector<float> with_nan = w;
  with_nan[0] = std::numeric_limits<float>::quiet_NaN();
  w[0] = w[1];  // the same block without the NaN's value: the same min and max
  BlockQ4_1 q4[3], q4_ref[3];
  BlockQ5_1 q5[3], q5_ref[3];
  QuantizeRowQ4_1(with_nan.data(), kFixtureElements, q4);
  QuantizeRowQ4_1(w.data(), kFixtureElements, q4_ref);
  QuantizeRowQ5_1(with_nan.data(), kFixtureElements, q5);
  QuantizeRowQ5_1(w.data(), kFixtureElements, q5_ref);
  EXPECT_EQ(q4[0].scale, q4_ref[0].scale);
  EXPECT_EQ(q4[0].min, q4_ref[0].min);
  EXPECT_EQ(q5[0].scale, q5_ref[0].scale);
  EXPECT_EQ(q5[0].min, q5_ref[0].min);
  EXPECT_TRUE(std::isfinite(HalfToFloat(q4[0].scale)) && std::isfinite(HalfToFloat(q4[0].min)));
}

// The CPU backend's products (row layout and prepared panels, every kernel set) and the
// reference backend's, against ggml's vec_dot. Per block the integer sums (BF16: the products)
// are exact on both sides; the order of the float additions differs, and for the _1 types the
// min's term: ggml multiplies the min by the block's activation sum rounded to F16 (its Q8_1
// blocks' s), we by the exact sum of the rounded activations.
TEST(LegacyQuantsTest, ProductsEqualGgmlsVecDot) {
  const std::vector<float> a = FixtureActivations();
  struct Case {
    WeightType type;
    const char* hex;
    float dot;
  };
  const Case cases[] = {{WeightType::kQ4_0, kQ4_0Bytes, kQ4_0Dot}, {WeightType::kQ5_0, kQ5_0Bytes, kQ5_0Dot},
                        {WeightType::kQ4_1, kQ4_1Bytes, kQ4_1Dot}, {WeightType::kQ5_1, kQ5_1Bytes, kQ5_1Dot},
                        {WeightType::kBF16, kBF16Bytes, kBF16Dot}};
  std::vector<const cpu::SimdKernels*> kernels = {&cpu::ScalarSimdKernels()};
  if (const cpu::SimdKernels* avx = cpu::Avx512SimdKernels()) kernels.push_back(avx);
  if (const cpu::SimdKernels* plain = cpu::Avx512SimdKernels(/*allow_vnni=*/false)) kernels.push_back(plain);
  for (const Case& c : cases) {
    const std::vector<uint8_t> bytes = FromHex(c.hex);
    const WeightMatrix w = MakeWeightMatrix(c.type, bytes.data(), 1, kFixtureElements);
    // Float sums in another order differ by a few units in the last place of the terms, which
    // can be large against a sum they cancel in (Q5_0's here): the tolerance scales with
    // sum |w_i a_i|.
    std::vector<float> values(kFixtureElements);
    DequantizeRow(w, 0, values.data());
    double magnitude = 0;
    for (int i = 0; i < kFixtureElements; ++i) magnitude += std::fabs(double(values[static_cast<size_t>(i)]) * a[static_cast<size_t>(i)]);
    double tolerance = 1e-6 * magnitude;
    if (HasBlockMins(c.type)) {
      // F16 keeps 11 bits: ggml's s is within 2^-11 of the sum it rounds (itself from the
      // unrounded scale, within 2^-11 of ours): 2^-10 of |min| x |block sum| per block.
      std::vector<float> xr(a);
      RoundToQ8_0(xr.data(), kFixtureElements, xr.data());
      for (int b = 0; b < 3; ++b) {
        double block_sum = 0;
        for (int j = 0; j < 32; ++j) block_sum += xr[static_cast<size_t>(32 * b + j)];
        const uint16_t min_bits = c.type == WeightType::kQ4_1
                                      ? reinterpret_cast<const BlockQ4_1*>(bytes.data())[b].min
                                      : reinterpret_cast<const BlockQ5_1*>(bytes.data())[b].min;
        tolerance += std::ldexp(std::fabs(HalfToFloat(min_bits) * block_sum), -10);
      }
    }
    float ref = 0;
    ReferenceBackend().MatMul(a.data(), 1, w, &ref);
    EXPECT_NEAR(ref, c.dot, tolerance) << WeightTypeName(c.type) << " reference";
    for (const cpu::SimdKernels* simd : kernels) {
      CpuBackendOptions options;
      options.simd = simd;
      options.threads = 1;
      CpuBackend cpu(options);
      const PreparedWeight prepared = cpu.PrepareMatMulWeight(w);
      for (const WeightMatrix& view : {w, prepared.view}) {
        float y = 0;
        cpu.MatMul(a.data(), 1, view, &y);
        EXPECT_NEAR(y, c.dot, tolerance)
            << WeightTypeName(c.type) << " " << simd->isa << (view.layout == WeightLayout::kPanels16 ? " packed" : " rows");
      }
    }
  }
}

TEST(LegacyQuantsTest, Bf16RoundingIsGgmls) {
  // Ties to even both ways, a carry into the exponent, the largest finite value rounding to inf,
  // inf, a signalling NaN made quiet, a negative NaN, a subnormal, and two negatives: ggml's
  // ggml_fp32_to_bf16 and ggml_cpu_fp32_to_bf16 agree on each.
  const std::pair<uint32_t, uint16_t> cases[] = {
      {0x3f808000u, 0x3f80}, {0x3f818000u, 0x3f82}, {0x3f80ffffu, 0x3f81}, {0x3f7fffffu, 0x3f80},
      {0x7f7fffffu, 0x7f80}, {0x7f800000u, 0x7f80}, {0x7f800001u, 0x7fc0}, {0xffc12345u, 0xffc1},
      {0x00012345u, 0x0001}, {0x80008000u, 0x8000}, {0xbf808001u, 0xbf81}};
  std::vector<const cpu::SimdKernels*> kernels = {&cpu::ScalarSimdKernels()};
  if (const cpu::SimdKernels* avx = cpu::Avx512SimdKernels()) kernels.push_back(avx);
  for (const auto& [bits, want] : cases) {
    float f;
    std::memcpy(&f, &bits, 4);
    EXPECT_EQ(FloatToBf16(f), want) << std::hex << bits;
    for (const cpu::SimdKernels* simd : kernels) {
      float rounded;
      simd->round_bf16(&f, 1, &rounded);
      uint32_t got;
      std::memcpy(&got, &rounded, 4);
      EXPECT_EQ(got, static_cast<uint32_t>(want) << 16) << simd->isa << " " << std::hex << bits;
    }
  }
}

TEST(LegacyQuantsTest, VectorBf16RoundingEqualsPortableOnRandomBits) {
  const cpu::SimdKernels* avx = cpu::Avx512SimdKernels();
  if (avx == nullptr) GTEST_SKIP() << "no AVX-512 on this CPU";
  std::mt19937 rng(7);
  std::vector<float> x(100003), a(x.size()), b(x.size());  // not a multiple of 16: the tail too
  for (float& v : x) {
    const uint32_t bits = rng();
    std::memcpy(&v, &bits, 4);
  }
  avx->round_bf16(x.data(), static_cast<int64_t>(x.size()), a.data());
  cpu::ScalarSimdKernels().round_bf16(x.data(), static_cast<int64_t>(x.size()), b.data());
  ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
}

}  // namespace
}  // namespace legacy_quants_test
}  // namespace bmad::kernels
