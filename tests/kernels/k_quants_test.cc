// The K-quant formats against llama.cpp itself: blocks that ggml's quantizer wrote, the values
// ggml's dequantizer reads from them, and the product ggml's CPU vec_dot computes with
// activations it rounded to Q8_K (llama.cpp b9586, a small harness linked to libggml; the inputs
// are the integer-hash values of Input() below). Then our own quantizers, Q8_K rounding, and the
// integer kernels against the portable ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/half.h"
#include "kernels/cpu/simd_kernels.h"
#include "kernels/k_quants.h"
#include "tests/support/ggml_fixture.h"
#include "tests/support/random_floats.h"

namespace bmad::kernels {
namespace {

using bmad::testing::FromHex;

float Input(uint32_t i, uint32_t salt, float scale) { return bmad::testing::GgmlFixtureInput(i, salt, scale); }

constexpr int kFixtureElements = 512;

std::vector<float> FixtureActivations() {
  std::vector<float> a(kFixtureElements);
  for (int i = 0; i < kFixtureElements; ++i) a[static_cast<size_t>(i)] = Input(static_cast<uint32_t>(i), 2, 3.0f);
  return a;
}

// ggml_quantize_chunk's output for 512 weights (two super-blocks) of each type; ggml's to_float at sample
// indices (every sub-block, both nibbles, every ql/qh position); ggml's vec_dot with the
// activations rounded to Q8_K by ggml.
constexpr const char* kQ4_KBytes =
    "f7069812f9ffc9f9f9fdc0f4fcec9d7c21967eb1947eee1ea8ad8b96c57fde00b3164b09a2d4addfc16ba7c53578bdee"
    "cc8e5bab9ccc2c7b0c4c6b9babdafb0d8a5daaccde4c9e7c7abb5b7c1b6c6c6bd798f59988aedd3468db4b6b78b9c24f"
    "e7a66c6cb6d05ae48c378ac9738b0fe7accc0bea4b4b5382cfcbe86452e4b667a545838c9ba8188160192e123e4e4d00"
    "07077d12fcfdc5f8feffd8bee828dfe681b4918329ef1d3200cfee4aa0bdb424a76da582fe895ab7be3ac929b0130bfc"
    "1fb0976ebd3fb61c3f4ffb9448ab8f6fbf19eed0639e3ffef03bcfadd6861f0bc06c82524c4bc09ac9b741c38fd6943a"
    "ee1b937e72d585282c3b652e07b372fca5bd71f9817ec7eba197a232129d62b8b129e362a510a5fae57eac0aa844c0a1";
const std::pair<int, float> kQ4_KValues[] = {
    {0, -0x1.46382p-5f}, {5, 0x1.3ee64p-5f}, {31, 0x1.3ee64p-5f}, {32, -0x1.2485cp-5f},
    {63, 0x1.6da7cp-5f}, {64, 0x1.781ap-7f}, {70, 0x1.781ap-7f}, {95, 0x1.58c28p-7f},
    {96, 0x1.f93dp-6f}, {127, -0x1.6906p-8f}, {128, -0x1.8e04p-8f}, {150, 0x1.abd4p-7f},
    {191, 0x1.427fp-5f}, {192, 0x1.05708p-5f}, {223, -0x1.77d8p-5f}, {224, 0x1.3f6ap-6f},
    {255, -0x1.6aa8p-5f}, {256, -0x1.5d918p-5f}, {300, 0x1.fc4bp-7f}, {320, -0x1.67598p-7f},
    {351, -0x1.ad9f8p-7f}, {383, -0x1.9246p-5f}, {400, 0x1.1e68p-5f}, {447, 0x1.9d75p-5f},
    {480, 0x1.5fc5p-6f}, {511, 0x1.5fc5p-6f}};
constexpr float kQ4_KDot = 0x1.10657p-2f;
constexpr const char* kQ6_KBytes =
    "46198b86435b698a50676f68648f69309138936c186f29419991914b8b6d5977b8c67d4079bd5e04ccbc53a7357e19b0"
    "92b4ff500e183b2ae589cc15ee2e607fc6ce0f2c0f033a6101f2b3e162ca5c205a88f27209413640008bf6b6fdfb9d1d"
    "58ade01bcfd68aa5b89c20498411104fe82847599bd5455ac04ca133eb20401a0049874c4907cf83ca8b8a494d070fc0"
    "4f8201010bce488c4f058a8ec2858c8c4205d2159594b07f0a011da9ba2567a89d5987b7b9ac268d4b213a0e347a730d"
    "887b828822237b5b718079827d8b7992cf80f60363dbc5ff58b8f2efab4b80a6d1f1ef95d4174bd4e8df1babe4c6716e"
    "f0b110ce2482b89ac61ca1f2ea31dcae0088ca598b326e21c4aedfdbe4885d04500e825f989acd1a2116a4fa857b5a87"
    "6fc77e7dd6af70218dbd87d06dce283310423504d7069fdcc32432873eb3475021f2f315362e1f381a0220dd22733a90"
    "cf2008898848820f8300000fcf86088b8d418907c9c84f8a06c9cb028e82c880030f604a74187a4a2016725178b0f741"
    "b41e03ee048754c1542d1f7b78ef6d94044385858383d0cf8e8880a5597b7b817b7dd280";
const std::pair<int, float> kQ6_KValues[] = {
    {0, -0x1.3b5ap-5f}, {5, 0x1.477bp-5f}, {31, 0x1.36cdap-5f}, {32, -0x1.31a6p-5f},
    {63, 0x1.77ffp-5f}, {64, 0x1.80e4p-7f}, {70, 0x1.6566p-7f}, {95, 0x1.61c28p-7f},
    {96, 0x1.05132p-5f}, {127, -0x1.01898p-7f}, {128, -0x1.121dp-7f}, {150, 0x1.368p-7f},
    {191, 0x1.4b1e8p-5f}, {192, 0x1.f95fp-6f}, {223, -0x1.6e98ap-5f}, {224, 0x1.0d0f4p-6f},
    {255, -0x1.58a9cp-5f}, {256, -0x1.47eb8p-5f}, {300, 0x1.339ep-6f}, {320, -0x1.4ebp-7f},
    {351, -0x1.a60dp-7f}, {383, -0x1.89cp-5f}, {400, 0x1.17ee8p-5f}, {447, 0x1.9398p-5f},
    {480, 0x1.47eb8p-6f}, {511, 0x1.66e3p-6f}};
constexpr float kQ6_KDot = 0x1.5e51ep-3f;

constexpr const char* kQ5_KBytes =
    "51037c12fcfdc9f9fcffc0f5ebffac9aecfe65fe7e7d3785d7f7d71e1ebdaf14ae249dddeee65fa7164d763644555727"
    "433cfd8359fdfc2c606b274cbaffdc00973c861274c85bcfa3d76faa7af18bfc9a1db656399948f60998c82858c6f80b"
    "16ab5699be884deaf686a6ea37e9c9c7be11fa22014eab69c09787c7e073739fbd4cbaca5da0a4c8f96e0493d6f60fcf"
    "59a907f69797b524afb8f2d8b4f97dde6a9b172a47612122e0335e257e9eab104403a012fffec6fdfdfdd7bcfc2befe8"
    "a6da2ac69d57a9f4b4e78f2932ef2ed4be51ae1a832fa5de9b55cf5dca2885b70379221542df3c64019fdd85607b8848"
    "5fca5a13fd12a47f8d55a243702707f81c501bc8555c69146c8ae2167e5209cc6a3fc890b51869d8e0727a46aa093c03"
    "81c914c588969024937e83961fac3875dc3637fde5ab1a405a77da4d0e66e5e84c6df4f412ff8fe743205475263cc572"
    "7343e7c56b316cf5ecff5b0651898052";
const std::pair<int, float> kQ5_KValues[] = {
    {0, -0x1.3a718p-5f}, {5, 0x1.4c418p-5f}, {31, 0x1.3362p-5f}, {32, -0x1.335d8p-5f},
    {63, 0x1.77666p-5f}, {64, 0x1.8405p-7f}, {70, 0x1.662cp-7f}, {95, 0x1.573f8p-7f},
    {96, 0x1.ee204p-6f}, {127, -0x1.e0f4p-8f}, {128, -0x1.dce6p-8f}, {150, 0x1.5c8ep-7f},
    {191, 0x1.42c08p-5f}, {192, 0x1.eb77p-6f}, {223, -0x1.7818p-5f}, {224, 0x1.0ea08p-6f},
    {255, -0x1.5990cp-5f}, {256, -0x1.46f98p-5f}, {300, 0x1.3154p-6f}, {320, -0x1.4f3p-7f},
    {351, -0x1.a75cp-7f}, {383, -0x1.8d8p-5f}, {400, 0x1.0c68p-5f}, {447, 0x1.8745p-5f},
    {480, 0x1.30ep-6f}, {511, 0x1.5e98p-6f}};
constexpr float kQ5_KDot = 0x1.7c534p-3f;

// The fixture's two super-blocks of type Block.
template <class Block>
std::vector<Block> FixtureBlocks(const char* hex) {
  const std::vector<uint8_t> bytes = FromHex(hex);
  EXPECT_EQ(bytes.size(), 2 * sizeof(Block));
  std::vector<Block> blocks(2);
  std::memcpy(blocks.data(), bytes.data(), std::min(bytes.size(), 2 * sizeof(Block)));
  return blocks;
}

TEST(KQuantsTest, DecodesBlocksAsLlamaCppDoes) {
  const std::vector<BlockQ4_K> b4 = FixtureBlocks<BlockQ4_K>(kQ4_KBytes);
  const std::vector<BlockQ5_K> b5 = FixtureBlocks<BlockQ5_K>(kQ5_KBytes);
  const std::vector<BlockQ6_K> b6 = FixtureBlocks<BlockQ6_K>(kQ6_KBytes);
  std::vector<float> y4(kFixtureElements), y5(kFixtureElements), y6(kFixtureElements);
  DequantizeRowQ4_K(b4.data(), kFixtureElements, y4.data());
  DequantizeRowQ5_K(b5.data(), kFixtureElements, y5.data());
  DequantizeRowQ6_K(b6.data(), kFixtureElements, y6.data());
  for (const auto& [i, want] : kQ4_KValues) EXPECT_FLOAT_EQ(y4[static_cast<size_t>(i)], want) << "q4_K element " << i;
  for (const auto& [i, want] : kQ5_KValues) EXPECT_FLOAT_EQ(y5[static_cast<size_t>(i)], want) << "q5_K element " << i;
  for (const auto& [i, want] : kQ6_KValues) EXPECT_FLOAT_EQ(y6[static_cast<size_t>(i)], want) << "q6_K element " << i;
}

TEST(KQuantsTest, ProductsEqualLlamaCppsVecDot) {
  const std::vector<BlockQ4_K> b4 = FixtureBlocks<BlockQ4_K>(kQ4_KBytes);
  const std::vector<BlockQ5_K> b5 = FixtureBlocks<BlockQ5_K>(kQ5_KBytes);
  const std::vector<BlockQ6_K> b6 = FixtureBlocks<BlockQ6_K>(kQ6_KBytes);
  const std::vector<float> a = FixtureActivations();
  std::vector<ActivationBlockQ8_K> aq(2);
  QuantizeActivationRowQ8_K(a.data(), kFixtureElements, aq.data());
  // The integer sums are exact on both sides; only the order of the float steps differs (ggml
  // sums the scale terms and the min terms apart, in vector lanes, and adds them at the end).
  // Q4_K's two kinds of terms cancel in part, so a few units in the last place of the terms are
  // several of the result.
  EXPECT_NEAR(DotQ4_KQ8_K(b4.data(), aq.data(), 2), kQ4_KDot, 4e-6 * std::fabs(kQ4_KDot));
  EXPECT_NEAR(DotQ5_KQ8_K(b5.data(), aq.data(), 2), kQ5_KDot, 4e-6 * std::fabs(kQ5_KDot));
  EXPECT_NEAR(DotQ6_KQ8_K(b6.data(), aq.data(), 2), kQ6_KDot, 1e-6 * std::fabs(kQ6_KDot));
}

TEST(KQuantsTest, Q8_KRoundingIsLlamaCpps) {
  std::vector<float> x(kQK_K);
  for (int i = 0; i < kQK_K; ++i) x[static_cast<size_t>(i)] = Input(static_cast<uint32_t>(i), 9, 2.0f);
  x[17] = 2.5f;  // the largest magnitude, positive: it maps to -127 and d is negative
  ActivationBlockQ8_K b;
  QuantizeActivationRowQ8_K(x.data(), kQK_K, &b);
  EXPECT_EQ(b.q[17], -127);
  EXPECT_FLOAT_EQ(b.d, 1.0f / (-127.0f / 2.5f));
  for (int i = 0; i < kQK_K; ++i) {
    EXPECT_EQ(b.q[i], static_cast<int>(std::nearbyint(-127.0f / 2.5f * x[static_cast<size_t>(i)]))) << i;
  }
  for (int g = 0; g < 16; ++g) {
    int sum = 0;
    for (int l = 0; l < 16; ++l) sum += b.q[16 * g + l];
    EXPECT_EQ(b.bsums[g], sum) << g;
  }
  std::vector<float> rounded(kQK_K);
  RoundToQ8_K(x.data(), kQK_K, rounded.data());
  for (int i = 0; i < kQK_K; ++i) EXPECT_EQ(rounded[static_cast<size_t>(i)], b.d * b.q[i]);

  const std::vector<float> zeros(kQK_K, 0.0f);
  QuantizeActivationRowQ8_K(zeros.data(), kQK_K, &b);
  EXPECT_EQ(b.d, 0.0f);
  for (int i = 0; i < kQK_K; ++i) ASSERT_EQ(b.q[i], 0);
  for (int g = 0; g < 16; ++g) ASSERT_EQ(b.bsums[g], 0);
}

// The word-at-a-time unpacking of Q4_K's 6-bit scales and mins reads what the format's
// definition (Q4_KScaleMin, byte by byte) reads, for every bit pattern of each byte.
TEST(KQuantsTest, ScaleUnpackingMatchesTheFormat) {
  for (int v = 0; v < 256; ++v) {
    for (int pos = 0; pos < 12; ++pos) {
      uint8_t packed[12];
      for (int i = 0; i < 12; ++i) packed[i] = static_cast<uint8_t>(v * (i + 3) + 17 * i + pos);
      packed[pos] = static_cast<uint8_t>(v);
      uint8_t sc[8], m[8];
      UnpackQ4_KScales(packed, sc, m);
      for (int j = 0; j < 8; ++j) {
        int want_sc, want_m;
        Q4_KScaleMin(packed, j, &want_sc, &want_m);
        ASSERT_EQ(sc[j], want_sc) << "byte " << pos << " = " << v << ", scale " << j;
        ASSERT_EQ(m[j], want_m) << "byte " << pos << " = " << v << ", min " << j;
      }
    }
  }
}

// Our writer's quantizers: any value within half a step of its sub-block's grid, zeros exact.
TEST(KQuantsTest, QuantizersKeepValuesWithinTheirStep) {
  const int64_t n = 4 * kQK_K;
  std::vector<float> x = bmad::testing::RandomFloats(static_cast<size_t>(n), 31, 0.2f);
  for (int i = 0; i < 32; ++i) x[static_cast<size_t>(256 + i)] = 0.05f + 0.001f * i;   // all positive
  for (int i = 0; i < 32; ++i) x[static_cast<size_t>(512 + i)] = -0.3f + 0.002f * i;   // all negative
  for (int i = 0; i < kQK_K; ++i) x[static_cast<size_t>(3 * kQK_K + i)] = 0.0f;        // all zero
  std::vector<BlockQ4_K> b4(4);
  std::vector<BlockQ5_K> b5(4);
  std::vector<BlockQ6_K> b6(4);
  QuantizeRowQ4_K(x.data(), n, b4.data());
  QuantizeRowQ5_K(x.data(), n, b5.data());
  QuantizeRowQ6_K(x.data(), n, b6.data());
  std::vector<float> y4(static_cast<size_t>(n)), y5(static_cast<size_t>(n)), y6(static_cast<size_t>(n));
  DequantizeRowQ4_K(b4.data(), n, y4.data());
  DequantizeRowQ5_K(b5.data(), n, y5.data());
  DequantizeRowQ6_K(b6.data(), n, y6.data());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t s = i / 32 * 32, g = i / 16 * 16;
    float lo = 0, hi = 0, amax = 0;
    for (int64_t j = s; j < s + 32; ++j) {
      lo = std::min(lo, x[static_cast<size_t>(j)]);
      hi = std::max(hi, x[static_cast<size_t>(j)]);
    }
    for (int64_t j = g; j < g + 16; ++j) amax = std::max(amax, std::fabs(x[static_cast<size_t>(j)]));
    // Steps (hi - lo) / 15 and amax / 31, give or take the 6- and 8-bit rounding of the scales.
    EXPECT_LE(std::fabs(y4[static_cast<size_t>(i)] - x[static_cast<size_t>(i)]), 0.65f * (hi - lo) / 15 + 1e-6f) << "q4_K " << i;
    EXPECT_LE(std::fabs(y5[static_cast<size_t>(i)] - x[static_cast<size_t>(i)]), 0.65f * (hi - lo) / 31 + 1e-6f) << "q5_K " << i;
    EXPECT_LE(std::fabs(y6[static_cast<size_t>(i)] - x[static_cast<size_t>(i)]), 0.65f * amax / 31 + 1e-6f) << "q6_K " << i;
  }
  for (int64_t i = 3 * kQK_K; i < n; ++i) {
    ASSERT_EQ(y4[static_cast<size_t>(i)], 0.0f);
    ASSERT_EQ(y5[static_cast<size_t>(i)], 0.0f);
    ASSERT_EQ(y6[static_cast<size_t>(i)], 0.0f);
  }
}

// The AVX-512 Q8_K rounding writes the portable blocks bit for bit: ties, a largest magnitude
// held by values of both signs (the first one's sign wins), NaN, infinities, zeros, denormals.
TEST(KQuantsTest, VectorQ8_KRoundingEqualsThePortableOne) {
  const cpu::SimdKernels* simd = cpu::Avx512SimdKernels();
  if (simd == nullptr) GTEST_SKIP() << "this CPU has no AVX-512";
  const int64_t m = 3, k = 2 * kQK_K;
  std::vector<float> x = bmad::testing::RandomFloats(static_cast<size_t>(m * k), 51, 3.0f);
  x[3] = -3.5f;  // block 0: the largest magnitude twice, negative first
  x[200] = 3.5f;
  x[300] = 7.0f;  // block 1: positive first
  x[301] = -7.0f;
  x[302] = 3.5f;  // exactly half a step: a tie, to even
  x[600] = std::nanf("");
  x[601] = 5.0f;
  for (int i = 768; i < 1024; ++i) x[static_cast<size_t>(i)] = (i % 3 == 0) ? 1e-42f : 0.0f;  // denormals
  for (int i = 1024; i < 1280; ++i) x[static_cast<size_t>(i)] = (i % 2 == 0) ? -0.0f : 0.0f;  // zeros
  x[1300] = INFINITY;
  std::vector<ActivationBlockQ8_K> got(static_cast<size_t>(m * k / kQK_K)), want(got.size());
  simd->quantize_q8_k_rows(x.data(), m, k, got.data());
  cpu::QuantizeQ8KRowsScalar(x.data(), m, k, want.data());
  for (size_t b = 0; b < got.size(); ++b) {
    ASSERT_EQ(std::memcmp(&got[b], &want[b], sizeof(ActivationBlockQ8_K)), 0) << "block " << b;
  }
  EXPECT_EQ(want[1].q[300 - 256], -127);  // 7 came first: d < 0, so 7 maps to -127
  EXPECT_EQ(want[1].q[301 - 256], 127);
  EXPECT_EQ(want[2].q[600 - 512], 0);  // NaN
}

// Weight rows of `type` for the kernel tests: the first `quantized` rows from our quantizers, the
// rest random bytes (any scale and min bits, Q6_K's negative scales among them), with finite
// F16 super-scales.
std::vector<uint8_t> KQuantRows(WeightType type, int64_t rows, int64_t quantized, int64_t k, uint64_t seed) {
  const size_t row_bytes = RowBytes(type, k);
  const std::vector<float> w = bmad::testing::RandomFloats(static_cast<size_t>(rows * k), seed, 0.1f);
  std::vector<uint8_t> bytes(row_bytes * static_cast<size_t>(rows));
  std::mt19937_64 rng(seed);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* dst = bytes.data() + row_bytes * static_cast<size_t>(r);
    for (int64_t b = 0; b < k / kQK_K; ++b) {
      const uint16_t scale = FloatToHalf(0.01f * static_cast<float>(1 + (r + b) % 7));
      if (type == WeightType::kQ6_K) {
        std::memcpy(dst + b * sizeof(BlockQ6_K) + offsetof(BlockQ6_K, d), &scale, 2);
      } else {  // d then dmin lead both Q4_K and Q5_K blocks
        const size_t block = type == WeightType::kQ4_K ? sizeof(BlockQ4_K) : sizeof(BlockQ5_K);
        std::memcpy(dst + b * block, &scale, 2);
        std::memcpy(dst + b * block + 2, &scale, 2);
      }
    }
    if (r >= quantized) continue;
    if (type == WeightType::kQ4_K) {
      QuantizeRowQ4_K(w.data() + r * k, k, reinterpret_cast<BlockQ4_K*>(dst));
    } else if (type == WeightType::kQ5_K) {
      QuantizeRowQ5_K(w.data() + r * k, k, reinterpret_cast<BlockQ5_K*>(dst));
    } else {
      QuantizeRowQ6_K(w.data() + r * k, k, reinterpret_cast<BlockQ6_K*>(dst));
    }
  }
  return bytes;
}

// The portable products of many activation rows at once are bit for bit one row at a time.
TEST(KQuantsTest, ProductsOfManyRowsEqualOneAtATime) {
  const int64_t k = 2 * kQK_K, n = 11;
  std::vector<float> x = bmad::testing::RandomFloats(static_cast<size_t>(n * k), 61, 2.0f);
  std::vector<ActivationBlockQ8_K> xq(static_cast<size_t>(n * k / kQK_K));
  QuantizeActivationRowQ8_K(x.data(), n * k, xq.data());
  for (WeightType type : {WeightType::kQ4_K, WeightType::kQ5_K, WeightType::kQ6_K}) {
    const std::vector<uint8_t> row = KQuantRows(type, 1, 0, k, 63);
    std::vector<float> many(static_cast<size_t>(2 * n), -1.0f);
    const ActivationBlockQ8_K* a = xq.data();
    for (int64_t c = 0; c < n; ++c) {
      const ActivationBlockQ8_K* ac = a + c * (k / kQK_K);
      float one;
      if (type == WeightType::kQ4_K) {
        if (c == 0) DotQ4_KQ8_KRows(reinterpret_cast<const BlockQ4_K*>(row.data()), a, k / kQK_K, n, many.data(), 2);
        one = DotQ4_KQ8_K(reinterpret_cast<const BlockQ4_K*>(row.data()), ac, k / kQK_K);
      } else if (type == WeightType::kQ5_K) {
        if (c == 0) DotQ5_KQ8_KRows(reinterpret_cast<const BlockQ5_K*>(row.data()), a, k / kQK_K, n, many.data(), 2);
        one = DotQ5_KQ8_K(reinterpret_cast<const BlockQ5_K*>(row.data()), ac, k / kQK_K);
      } else {
        if (c == 0) DotQ6_KQ8_KRows(reinterpret_cast<const BlockQ6_K*>(row.data()), a, k / kQK_K, n, many.data(), 2);
        one = DotQ6_KQ8_K(reinterpret_cast<const BlockQ6_K*>(row.data()), ac, k / kQK_K);
      }
      EXPECT_EQ(many[static_cast<size_t>(2 * c)], one) << WeightTypeName(type) << " row " << c;
      EXPECT_EQ(many[static_cast<size_t>(2 * c + 1)], -1.0f) << "the stride's gaps stay untouched";
    }
  }
}

// The AVX-512 VNNI kernels give the portable result bit for bit, for every tile boundary of
// activation rows and rows of weights of each type: rows our quantizers wrote and rows of random
// bytes (every bit pattern of scales, mins and values, Q6_K's negative scales included).
TEST(KQuantsTest, IntegerKernelsEqualThePortableOnes) {
  const cpu::SimdKernels* simd = cpu::Avx512SimdKernels();
  if (simd == nullptr || simd->kquant_dot_rows == cpu::KQuantDotRowsScalar) {
    GTEST_SKIP() << "this CPU has no AVX-512 VNNI: the portable kernels are the only ones";
  }
  const int64_t k = 3 * kQK_K, rows = 9;
  for (WeightType type : {WeightType::kQ4_K, WeightType::kQ5_K, WeightType::kQ6_K}) {
    const size_t row_bytes = RowBytes(type, k);
    const std::vector<uint8_t> bytes = KQuantRows(type, rows, 4, k, 41);
    for (int64_t m : {1, 2, 15, 16, 17, 33}) {
      std::vector<float> x = bmad::testing::RandomFloats(static_cast<size_t>(m * k), 43 + static_cast<uint64_t>(m), 4.0f);
      x[5] = 1e-30f;  // tiny and large magnitudes in one block
      x[6] = 40.0f;
      std::vector<ActivationBlockQ8_K> xq(static_cast<size_t>(m * k / kQK_K));
      QuantizeActivationRowQ8_K(x.data(), m * k, xq.data());
      std::vector<float> got(static_cast<size_t>(m * rows), -1.0f), want(got.size(), -2.0f);
      simd->kquant_dot_rows(type, bytes.data(), row_bytes, rows, xq.data(), m, k, got.data(), rows);
      cpu::KQuantDotRowsScalar(type, bytes.data(), row_bytes, rows, xq.data(), m, k, want.data(), rows);
      ASSERT_EQ(got, want) << WeightTypeName(type) << " m=" << m;
    }
  }
}

}  // namespace
}  // namespace bmad::kernels
