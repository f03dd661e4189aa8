// The CUDA backend's kernels (kernels/cuda/*.cu, the real sources) run on the CPU by the SIMT
// emulator (tests/kernels/simt/) and compared with the CPU backend, through the same launchers
// and host-side metadata builders the backend uses. This checks the kernels' logic (indexing,
// paging through block tables, causal masks, GQA, split-K, reductions, Q8_0 decoding) on
// machines without a GPU; tests/gpu/ checks the same on a GPU, plus what the emulator cannot
// (timing, memory ordering, cuBLAS).
//
// KV caches start filled with F16 NaNs: a kernel reading a slot it should not makes the output
// NaN and fails the comparison.
#include <gtest/gtest.h>

#include <limits>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/half.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/op_metadata.h"
#include "kernels/q8_0.h"
#include "kernels/reference/reference_backend.h"
// Last: the emulator's header defines CUDA's names (threadIdx, __shared__, ...) as macros.
#include "kernels/cuda/kernel_launchers.h"
#include "tests/support/llama3_rope_factors.h"
#include "tests/support/random_floats.h"

namespace bmad::cuda {
namespace {

using bmad::testing::RandomFloats;
using kernels::AttentionSequence;
using kernels::KvLayerView;
using kernels::WeightMatrix;
using kernels::WeightType;

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, double tol,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(double(got[i]) - want[i]) / (1.0 + std::fabs(want[i]));
    if (!(err <= worst)) {  // NaN counts as worst
      worst = std::isnan(err) ? INFINITY : err;
      at = i;
    }
  }
  EXPECT_LE(worst, tol) << what << ": element " << at << " got " << got[at] << " want " << want[at];
}

kernels::CpuBackend& Cpu() {
  static kernels::CpuBackend cpu(kernels::CpuBackendOptions{1, &kernels::cpu::ScalarSimdKernels()});
  return cpu;
}

struct OwnedWeights {
  std::vector<uint8_t> bytes;
  WeightMatrix view;
};

OwnedWeights MakeWeights(WeightType type, int64_t rows, int64_t cols, uint64_t seed) {
  const std::vector<float> values = RandomFloats(static_cast<size_t>(rows * cols), seed, 0.5f);
  OwnedWeights w;
  const size_t row_bytes = kernels::RowBytes(type, cols);
  w.bytes.resize(row_bytes * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = w.bytes.data() + row_bytes * static_cast<size_t>(r);
    const float* src = values.data() + r * cols;
    if (type == WeightType::kF32) {
      std::memcpy(row, src, static_cast<size_t>(cols) * 4);
    } else if (type == WeightType::kF16) {
      for (int64_t c = 0; c < cols; ++c) reinterpret_cast<uint16_t*>(row)[c] = FloatToHalf(src[c]);
    } else {
      kernels::QuantizeRowQ8_0(src, cols, reinterpret_cast<kernels::BlockQ8_0*>(row));
    }
  }
  w.view = kernels::MakeWeightMatrix(type, w.bytes.data(), rows, cols);
  return w;
}

TEST(CudaKernelsEmulated, EmbeddingRowsOfEveryTypeAreExact) {
  for (WeightType type : {WeightType::kF32, WeightType::kF16, WeightType::kQ8_0}) {
    const int64_t cols = type == WeightType::kQ8_0 ? 96 : 40;
    const OwnedWeights table = MakeWeights(type, 50, cols, 3);
    const std::vector<int32_t> ids = {7, 0, 49, 7, 13};
    std::vector<float> want(ids.size() * cols), got(ids.size() * cols, NAN);
    Cpu().Embedding(table.view, ids, want.data());
    ASSERT_EQ(launch::Embedding(static_cast<int>(type), table.view.data, table.view.row_bytes, cols,
                                ids.data(), static_cast<int64_t>(ids.size()), got.data(), nullptr),
              0);
    ExpectClose(got, want, 0.0, std::string(kernels::WeightTypeName(type)));
  }
}

TEST(CudaKernelsEmulated, RowOpsMatchTheCpu) {
  for (int64_t dim : {8, 1000, 4096}) {
    const int64_t rows = 3;
    const std::vector<float> x = RandomFloats(static_cast<size_t>(rows * dim), 1, 2.0f);
    const std::vector<float> w = RandomFloats(static_cast<size_t>(dim), 2);
    std::vector<float> want(x.size()), got(x.size(), NAN);
    Cpu().RmsNorm(x.data(), w.data(), rows, dim, 1e-5f, want.data());
    ASSERT_EQ(launch::RmsNorm(x.data(), w.data(), rows, dim, 1e-5f, got.data(), nullptr), 0);
    ExpectClose(got, want, 2e-6, "rmsnorm dim " + std::to_string(dim));

    std::vector<float> sm_want = x, sm_got = x;
    Cpu().Softmax(sm_want.data(), rows, dim);
    ASSERT_EQ(launch::Softmax(sm_got.data(), rows, dim, nullptr), 0);
    ExpectClose(sm_got, sm_want, 1e-6, "softmax n " + std::to_string(dim));
  }
}

TEST(CudaKernelsEmulated, ArgmaxTakesTheLowestIndexOnTies) {
  const int64_t n = 3000;
  std::vector<float> x = RandomFloats(static_cast<size_t>(4 * n), 5);
  x[5] = x[2900] = 9.0f;  // row 0: tie, first wins
  x[n + 1234] = 3.0f;     // row 1: unique
  for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(2 * n + i)] = -1.0f;  // row 2: all equal
  x[3 * n + n - 1] = 7.0f;  // row 3: the last element
  std::vector<int32_t> want(4), got(4, -1);
  Cpu().Argmax(x.data(), 4, n, want.data());
  ASSERT_EQ(launch::Argmax(x.data(), 4, n, got.data(), nullptr), 0);
  EXPECT_EQ(got, want);
  EXPECT_EQ(got, (std::vector<int32_t>{5, 1234, 0, static_cast<int32_t>(n - 1)}));

  // -1 where the host sampler refuses: a NaN (row 0), +inf (row 1), nothing above -inf (row 2);
  // -inf elsewhere is never picked (row 3: all -inf but one, far from the start).
  const float inf = std::numeric_limits<float>::infinity();
  x[2999] = NAN;
  x[n + 7] = inf;
  for (int64_t i = 0; i < n; ++i) {
    x[static_cast<size_t>(2 * n + i)] = -inf;
    x[static_cast<size_t>(3 * n + i)] = -inf;
  }
  x[3 * n + 2047] = -5.0f;
  Cpu().Argmax(x.data(), 4, n, want.data());
  ASSERT_EQ(launch::Argmax(x.data(), 4, n, got.data(), nullptr), 0);
  EXPECT_EQ(got, want);
  EXPECT_EQ(got, (std::vector<int32_t>{-1, -1, -1, 2047}));
}

TEST(CudaKernelsEmulated, ElementwiseOpsMatchTheCpu) {
  const int64_t n = 100003;
  const std::vector<float> a = RandomFloats(static_cast<size_t>(n), 8, 6.0f),
                           b = RandomFloats(static_cast<size_t>(n), 9);
  std::vector<float> want(a.size()), got(a.size(), NAN);
  Cpu().SwiGlu(a.data(), b.data(), n, want.data());
  ASSERT_EQ(launch::SwiGlu(a.data(), b.data(), n, got.data(), nullptr), 0);
  ExpectClose(got, want, 1e-6, "swiglu");
  std::vector<float> sum_want = a, sum_got = a;
  Cpu().Add(sum_want.data(), b.data(), n);
  ASSERT_EQ(launch::Add(sum_got.data(), b.data(), n, nullptr), 0);
  ExpectClose(sum_got, sum_want, 0.0, "add");
  std::vector<uint16_t> halves(a.size());
  ASSERT_EQ(launch::ConvertToHalf(a.data(), n, halves.data(), nullptr), 0);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(halves[i], FloatToHalf(a[i])) << i;
}

TEST(CudaKernelsEmulated, RopeMatchesTheCpu) {
  for (const auto& [head_dim, rope_dim] :
       std::vector<std::pair<int64_t, int64_t>>{{64, 64}, {8, 8}, {96, 32}}) {
    const int64_t n_heads = 3, rows = 5;
    const std::vector<int32_t> positions = {0, 1, 17, 4095, 100000};
    std::vector<float> want = RandomFloats(static_cast<size_t>(rows * n_heads * head_dim), 4),
                       got = want;
    const kernels::RopeConfig rope{rope_dim, 10000.0f, 0.5f};
    Cpu().Rope(want.data(), positions, n_heads, head_dim, rope);
    ASSERT_EQ(launch::Rope(got.data(), positions.data(), rows, n_heads, head_dim, rope_dim,
                           rope.freq_base, rope.freq_scale, nullptr, nullptr),
              0);
    ExpectClose(got, want, 1e-6,
                "rope " + std::to_string(head_dim) + "/" + std::to_string(rope_dim));
    // Llama-3.1's frequency factors.
    const std::vector<float> factors = bmad::testing::Llama3RopeFactors(rope_dim, 500000.0);
    std::vector<float> want3 = RandomFloats(static_cast<size_t>(rows * n_heads * head_dim), 6),
                       got3 = want3;
    const kernels::RopeConfig llama3{rope_dim, 500000.0f, 1.0f, factors};
    Cpu().Rope(want3.data(), positions, n_heads, head_dim, llama3);
    ASSERT_EQ(launch::Rope(got3.data(), positions.data(), rows, n_heads, head_dim, rope_dim,
                           llama3.freq_base, llama3.freq_scale, factors.data(), nullptr),
              0);
    ExpectClose(got3, want3, 1e-6,
                "rope with factors " + std::to_string(head_dim) + "/" + std::to_string(rope_dim));
  }
}

// Enough rows that a thread rotates several heads (2, 2, 2 and 1 of 7), not one.
TEST(CudaKernelsEmulated, RopeGroupsHeadsWhenRowsAreMany) {
  const int64_t n_heads = 7, rows = 2000, head_dim = 8;
  ASSERT_EQ(RopeHeadsPerThread(rows, head_dim / 2, n_heads), 2);
  std::vector<int32_t> positions(static_cast<size_t>(rows));
  for (int64_t t = 0; t < rows; ++t) positions[static_cast<size_t>(t)] = static_cast<int32_t>(3 * t);
  std::vector<float> want = RandomFloats(static_cast<size_t>(rows * n_heads * head_dim), 5),
                     got = want;
  const kernels::RopeConfig rope{head_dim, 10000.0f, 1.0f};
  Cpu().Rope(want.data(), positions, n_heads, head_dim, rope);
  ASSERT_EQ(launch::Rope(got.data(), positions.data(), rows, n_heads, head_dim, head_dim,
                         rope.freq_base, rope.freq_scale, nullptr, nullptr),
            0);
  ExpectClose(got, want, 1e-6, "rope, grouped heads");
}

TEST(CudaKernelsEmulated, Q8ActivationRoundingIsTheCpusBitForBit) {
  // Blocks of every magnitude, an all-zero block, and exact halves (ties round to even).
  std::vector<float> x = RandomFloats(32 * 40, 21, 3.0f);
  for (int j = 0; j < 32; ++j) x[32 * 5 + j] = 0.0f;
  for (int j = 0; j < 32; ++j) x[32 * 6 + j] = j == 0 ? 127.0f : 0.5f + static_cast<float>(j);
  for (int j = 0; j < 32; ++j) x[32 * 7 + j] = j % 2 ? 1e-38f : -3e-38f;  // 127 / max overflows
  for (int64_t b = 0; b < 40; ++b)
    if (b != 7) {
      for (int j = 0; j < 32; ++j) x[static_cast<size_t>(b * 32 + j)] *= std::ldexp(1.0f, int(b % 9) - 4);
    }
  std::vector<float> want(x.size()), got(x.size(), NAN);
  kernels::RoundToQ8_0(x.data(), static_cast<int64_t>(x.size()), want.data());
  ASSERT_EQ(launch::RoundToQ8_0(x.data(), static_cast<int64_t>(x.size()), got.data(), nullptr), 0);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(got[i], want[i]) << i;
}

TEST(CudaKernelsEmulated, Q8ProductsMatchTheReferenceForGemvAndTiledShapes) {
  const int64_t rows = 100, cols = 160;
  const OwnedWeights w = MakeWeights(WeightType::kQ8_0, rows, cols, 11);
  kernels::ReferenceBackend reference;
  for (int64_t m : {1, 3, 8, 9, 70}) {
    const std::vector<float> x = RandomFloats(static_cast<size_t>(m * cols), 12 + m);
    std::vector<float> want(static_cast<size_t>(m * rows)), got(want.size(), NAN);
    reference.MatMul(x.data(), m, w.view, want.data());
    // The backend's two launches: the activations rounded to Q8_0, then the product.
    std::vector<float> xq(x.size(), NAN);
    ASSERT_EQ(launch::RoundToQ8_0(x.data(), m * cols, xq.data(), nullptr), 0);
    ASSERT_EQ(launch::Q8MatMul(xq.data(), m, w.view.data, w.view.row_bytes, rows, cols, got.data(),
                               nullptr),
              0);
    ExpectClose(got, want, 2e-6, "q8_0 m " + std::to_string(m));
  }
}

// The F16 GEMV (decode steps of up to kF16GemvMaxRows sequences): F16-rounded inputs times F16
// weights, F32 sums, as the reference backend; rows that end a block partway, and columns that end a
// warp's pass of 16-byte loads partway.
TEST(CudaKernelsEmulated, F16GemvMatchesTheCpu) {
  const int64_t rows = 37;
  kernels::ReferenceBackend reference;
  for (int64_t cols : {8 * 33, 8 * 300}) {  // one pass of a warp's loads, and three
    const OwnedWeights w = MakeWeights(WeightType::kF16, rows, cols, 13);
    for (int64_t m = 1; m <= kF16GemvMaxRows; ++m) {
      const std::vector<float> x = RandomFloats(static_cast<size_t>(m * cols), 14 + m, 3.0f);
      ASSERT_TRUE(F16GemvApplies(m, cols, w.view.row_bytes, w.view.data, x.data()));
      std::vector<float> want(static_cast<size_t>(m * rows)), got(want.size(), NAN);
      reference.MatMul(x.data(), m, w.view, want.data());
      ASSERT_EQ(launch::F16Gemv(x.data(), m, w.view.data, w.view.row_bytes, rows, cols,
                                got.data(), nullptr),
                0);
      ExpectClose(got, want, 2e-6 * std::sqrt(double(cols)),
                  "f16 gemv m " + std::to_string(m) + " cols " + std::to_string(cols));
    }
    EXPECT_NE(launch::F16Gemv(nullptr, kF16GemvMaxRows + 1, w.view.data, w.view.row_bytes, rows,
                              cols, nullptr, nullptr),
              0);
  }
}

// A one-layer paged cache: block b holds K then V, [n_kv_heads][block_size][head_dim] each.
struct Cache {
  Cache(int64_t n_kv, int64_t hd, int64_t bs, int64_t blocks)
      : n_kv(n_kv),
        hd(hd),
        bs(bs),
        blocks(blocks),
        storage(static_cast<size_t>(blocks * 2 * n_kv * bs * hd), uint16_t{0x7e00}) {}
  KvLayerView View() {
    const int64_t per = n_kv * bs * hd;
    return KvLayerView{storage.data(), storage.data() + per, blocks, n_kv, bs, hd, 2 * per};
  }
  launch::KvArgs Args() {
    const KvLayerView v = View();
    launch::KvArgs a;
    a.k = v.k;
    a.v = v.v;
    a.block_stride = v.block_stride;
    a.n_kv_heads = static_cast<int>(n_kv);
    a.block_size = static_cast<int>(bs);
    a.head_dim = static_cast<int>(hd);
    return a;
  }
  int64_t n_kv, hd, bs, blocks;
  std::vector<uint16_t> storage;
};

struct SeqSpec {
  int32_t start;  // cached positions before this step
  int64_t rows;   // new tokens this step
};

// Stores each sequence's history with the CPU backend in both caches, then this step's keys and
// values with the CPU backend (one cache) and the emulated kernel (the other), compares the
// caches bit for bit, and then the attention outputs.
void CheckAttention(int64_t n_heads, int64_t n_kv, int64_t hd, int64_t bs,
                    const std::vector<SeqSpec>& specs, bool decode, int sm_count) {
  SCOPED_TRACE(::testing::Message() << "heads " << n_heads << "/" << n_kv << " hd " << hd << " bs "
                                  << bs << (decode ? " decode" : " prefill") << " sms "
                                  << sm_count);
  int64_t blocks_needed = 1;
  for (const SeqSpec& s : specs) blocks_needed += (s.start + s.rows + bs - 1) / bs;
  std::vector<int32_t> pool(static_cast<size_t>(blocks_needed - 1));
  std::iota(pool.begin(), pool.end(), 1);
  std::shuffle(pool.begin(), pool.end(), std::mt19937(static_cast<uint32_t>(hd * 31 + bs)));
  std::vector<std::vector<int32_t>> tables;
  size_t next = 0;
  for (const SeqSpec& s : specs) {
    const auto n = static_cast<size_t>((s.start + s.rows + bs - 1) / bs);
    tables.emplace_back(pool.begin() + static_cast<long>(next),
                        pool.begin() + static_cast<long>(next + n));
    next += n;
  }
  Cache cpu_cache(n_kv, hd, bs, blocks_needed), emu_cache(n_kv, hd, bs, blocks_needed);
  const int64_t kv_width = n_kv * hd, q_width = n_heads * hd;

  std::vector<AttentionSequence> history, step;
  int64_t hist_rows = 0, rows = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].start > 0) history.push_back({hist_rows, specs[i].start, 0, tables[i]});
    hist_rows += specs[i].start;
    step.push_back({rows, specs[i].rows, specs[i].start, tables[i]});
    rows += specs[i].rows;
  }
  const std::vector<float> hk = RandomFloats(static_cast<size_t>(hist_rows * kv_width), 21);
  const std::vector<float> hv = RandomFloats(static_cast<size_t>(hist_rows * kv_width), 22);
  Cpu().StoreKv(cpu_cache.View(), hk.data(), hv.data(), history);
  Cpu().StoreKv(emu_cache.View(), hk.data(), hv.data(), history);

  const std::vector<float> k = RandomFloats(static_cast<size_t>(rows * kv_width), 23);
  const std::vector<float> v = RandomFloats(static_cast<size_t>(rows * kv_width), 24);
  const std::vector<float> q = RandomFloats(static_cast<size_t>(rows * q_width), 25, 2.0f);
  Cpu().StoreKv(cpu_cache.View(), k.data(), v.data(), step);
  std::vector<int32_t> slots;
  AppendKvSlots(step, bs, slots);
  ASSERT_EQ(launch::StoreKv(emu_cache.Args(), k.data(), v.data(), slots.data(),
                            static_cast<int64_t>(slots.size() / 3), nullptr),
            0);
  ASSERT_TRUE(cpu_cache.storage == emu_cache.storage) << "StoreKv wrote different bits";

  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<float> want(static_cast<size_t>(rows * q_width)), got(want.size(), NAN);
  std::vector<int32_t> meta;
  AppendAttentionMeta(step, bs, meta);
  if (decode) {
    Cpu().AttentionDecode(cpu_cache.View(), q.data(), step, n_heads, scale, want.data());
    const DecodeLaunch plan = DecodeLaunchFor(static_cast<int64_t>(step.size()), n_heads, n_kv, hd,
                                              MaxContext(step), sm_count);
    std::vector<float> partials(plan.partial_floats, NAN);
    ASSERT_EQ(launch::AttentionDecode(emu_cache.Args(), q.data(), meta.data(), plan, n_heads, scale,
                                      partials.data(), got.data(), nullptr),
              0);
  } else {
    Cpu().AttentionPrefill(cpu_cache.View(), q.data(), step, n_heads, scale, want.data());
    std::vector<int64_t> row_counts;
    for (const AttentionSequence& s : step) row_counts.push_back(s.row_count);
    const std::vector<PrefillWorkItem> items = PrefillWorkItems(row_counts);
    std::vector<int32_t> work;
    for (const PrefillWorkItem& w : items) {
      work.push_back(w.seq);
      work.push_back(w.row_lo);
    }
    ASSERT_EQ(launch::AttentionPrefill(emu_cache.Args(), q.data(), meta.data(),
                                       static_cast<int64_t>(step.size()), work.data(),
                                       static_cast<int64_t>(items.size()), n_heads, scale,
                                       got.data(), nullptr),
              0);
  }
  ExpectClose(got, want, 3e-6, "attention output");
}

TEST(CudaKernelsEmulated, PrefillRaggedChunkedGqa) {
  // Whole prompts, a chunk after 16 cached tokens, a chunk starting mid-block, one row.
  CheckAttention(4, 2, 16, 16, {{0, 37}, {16, 5}, {3, 33}, {40, 1}}, false, 132);
}

TEST(CudaKernelsEmulated, PrefillTinyHeadsAsTheSharedModels) {
  CheckAttention(8, 4, 8, 16, {{0, 5}, {5, 12}}, false, 132);  // stories260K's shape
  CheckAttention(2, 2, 4, 16, {{0, 6}}, false, 132);           // llama-2-tiny-random's shape
}

TEST(CudaKernelsEmulated, PrefillWideHeadsUseTheSecondKernel) {
  CheckAttention(2, 1, 136, 8, {{0, 9}, {12, 20}}, false, 132);
}

TEST(CudaKernelsEmulated, DecodeWithoutSplits) {
  ASSERT_EQ(DecodeLaunchFor(4, 8, 2, 32, 300, 1).splits, 1);  // a "GPU" of one multiprocessor
  CheckAttention(8, 2, 32, 16, {{0, 1}, {16, 1}, {299, 1}, {40, 1}}, true, 1);
}

TEST(CudaKernelsEmulated, DecodeSplitAlongTheContext) {
  // One long sequence on a "GPU" of 8 multiprocessors: split-K plus the reduction kernel, with
  // the last split partly and (for the short sequence) wholly empty.
  const DecodeLaunch plan = DecodeLaunchFor(2, 4, 2, 16, 700, 8);
  ASSERT_GT(plan.splits, 1);
  CheckAttention(4, 2, 16, 16, {{699, 1}, {5, 1}}, true, 8);
}

// Head dims that are powers of two from 8 to 256 take the 16-byte-load kernel (kG lanes a row:
// 1 for 8, 2 for 16 above, 4 for 32 above, 8, 16, 32 here); others the pair-of-dims kernel with
// 1, 2 or 4 pairs a lane, the last partly past the row. With and without splits, and tiles of
// several passes of the block's warps.
TEST(CudaKernelsEmulated, DecodeEveryHeadDimKernel) {
  CheckAttention(4, 2, 128, 16, {{135, 1}, {40, 1}}, true, 132);  // 16 lanes a row, split
  CheckAttention(4, 2, 128, 16, {{300, 1}, {7, 1}}, true, 1);     // no split, two tiles
  // Four tiles for 8 heads: some head's largest score comes after its first tile, so the
  // running sums must be rescaled.
  CheckAttention(8, 2, 128, 16, {{1000, 1}}, true, 1);
  CheckAttention(4, 1, 64, 16, {{90, 1}, {3, 1}}, true, 132);   // 8 lanes a row
  CheckAttention(2, 1, 256, 8, {{70, 1}, {0, 1}}, true, 132);   // a row a warp load
  CheckAttention(2, 2, 8, 4, {{33, 1}, {300, 1}}, true, 132);   // a lane a row
  CheckAttention(2, 2, 4, 16, {{20, 1}, {1, 1}}, true, 132);    // pairs: one a lane
  CheckAttention(6, 2, 96, 16, {{150, 1}, {9, 1}}, true, 132);  // two pairs a lane
  CheckAttention(6, 2, 96, 16, {{600, 1}}, true, 1);            //   three tiles
  CheckAttention(2, 1, 200, 8, {{70, 1}, {0, 1}}, true, 132);   // four pairs a lane, the last
  CheckAttention(2, 1, 200, 8, {{70, 1}}, true, 1);             //   partly beyond head_dim
}

TEST(CudaKernelsEmulated, DecodeLargeGroupsSpanSeveralBlocks) {
  CheckAttention(20, 2, 8, 4, {{30, 1}, {2, 1}}, true, 132);  // group 10: blocks of 8 and 2 heads
  CheckAttention(8, 4, 8, 16, {{9, 1}}, true, 132);           // stories260K's shape
}

}  // namespace
}  // namespace bmad::cuda
