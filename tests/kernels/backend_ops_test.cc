// Every op of the CPU backend against the reference backend (plain double-precision loops), on
// random data with odd sizes and ragged batches, with the AVX-512 kernels (when the CPU has them)
// and the portable ones, on 1 and 3 threads.
#include <gtest/gtest.h>

#include <limits>

#include <array>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "common/bfloat16.h"
#include "common/half.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/k_quants.h"
#include "kernels/legacy_quants.h"
#include "kernels/q8_0.h"
#include "kernels/reference/reference_backend.h"
#include "tests/support/llama3_rope_factors.h"
#include "tests/support/random_floats.h"

namespace bmad::kernels {
namespace {

using bmad::testing::RandomFloats;

struct Variant {
  const char* name;
  const cpu::SimdKernels* simd;
  int threads;
};

std::vector<Variant> Variants() {
  std::vector<Variant> v = {{"scalar-1t", &cpu::ScalarSimdKernels(), 1},
                            {"scalar-3t", &cpu::ScalarSimdKernels(), 3}};
  if (const cpu::SimdKernels* avx = cpu::Avx512SimdKernels()) {
    v.push_back({"avx512-1t", avx, 1});
    v.push_back({"avx512-3t", avx, 3});
    // Where the CPU has VNNI, the above use integer Q8_0 products; also test the float ones.
    const cpu::SimdKernels* plain = cpu::Avx512SimdKernels(/*allow_vnni=*/false);
    if (plain != avx) v.push_back({"avx512-novnni-3t", plain, 3});
  }
  return v;
}

// A weight matrix of the given type with its storage.
struct OwnedWeights {
  std::vector<uint8_t> bytes;
  WeightMatrix view;
};

OwnedWeights MakeWeights(WeightType type, int64_t rows, int64_t cols, uint64_t seed) {
  const std::vector<float> values = RandomFloats(static_cast<size_t>(rows * cols), seed, 0.5f);
  OwnedWeights w;
  w.bytes.resize(RowBytes(type, cols) * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = w.bytes.data() + RowBytes(type, cols) * static_cast<size_t>(r);
    const float* src = values.data() + r * cols;
    switch (type) {
      case WeightType::kF32: std::memcpy(row, src, static_cast<size_t>(cols) * 4); break;
      case WeightType::kF16:
        for (int64_t c = 0; c < cols; ++c) reinterpret_cast<uint16_t*>(row)[c] = FloatToHalf(src[c]);
        break;
      case WeightType::kQ8_0: QuantizeRowQ8_0(src, cols, reinterpret_cast<BlockQ8_0*>(row)); break;
      case WeightType::kQ4_K: QuantizeRowQ4_K(src, cols, reinterpret_cast<BlockQ4_K*>(row)); break;
      case WeightType::kQ5_K: QuantizeRowQ5_K(src, cols, reinterpret_cast<BlockQ5_K*>(row)); break;
      case WeightType::kQ6_K: QuantizeRowQ6_K(src, cols, reinterpret_cast<BlockQ6_K*>(row)); break;
      case WeightType::kBF16:
        for (int64_t c = 0; c < cols; ++c) reinterpret_cast<uint16_t*>(row)[c] = FloatToBf16(src[c]);
        break;
      case WeightType::kQ4_0: QuantizeRowQ4_0(src, cols, reinterpret_cast<BlockQ4_0*>(row)); break;
      case WeightType::kQ5_0: QuantizeRowQ5_0(src, cols, reinterpret_cast<BlockQ5_0*>(row)); break;
      case WeightType::kQ4_1: QuantizeRowQ4_1(src, cols, reinterpret_cast<BlockQ4_1*>(row)); break;
      case WeightType::kQ5_1: QuantizeRowQ5_1(src, cols, reinterpret_cast<BlockQ5_1*>(row)); break;
    }
  }
  w.view = MakeWeightMatrix(type, w.bytes.data(), rows, cols);
  return w;
}

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, double tol,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(double(got[i]) - want[i]) / (1.0 + std::fabs(want[i]));
    if (!(err <= worst)) {
      worst = err;
      at = i;
    }
  }
  EXPECT_LE(worst, tol) << what << ": index " << at << " got " << got[at] << " want " << want[at];
}

// The types the CPU backend packs into panels.
constexpr WeightType kPackedTypes[] = {WeightType::kF32,  WeightType::kF16,  WeightType::kBF16, WeightType::kQ8_0,
                                       WeightType::kQ4_0, WeightType::kQ5_0, WeightType::kQ4_1, WeightType::kQ5_1};

class BackendOpsTest : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override {
    CpuBackendOptions options;
    options.simd = GetParam().simd;
    options.threads = GetParam().threads;
    cpu_ = std::make_unique<CpuBackend>(options);
  }
  // MatMuls of x (m rows) with every weight in `views` gives each output bit for bit what MatMul
  // gives it alone.
  void ExpectMatMulsEqualEachAlone(const std::vector<float>& x, int64_t m, const std::vector<WeightMatrix>& views,
                                   const std::string& what) {
    std::vector<std::vector<float>> shared(views.size()), alone(views.size());
    std::vector<const WeightMatrix*> ws;
    std::vector<float*> ys;
    for (size_t i = 0; i < views.size(); ++i) {
      shared[i].assign(static_cast<size_t>(m * views[i].rows), -1.0f);
      alone[i].assign(shared[i].size(), -2.0f);
      ws.push_back(&views[i]);
      ys.push_back(shared[i].data());
      cpu_->MatMul(x.data(), m, views[i], alone[i].data());
    }
    cpu_->MatMuls(x.data(), m, ws, ys);
    for (size_t i = 0; i < views.size(); ++i) {
      ASSERT_EQ(shared[i], alone[i]) << what << " weight " << i << " (" << WeightTypeName(views[i].type) << ")";
    }
  }

  std::unique_ptr<CpuBackend> cpu_;
  ReferenceBackend ref_;
};

TEST_P(BackendOpsTest, MatMulAllTypesAndShapes) {
  struct Shape {
    int64_t m, n, k;
  };
  const Shape shapes[] = {{1, 1, 8},    {1, 17, 64},   {2, 5, 96},    {3, 130, 32},
                          {5, 64, 172}, {7, 33, 768},  {16, 70, 64},  {31, 9, 160},
                          {32, 40, 64}, {33, 129, 96}, {70, 300, 32}, {1, 1000, 768},
                          {300, 33, 160},  // m x k large enough to round activations in parallel
                          {2, 70, 256},   {17, 65, 512}, {300, 20, 256}};
  uint64_t seed = 1;
  for (WeightType type : {WeightType::kF32, WeightType::kF16, WeightType::kQ8_0, WeightType::kQ4_K,
                          WeightType::kQ5_K, WeightType::kQ6_K, WeightType::kBF16, WeightType::kQ4_0,
                          WeightType::kQ5_0, WeightType::kQ4_1, WeightType::kQ5_1}) {
    for (const Shape& s : shapes) {
      if (s.k % BlockElements(type) != 0) continue;
      OwnedWeights w = MakeWeights(type, s.n, s.k, ++seed);
      const std::vector<float> x = RandomFloats(static_cast<size_t>(s.m * s.k), ++seed);
      std::vector<float> got(static_cast<size_t>(s.m * s.n), -7.0f), want(got.size());
      cpu_->MatMul(x.data(), s.m, w.view, got.data());
      ref_.MatMul(x.data(), s.m, w.view, want.data());
      // Sums of k products of magnitude <= 0.5: allow F32 rounding over k terms.
      ExpectClose(got, want, 2e-6 * double(s.k),
                  std::string(WeightTypeName(type)) + " m=" + std::to_string(s.m) +
                      " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k));
    }
  }
}

// Prepared (packed) weights: every shape against the reference, and each output row bit-identical
// whatever the number of rows multiplied with it (batch invariance).
TEST_P(BackendOpsTest, PreparedMatMulMatchesReferenceAndIsBatchInvariant) {
  uint64_t seed = 100;
  for (WeightType type : kPackedTypes) {
    for (int64_t n : {1, 15, 16, 17, 100, 128, 129, 300}) {
      for (int64_t k : {32, 64, 86, 96, 160, 172}) {
        if (k % BlockElements(type) != 0) continue;
        OwnedWeights w = MakeWeights(type, n, k, ++seed);
        PreparedWeight prepared = cpu_->PrepareMatMulWeight(w.view);
        ASSERT_EQ(prepared.view.layout, WeightLayout::kPanels16);
        // Q4_0 and Q5_0 are packed as the Q8_0 blocks of the same values.
        ASSERT_EQ(prepared.view.type, type == WeightType::kQ4_0 || type == WeightType::kQ5_0 ? WeightType::kQ8_0 : type);
        const int64_t max_m = 40;
        const std::vector<float> x = RandomFloats(static_cast<size_t>(max_m * k), ++seed);
        std::vector<float> all(static_cast<size_t>(max_m * n)), want(all.size());
        cpu_->MatMul(x.data(), max_m, prepared.view, all.data());
        ref_.MatMul(x.data(), max_m, w.view, want.data());
        ExpectClose(all, want, 2e-6 * double(k),
                    std::string(WeightTypeName(type)) + " n=" + std::to_string(n) +
                        " k=" + std::to_string(k));
        for (int64_t m : {1, 2, 3, 5, 7, 12, 13, 25, 37}) {
          std::vector<float> part(static_cast<size_t>(m * n));
          // Rows 3..3+m of the same activations, multiplied alone.
          const int64_t first = std::min<int64_t>(3, max_m - m);
          cpu_->MatMul(x.data() + first * k, m, prepared.view, part.data());
          for (int64_t i = 0; i < m * n; ++i) {
            ASSERT_EQ(part[static_cast<size_t>(i)], all[static_cast<size_t>(first * n + i)])
                << WeightTypeName(type) << " n=" << n << " k=" << k << " m=" << m << " at " << i;
          }
        }
      }
    }
  }
}

// A prefill-sized batch (its activations are rounded to F16 / Q8_0 once, on several threads,
// where a decode step's few rows are rounded by each thread for itself): every row
// bit-identical to that row multiplied alone.
TEST_P(BackendOpsTest, PreparedMatMulLargeBatchRowsEqualSingleRows) {
  const int64_t m = 600, n = 40, k = 256;
  uint64_t seed = 500;
  for (WeightType type : kPackedTypes) {
    OwnedWeights w = MakeWeights(type, n, k, ++seed);
    PreparedWeight prepared = cpu_->PrepareMatMulWeight(w.view);
    const std::vector<float> x = RandomFloats(static_cast<size_t>(m * k), ++seed);
    std::vector<float> all(static_cast<size_t>(m * n)), one(static_cast<size_t>(n));
    cpu_->MatMul(x.data(), m, prepared.view, all.data());
    for (int64_t r : {0, 1, 127, 128, 255, 299, 511, 599}) {
      cpu_->MatMul(x.data() + r * k, 1, prepared.view, one.data());
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(one[static_cast<size_t>(i)], all[static_cast<size_t>(r * n + i)])
            << WeightTypeName(type) << " row " << r << " output " << i;
      }
    }
  }
}

// MatMuls (a layer's Q, K and V; its gate and up, in one call) gives each output bit for bit what
// MatMul gives it alone: prepared weights of one type sharing a loop, weights of mixed types and
// layouts one by one, an empty one among them.
TEST_P(BackendOpsTest, MatMulsEqualsEachMatMulAlone) {
  const int64_t k = 96;
  uint64_t seed = 700;
  for (const int64_t m : {1, 8, 37}) {
    const std::vector<float> x = RandomFloats(static_cast<size_t>(m * k), ++seed);
    for (const bool mixed : {false, true}) {
      for (WeightType type : kPackedTypes) {
        // Q (wide), K and V (narrow, V not a multiple of a panel), as in a GQA layer.
        std::vector<OwnedWeights> owned;
        std::vector<PreparedWeight> prepared;
        std::vector<WeightMatrix> views;
        const int64_t rows[] = {200, 40, 0, 33};
        for (size_t i = 0; i < 4; ++i) {
          const WeightType t = mixed && i == 1 ? WeightType::kF32 : type;
          owned.push_back(MakeWeights(t, rows[i], k, ++seed));
          prepared.push_back(cpu_->PrepareMatMulWeight(owned.back().view));
          views.push_back(mixed && i == 3 ? owned.back().view : prepared.back().view);
        }
        ExpectMatMulsEqualEachAlone(x, m, views,
                                    std::string(WeightTypeName(type)) + (mixed ? " mixed" : "") +
                                        " m=" + std::to_string(m));
      }
    }
  }
}

// K-quant weights stay in rows (the CPU backend does not pack them), and each output is still
// bit-identical whatever the number of rows multiplied with it, threads included.
TEST_P(BackendOpsTest, KQuantMatMulIsBatchInvariant) {
  const int64_t k = 512, max_m = 40;
  uint64_t seed = 900;
  for (WeightType type : {WeightType::kQ4_K, WeightType::kQ5_K, WeightType::kQ6_K}) {
    for (int64_t n : {1, 63, 64, 65, 200}) {
      OwnedWeights w = MakeWeights(type, n, k, ++seed);
      PreparedWeight prepared = cpu_->PrepareMatMulWeight(w.view);
      ASSERT_EQ(prepared.view.layout, WeightLayout::kRows);
      ASSERT_EQ(prepared.view.data, w.view.data);
      EXPECT_EQ(cpu_->PreparedBytes(w.view), 0u);
      const std::vector<float> x = RandomFloats(static_cast<size_t>(max_m * k), ++seed);
      std::vector<float> all(static_cast<size_t>(max_m * n));
      cpu_->MatMul(x.data(), max_m, prepared.view, all.data());
      for (int64_t m : {1, 2, 15, 16, 17, 37}) {
        std::vector<float> part(static_cast<size_t>(m * n));
        const int64_t first = std::min<int64_t>(3, max_m - m);
        cpu_->MatMul(x.data() + first * k, m, prepared.view, part.data());
        for (int64_t i = 0; i < m * n; ++i) {
          ASSERT_EQ(part[static_cast<size_t>(i)], all[static_cast<size_t>(first * n + i)])
              << WeightTypeName(type) << " n=" << n << " m=" << m << " at " << i;
        }
      }
    }
  }
}

// A layer's products of one input mixing K-quants with other types and layouts, as Q4_K_M files
// do (Q4_K query and key, Q6_K value): the K-quant products share one rounding of the input to
// Q8_K, and a packed or Q8_0 product between them must not disturb it. Each output bit for bit
// what MatMul gives it alone.
TEST_P(BackendOpsTest, MatMulsMixingKQuantsEqualsEachMatMulAlone) {
  const int64_t k = 512;
  uint64_t seed = 950;
  const WeightType types[] = {WeightType::kQ4_K, WeightType::kQ6_K, WeightType::kF16,  WeightType::kQ5_K,
                              WeightType::kQ8_0, WeightType::kQ4_K, WeightType::kBF16, WeightType::kQ5_0,
                              WeightType::kQ4_1};
  const int64_t rows[] = {70, 33, 40, 65, 17, 0, 24, 50, 20};
  for (const int64_t m : {1, 9, 300}) {
    const std::vector<float> x = RandomFloats(static_cast<size_t>(m * k), ++seed);
    std::vector<OwnedWeights> owned;
    std::vector<PreparedWeight> prepared;
    std::vector<WeightMatrix> views;
    for (size_t i = 0; i < std::size(types); ++i) {
      owned.push_back(MakeWeights(types[i], rows[i], k, ++seed));
      prepared.push_back(cpu_->PrepareMatMulWeight(owned.back().view));
      // The Q8_0 weight unpacked (rows), the F16 one packed.
      views.push_back(types[i] == WeightType::kQ8_0 ? owned.back().view : prepared.back().view);
    }
    ExpectMatMulsEqualEachAlone(x, m, views, "m=" + std::to_string(m));
  }
}

TEST_P(BackendOpsTest, EmbeddingNormRopeSwiGluSoftmaxArgmax) {
  for (WeightType type : {WeightType::kF32, WeightType::kF16, WeightType::kQ8_0, WeightType::kQ4_K,
                          WeightType::kQ5_K, WeightType::kQ6_K, WeightType::kBF16, WeightType::kQ4_0,
                          WeightType::kQ5_0, WeightType::kQ4_1, WeightType::kQ5_1}) {
    const int64_t cols = IsKQuant(type) ? 512 : 64;
    OwnedWeights table = MakeWeights(type, 50, cols, 3);
    const std::vector<int32_t> ids = {0, 49, 7, 7, 23};
    std::vector<float> got(ids.size() * static_cast<size_t>(cols)), want(got.size());
    cpu_->Embedding(table.view, ids, got.data());
    ref_.Embedding(table.view, ids, want.data());
    ExpectClose(got, want, 0, "embedding");
  }
  for (int64_t dim : {8, 64, 97, 768}) {
    const int64_t rows = 9;  // 9 x 768 is split among the threads
    const auto x = RandomFloats(static_cast<size_t>(rows * dim), 9);
    const auto weight = RandomFloats(static_cast<size_t>(dim), 10);
    std::vector<float> got(x.size()), want(x.size());
    cpu_->RmsNorm(x.data(), weight.data(), rows, dim, 1e-5f, got.data());
    ref_.RmsNorm(x.data(), weight.data(), rows, dim, 1e-5f, want.data());
    ExpectClose(got, want, 1e-5, "rmsnorm dim " + std::to_string(dim));
  }
  for (auto [head_dim, rope_dim] : {std::pair<int64_t, int64_t>{8, 8}, {64, 64}, {64, 32}}) {
    const int64_t heads = 3;
    const std::vector<int32_t> pos = {0, 1, 5, 511, 4000};
    const std::vector<float> llama3 = bmad::testing::Llama3RopeFactors(rope_dim, 500000.0);
    for (const bool factors : {false, true}) {
      auto x = RandomFloats(pos.size() * static_cast<size_t>(heads * head_dim), 11);
      auto want = x;
      RopeConfig rope{rope_dim, factors ? 500000.0f : 10000.0f, 0.5f};
      if (factors) rope.freq_factors = llama3;
      cpu_->Rope(x.data(), pos, heads, head_dim, rope);
      ref_.Rope(want.data(), pos, heads, head_dim, rope);
      ExpectClose(x, want, 2e-5, factors ? "rope, llama3 factors" : "rope");
    }
  }
  {
    // A factor divides its pair's angle: every factor 2 at position 2p turns as none at p. The
    // CPU backend's cached angles must not outlive a change of factors alone.
    const int64_t heads = 2, head_dim = 16;
    const std::vector<int32_t> doubled = {0, 2, 10, 1000}, plain = {0, 1, 5, 500};
    const std::vector<float> twos(head_dim / 2, 2.0f), ones(head_dim / 2, 1.0f);
    const auto x = RandomFloats(doubled.size() * static_cast<size_t>(heads * head_dim), 12);
    for (Backend* b : std::initializer_list<Backend*>{cpu_.get(), &ref_}) {
      RopeConfig halved{head_dim, 10000.0f, 1.0f, twos}, unscaled{head_dim, 10000.0f, 1.0f, ones};
      auto got = x, want = x, same = x;
      b->Rope(got.data(), doubled, heads, head_dim, halved);
      b->Rope(want.data(), plain, heads, head_dim, RopeConfig{head_dim, 10000.0f, 1.0f});
      ExpectClose(got, want, 1e-5, "rope factors 2 at 2p");
      b->Rope(same.data(), doubled, heads, head_dim, unscaled);  // same positions, new factors
      auto none = x;
      b->Rope(none.data(), doubled, heads, head_dim, RopeConfig{head_dim, 10000.0f, 1.0f});
      ExpectClose(same, none, 0, "rope factors 1");
    }
  }
  {
    const auto g = RandomFloats(1000, 12, 6.0f), u = RandomFloats(1000, 13);
    std::vector<float> got(1000), want(1000);
    cpu_->SwiGlu(g.data(), u.data(), 1000, got.data());
    ref_.SwiGlu(g.data(), u.data(), 1000, want.data());
    ExpectClose(got, want, 1e-6, "swiglu");
    auto a = g, b = g;
    cpu_->Add(a.data(), u.data(), 1000);
    ref_.Add(b.data(), u.data(), 1000);
    ExpectClose(a, b, 0, "add");
  }
  {
    // Over the serial threshold, a range where exp(-|g|) underflows, and in place.
    const size_t n = 40000;
    auto g = RandomFloats(n, 15, 100.0f);
    const auto u = RandomFloats(n, 16);
    std::vector<float> want(n);
    ref_.SwiGlu(g.data(), u.data(), static_cast<int64_t>(n), want.data());
    cpu_->SwiGlu(g.data(), u.data(), static_cast<int64_t>(n), g.data());
    ExpectClose(g, want, 1e-6, "swiglu in place");
    // Add over its serial threshold too (a prefill chunk's residual).
    auto a = RandomFloats(100003, 17), b = a;
    const auto y = RandomFloats(a.size(), 18);
    cpu_->Add(a.data(), y.data(), static_cast<int64_t>(a.size()));
    ref_.Add(b.data(), y.data(), static_cast<int64_t>(b.size()));
    ExpectClose(a, b, 0, "add, large");
  }
  {
    auto x = RandomFloats(3 * 101, 14, 20.0f);
    auto want = x;
    cpu_->Softmax(x.data(), 3, 101);
    ref_.Softmax(want.data(), 3, 101);
    ExpectClose(x, want, 1e-6, "softmax");
    std::vector<float> logits = {1, 5, 5, 2, -1, 0, 0, -3};  // a tie: the lowest index wins
    int32_t got[2], expect[2];
    cpu_->Argmax(logits.data(), 2, 4, got);
    ref_.Argmax(logits.data(), 2, 4, expect);
    EXPECT_EQ(got[0], 1);
    EXPECT_EQ(got[1], 1);
    EXPECT_EQ(got[0], expect[0]);
    // Rows enough to be split among the threads.
    const auto many = RandomFloats(7 * 10000, 17);
    int32_t many_got[7], many_expect[7];
    cpu_->Argmax(many.data(), 7, 10000, many_got);
    ref_.Argmax(many.data(), 7, 10000, many_expect);
    for (int r = 0; r < 7; ++r) EXPECT_EQ(many_got[r], many_expect[r]) << "row " << r;
    // What the host sampler refuses gives -1: a NaN, +inf, nothing above -inf. -inf elsewhere
    // is never picked.
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float> odd = {-inf, -inf, -2, -inf,  1, NAN, 9, 0,  0, 1, inf, 2,
                              -inf, -inf, -inf, -inf};
    int32_t odd_got[4], odd_expect[4];
    cpu_->Argmax(odd.data(), 4, 4, odd_got);
    ref_.Argmax(odd.data(), 4, 4, odd_expect);
    for (int r = 0; r < 4; ++r) {
      EXPECT_EQ(odd_got[r], (std::array<int32_t, 4>{2, -1, -1, -1})[r]) << "row " << r;
      EXPECT_EQ(odd_expect[r], odd_got[r]) << "row " << r;
    }
  }
}

// The CPU backend keeps the angles of its last rotation (every layer of a step rotates by the
// same ones): other positions, another config, fewer rows, and a batch large enough to be split
// among the threads must each get their own.
TEST_P(BackendOpsTest, RopeAfterOtherPositionsAndConfigs) {
  const int64_t heads = 4, head_dim = 64;
  std::vector<int32_t> many(200);
  for (size_t i = 0; i < many.size(); ++i) many[i] = static_cast<int32_t>(3 * i + 1);
  struct Case {
    std::vector<int32_t> pos;
    RopeConfig rope;
  };
  const std::vector<int32_t> a = {0, 1, 5, 511}, b = {1, 2, 6, 512};
  const std::vector<Case> cases = {
      {a, {64, 10000.0f, 1.0f}}, {a, {64, 10000.0f, 1.0f}}, {b, {64, 10000.0f, 1.0f}},
      {a, {64, 500000.0f, 1.0f}}, {a, {64, 500000.0f, 0.25f}}, {a, {32, 500000.0f, 0.25f}},
      {{0, 1, 5}, {32, 500000.0f, 0.25f}}, {many, {64, 10000.0f, 1.0f}}, {a, {64, 10000.0f, 1.0f}}};
  uint64_t seed = 40;
  for (size_t c = 0; c < cases.size(); ++c) {
    const Case& k = cases[c];
    auto x = RandomFloats(k.pos.size() * static_cast<size_t>(heads * head_dim), ++seed);
    auto want = x;
    cpu_->Rope(x.data(), k.pos, heads, head_dim, k.rope);
    ref_.Rope(want.data(), k.pos, heads, head_dim, k.rope);
    ExpectClose(x, want, 2e-5, "rope case " + std::to_string(c));
  }
}

// A paged cache with scattered block ids and ragged sequences.
struct CacheFixture {
  int64_t n_kv_heads, head_dim, block_size, num_blocks;
  std::vector<uint16_t> k, v;
  KvLayerView View() {
    return KvLayerView{k.data(), v.data(), num_blocks, n_kv_heads,
                       block_size, head_dim, n_kv_heads * block_size * head_dim};
  }
};

void RunAttentionCase(Backend& cpu, Backend& ref, int64_t n_heads, int64_t n_kv_heads,
                      int64_t head_dim, int64_t block_size, const std::vector<int32_t>& start_pos,
                      const std::vector<int32_t>& counts, bool decode, uint64_t seed) {
  const int64_t width_q = n_heads * head_dim, width_kv = n_kv_heads * head_dim;
  int64_t num_blocks = 1;  // block 0 is reserved
  std::vector<std::vector<int32_t>> tables;
  std::mt19937 rng(static_cast<uint32_t>(seed));
  for (size_t s = 0; s < start_pos.size(); ++s) {
    const int64_t blocks = (start_pos[s] + counts[s] + block_size - 1) / block_size;
    tables.emplace_back();
    for (int64_t b = 0; b < blocks; ++b) tables.back().push_back(static_cast<int32_t>(num_blocks++));
  }
  // Scatter: permute block ids across sequences so tables are not contiguous.
  std::vector<int32_t> perm(static_cast<size_t>(num_blocks - 1));
  std::iota(perm.begin(), perm.end(), 1);
  std::shuffle(perm.begin(), perm.end(), rng);
  for (auto& t : tables)
    for (auto& b : t) b = perm[static_cast<size_t>(b - 1)];

  CacheFixture c{n_kv_heads, head_dim, block_size, num_blocks, {}, {}};
  const size_t cache_elems = static_cast<size_t>(num_blocks * n_kv_heads * block_size * head_dim);
  c.k.assign(cache_elems, 0);
  c.v.assign(cache_elems, 0);
  // Earlier context (positions < start_pos) stored through the reference.
  std::vector<AttentionSequence> history, now;
  int64_t hist_rows = 0, rows = 0;
  for (size_t s = 0; s < start_pos.size(); ++s) {
    history.push_back({hist_rows, start_pos[s], 0, tables[s]});
    hist_rows += start_pos[s];
    now.push_back({rows, counts[s], start_pos[s], tables[s]});
    rows += counts[s];
  }
  const auto hk = RandomFloats(static_cast<size_t>(hist_rows * width_kv), seed + 1);
  const auto hv = RandomFloats(static_cast<size_t>(hist_rows * width_kv), seed + 2);
  KvLayerView view = c.View();
  ref.StoreKv(view, hk.data(), hv.data(), history);
  CacheFixture c_ref = c;
  KvLayerView view_ref = c_ref.View();

  const auto q = RandomFloats(static_cast<size_t>(rows * width_q), seed + 3);
  const auto k = RandomFloats(static_cast<size_t>(rows * width_kv), seed + 4);
  const auto v = RandomFloats(static_cast<size_t>(rows * width_kv), seed + 5);
  cpu.StoreKv(view, k.data(), v.data(), now);
  ref.StoreKv(view_ref, k.data(), v.data(), now);
  ASSERT_EQ(c.k, c_ref.k);
  ASSERT_EQ(c.v, c_ref.v);
  std::vector<float> got(static_cast<size_t>(rows * width_q)), want(got.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  if (decode) {
    cpu.AttentionDecode(view, q.data(), now, n_heads, scale, got.data());
    ref.AttentionDecode(view_ref, q.data(), now, n_heads, scale, want.data());
  } else {
    cpu.AttentionPrefill(view, q.data(), now, n_heads, scale, got.data());
    ref.AttentionPrefill(view_ref, q.data(), now, n_heads, scale, want.data());
  }
  ExpectClose(got, want, 2e-5,
              std::string(decode ? "decode" : "prefill") + " heads " + std::to_string(n_heads) +
                  "/" + std::to_string(n_kv_heads) + " hd " + std::to_string(head_dim) + " bs " +
                  std::to_string(block_size));
}

TEST_P(BackendOpsTest, PagedAttentionDecode) {
  // One new token per sequence, ragged context lengths, GQA groups of 1, 2 and 4.
  RunAttentionCase(*cpu_, ref_, 8, 8, 8, 16, {0, 5, 16, 40}, {1, 1, 1, 1}, true, 21);
  RunAttentionCase(*cpu_, ref_, 8, 4, 8, 4, {3, 0, 100}, {1, 1, 1}, true, 22);
  RunAttentionCase(*cpu_, ref_, 12, 3, 64, 16, {200, 1, 17, 63, 64}, {1, 1, 1, 1, 1}, true, 23);
  RunAttentionCase(*cpu_, ref_, 4, 2, 20, 1, {7, 2}, {1, 1}, true, 24);
  // 8-token blocks (the default) with the widest head kept in registers, a head too wide for
  // them, and blocks longer than the 8-token score groups.
  RunAttentionCase(*cpu_, ref_, 2, 2, 128, 8, {100, 7, 8}, {1, 1, 1}, true, 25);
  RunAttentionCase(*cpu_, ref_, 2, 1, 144, 8, {9, 30}, {1, 1}, true, 26);
  RunAttentionCase(*cpu_, ref_, 6, 3, 32, 32, {31, 32, 95}, {1, 1, 1}, true, 27);
}

TEST_P(BackendOpsTest, PagedAttentionPrefillWholeAndChunked) {
  RunAttentionCase(*cpu_, ref_, 8, 4, 8, 16, {0}, {37}, false, 31);                  // whole
  RunAttentionCase(*cpu_, ref_, 8, 4, 8, 16, {20, 0, 33}, {15, 5, 40}, false, 32);   // chunks
  RunAttentionCase(*cpu_, ref_, 12, 12, 64, 16, {0, 128}, {70, 17}, false, 33);
  RunAttentionCase(*cpu_, ref_, 6, 2, 16, 3, {1, 9}, {2, 11}, false, 34);
  RunAttentionCase(*cpu_, ref_, 4, 2, 8, 16, {0, 0, 0}, {5, 19, 33}, false, 35);  // a tp=2 shard of stories260K
  RunAttentionCase(*cpu_, ref_, 4, 2, 16, 32, {5, 40}, {30, 9}, false, 36);  // blocks over 16 tokens
  RunAttentionCase(*cpu_, ref_, 2, 2, 64, 8, {0, 3}, {1, 21}, false, 37);
  // A sequence with no new rows among others: nothing to do for it.
  RunAttentionCase(*cpu_, ref_, 4, 2, 16, 8, {0, 0, 9}, {0, 12, 0}, false, 38);
  // Contexts over one 2048-token span: spans merged by the running softmax.
  RunAttentionCase(*cpu_, ref_, 2, 1, 16, 8, {2100, 4090}, {1, 1}, true, 39);
  RunAttentionCase(*cpu_, ref_, 2, 2, 16, 16, {2040}, {20}, false, 40);
  // Enough rows (74 of 512 KV values) that StoreKv splits them among the threads, across
  // sequences with and without rows.
  RunAttentionCase(*cpu_, ref_, 8, 8, 64, 8, {0, 5, 3, 0, 60}, {0, 40, 0, 33, 1}, false, 41);
}

// The engine draws its sequences' tokens through ParallelForOnHost: every index exactly once,
// spread over the compute threads, and done when the call returns.
TEST(CpuBackendHostLoopTest, RunsEveryIndexOnceOnTheComputeThreads) {
  CpuBackend backend(CpuBackendOptions{.threads = 2});
  for (int64_t n : {0, 1, 7, 200}) {
    std::vector<std::atomic<int>> calls(static_cast<size_t>(n));
    backend.ParallelForOnHost(n, [&](int64_t i) { calls[static_cast<size_t>(i)].fetch_add(1); });
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(calls[static_cast<size_t>(i)].load(), 1) << i;
  }
  // Both threads take part. On a loaded machine the caller may finish a loop before the other
  // thread wakes, so a few loops of 200 ms of work are allowed to show it.
  std::set<std::thread::id> threads;
  for (int attempt = 0; attempt < 5 && threads.size() < 2; ++attempt) {
    std::mutex m;
    backend.ParallelForOnHost(200, [&](int64_t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::lock_guard<std::mutex> lock(m);
      threads.insert(std::this_thread::get_id());
    });
  }
  EXPECT_EQ(threads.size(), 2u);
}

INSTANTIATE_TEST_SUITE_P(Variants, BackendOpsTest, ::testing::ValuesIn(Variants()),
                         [](const auto& info) {
                           std::string n = info.param.name;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace bmad::kernels
