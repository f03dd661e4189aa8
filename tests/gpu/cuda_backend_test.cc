// Backend consistency on a GPU: every op of the CUDA backend against the CPU backend on the same
// random inputs, with a tolerance per data type, including paged attention (prefill and decode)
// with grouped-query heads, ragged and chunked sequences and split-K. Needs a CUDA device: run by
// tests/gpu/run.sh, never by ctest (not registered).
//
// Tolerances, as |gpu - cpu| / (1 + |cpu|): exact for data movement (embedding rows, F16
// conversion in StoreKv, argmax); 1e-5 for F32 reductions in a different order (RMSNorm, softmax,
// attention); 2e-6 * sqrt(length) for F32 and Q8_0 products, whose sums are longer; 1e-4 for F16
// products (both sides multiply F16-rounded activations by F16 weights in F32, but cuBLAS's
// tensor-core order differs from the CPU's chain).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/half.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/q8_0.h"
#include "tests/support/llama3_rope_factors.h"
#include "tests/support/random_floats.h"

namespace bmad::kernels {
namespace {

using bmad::testing::RandomFloats;

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, double tol,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(double(got[i]) - want[i]) / (1.0 + std::fabs(want[i]));
    if (!(err <= worst)) {
      worst = std::isnan(err) ? INFINITY : err;
      at = i;
    }
  }
  EXPECT_LE(worst, tol) << what << ": element " << at << " gpu " << got[at] << " cpu " << want[at];
}

CpuBackend& Cpu() {
  static CpuBackend cpu(CpuBackendOptions{4});
  return cpu;
}

// One backend for the whole test binary, with debug checks: every op synchronizes and checks
// its pointers, so a failure names its op.
CudaBackend& Gpu() {
  static std::unique_ptr<CudaBackend> gpu = [] {
    CudaBackendOptions o;
    o.debug_checks = true;
    Result<std::unique_ptr<CudaBackend>> b = CudaBackend::Create(o);
    if (!b.ok()) {
      std::fprintf(stderr, "cannot make the CUDA backend: %s\n", b.status().ToString().c_str());
      std::abort();
    }
    std::fprintf(stderr, "CUDA backend on %s (%d SMs)\n", (*b)->device_name().c_str(),
                 (*b)->sm_count());
    return std::move(*b);
  }();
  return *gpu;
}

// Device memory holding a copy of a host vector.
template <typename T>
class DeviceVector {
 public:
  explicit DeviceVector(const std::vector<T>& host) : size_(host.size()) {
    EXPECT_EQ(cudaMalloc(&p_, std::max<size_t>(bytes(), 1)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p_, host.data(), bytes(), cudaMemcpyHostToDevice), cudaSuccess);
    // The backend's streams do not wait for cudaMemcpy's (legacy) stream.
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  ~DeviceVector() { cudaFree(p_); }
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;
  T* get() const { return static_cast<T*>(p_); }
  size_t bytes() const { return size_ * sizeof(T); }
  // After every op issued so far; fails the test on the backend's first error.
  std::vector<T> ToHost() const {
    std::vector<T> host(size_);
    const Status s = Gpu().CopyToHost(host.data(), p_, bytes());
    EXPECT_TRUE(s.ok()) << s.ToString();
    return host;
  }

 private:
  void* p_ = nullptr;
  size_t size_;
};

struct HostWeights {
  std::vector<uint8_t> bytes;
  WeightMatrix view;
};

HostWeights MakeWeights(WeightType type, int64_t rows, int64_t cols, uint64_t seed) {
  const std::vector<float> values = RandomFloats(static_cast<size_t>(rows * cols), seed, 0.5f);
  HostWeights w;
  const size_t row_bytes = RowBytes(type, cols);
  w.bytes.resize(row_bytes * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = w.bytes.data() + row_bytes * static_cast<size_t>(r);
    const float* src = values.data() + r * cols;
    if (type == WeightType::kF32) {
      std::memcpy(row, src, static_cast<size_t>(cols) * 4);
    } else if (type == WeightType::kF16) {
      for (int64_t c = 0; c < cols; ++c) reinterpret_cast<uint16_t*>(row)[c] = FloatToHalf(src[c]);
    } else {
      QuantizeRowQ8_0(src, cols, reinterpret_cast<BlockQ8_0*>(row));
    }
  }
  w.view = MakeWeightMatrix(type, w.bytes.data(), rows, cols);
  return w;
}

TEST(CudaBackend, EmbeddingRowsAreExact) {
  for (WeightType type : {WeightType::kF32, WeightType::kF16, WeightType::kQ8_0}) {
    const int64_t cols = type == WeightType::kQ8_0 ? 2048 : 4000;
    const HostWeights table = MakeWeights(type, 300, cols, 1);
    const PreparedWeight d = Gpu().PrepareMatMulWeight(table.view);
    const std::vector<int32_t> ids = {0, 299, 17, 17, 123};
    std::vector<float> want(ids.size() * cols);
    Cpu().Embedding(table.view, ids, want.data());
    DeviceVector<float> out(std::vector<float>(want.size(), NAN));
    Gpu().Embedding(d.view, ids, out.get());
    ExpectClose(out.ToHost(), want, 0.0, std::string(WeightTypeName(type)));
  }
}

TEST(CudaBackend, NormsActivationsAndSamplingOps) {
  for (int64_t dim : {8, 64, 2048, 5000, 32000}) {
    const int64_t rows = 5;
    const std::vector<float> x = RandomFloats(static_cast<size_t>(rows * dim), 2, 3.0f);
    const std::vector<float> w = RandomFloats(static_cast<size_t>(dim), 3);
    std::vector<float> want(x.size());
    Cpu().RmsNorm(x.data(), w.data(), rows, dim, 1e-5f, want.data());
    DeviceVector<float> dx(x), dw(w), out(x);
    Gpu().RmsNorm(dx.get(), dw.get(), rows, dim, 1e-5f, out.get());
    ExpectClose(out.ToHost(), want, 1e-5, "rmsnorm " + std::to_string(dim));

    std::vector<float> sm = x;
    Cpu().Softmax(sm.data(), rows, dim);
    DeviceVector<float> dsm(x);
    Gpu().Softmax(dsm.get(), rows, dim);
    ExpectClose(dsm.ToHost(), sm, 1e-5, "softmax " + std::to_string(dim));

    std::vector<float> ties = x;
    ties[0] = ties[static_cast<size_t>(dim - 1)] = 100.0f;  // row 0: first index wins
    std::vector<int32_t> am(static_cast<size_t>(rows));
    Cpu().Argmax(ties.data(), rows, dim, am.data());
    DeviceVector<float> dties(ties);
    DeviceVector<int32_t> dam(std::vector<int32_t>(static_cast<size_t>(rows), -1));
    Gpu().Argmax(dties.get(), rows, dim, dam.get());
    EXPECT_EQ(dam.ToHost(), am) << "argmax " << dim;
  }
  const int64_t n = 1 << 20;
  const std::vector<float> g = RandomFloats(n, 4, 8.0f), u = RandomFloats(n, 5);
  std::vector<float> want(n);
  Cpu().SwiGlu(g.data(), u.data(), n, want.data());
  DeviceVector<float> dg(g), du(u), out(g);
  Gpu().SwiGlu(dg.get(), du.get(), n, out.get());
  ExpectClose(out.ToHost(), want, 1e-5, "swiglu");
  std::vector<float> sum = g;
  Cpu().Add(sum.data(), u.data(), n);
  Gpu().Add(dg.get(), du.get(), n);
  ExpectClose(dg.ToHost(), sum, 0.0, "add");
}

TEST(CudaBackend, RopeMatchesTheCpu) {
  for (const auto& [hd, rd] :
       std::vector<std::pair<int64_t, int64_t>>{{128, 128}, {64, 32}, {8, 8}}) {
    const int64_t heads = 8, rows = 40;
    std::vector<int32_t> pos(static_cast<size_t>(rows));
    std::iota(pos.begin(), pos.end(), 4000);
    pos[3] = 0;
    std::vector<float> x = RandomFloats(static_cast<size_t>(rows * heads * hd), 6);
    DeviceVector<float> dx(x);
    const RopeConfig rope{rd, 500000.0f, 0.25f};
    Cpu().Rope(x.data(), pos, heads, hd, rope);
    Gpu().Rope(dx.get(), pos, heads, hd, rope);
    ExpectClose(dx.ToHost(), x, 1e-5, "rope " + std::to_string(hd) + "/" + std::to_string(rd));
    // Llama-3.1's frequency factors (rope_freqs.weight).
    const std::vector<float> factors = bmad::testing::Llama3RopeFactors(rd, 500000.0);
    std::vector<float> x3 = RandomFloats(static_cast<size_t>(rows * heads * hd), 7);
    DeviceVector<float> dx3(x3);
    const RopeConfig llama3{rd, 500000.0f, 1.0f, factors};
    Cpu().Rope(x3.data(), pos, heads, hd, llama3);
    Gpu().Rope(dx3.get(), pos, heads, hd, llama3);
    ExpectClose(dx3.ToHost(), x3, 1e-5, "rope, llama3 factors " + std::to_string(hd));
  }
}

// Drawing on the GPU against the CPU's definition (kernels/sample_row.h) on vocabulary-sized rows:
// greedy rows must agree exactly; a sampled row may differ only where the GPU's expf or its
// order of adding puts the draw on the other side of a boundary, which should be rare.
TEST(CudaBackend, SampleRowsDrawsAsTheCpu) {
  const int64_t n = 32000, rows = 256;
  std::vector<float> x = RandomFloats(static_cast<size_t>(rows * n), 21, 4.0f);
  std::mt19937_64 rng(22);
  std::vector<RowSampling> params;
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x.data() + r * n;
    if (r % 4 == 1) {
      for (int64_t i = 0; i < n; ++i) row[i] = std::round(row[i]);  // ties everywhere
    }
    if (r % 8 == 3) row[rng() % n] = -INFINITY;
    RowSampling p;
    p.temperature = r % 5 == 0 ? 0.0f : 0.5f + static_cast<float>(r % 3);
    p.top_k = r % 3 == 0 ? 0 : (r % 3 == 1 ? 40 : 1000);
    p.top_p = r % 4 == 0 ? 1.0f : 0.9f;
    p.min_p = r % 6 == 0 ? 0.05f : 0.0f;
    p.uniform = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    params.push_back(p);
  }
  std::vector<int32_t> want(static_cast<size_t>(rows));
  Cpu().SampleRows(x.data(), rows, n, params, want.data());
  DeviceVector<float> dx(x);
  DeviceVector<int32_t> got(std::vector<int32_t>(static_cast<size_t>(rows), -2));
  Gpu().SampleRows(dx.get(), rows, n, params, got.get());
  const std::vector<int32_t> g = got.ToHost();
  int differ = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const size_t i = static_cast<size_t>(r);
    if (params[i].temperature == 0.0f) {
      EXPECT_EQ(g[i], want[i]) << "greedy row " << r;
    } else if (g[i] != want[i]) {
      ++differ;
      EXPECT_GE(g[i], 0) << "row " << r;
    }
  }
  EXPECT_LE(differ, 2) << "of " << rows << " rows";
}

// Metadata uploads run on the copy stream into two buffers per kind used in turn. Many ops in
// flight at once, each with other positions than the op before it, must each read their own:
// an upload that overwrote a buffer still being read, or a kernel that ran before its upload
// landed, would rotate some rows by the wrong positions.
TEST(CudaBackend, UploadsInFlightKeepEachOpsMetadata) {
  // A backend of its own without debug checks (Gpu() synchronizes after every op, so nothing
  // would be in flight).
  Result<std::unique_ptr<CudaBackend>> made = CudaBackend::Create();
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  CudaBackend& fast = **made;
  const int64_t heads = 32, hd = 128, rows = 2048;
  const RopeConfig rope{hd, 10000.0f, 1.0f};
  constexpr int kOps = 12;
  std::vector<std::vector<float>> want;
  std::vector<std::unique_ptr<DeviceVector<float>>> got;
  for (int op = 0; op < kOps; ++op) {  // every input first: each one synchronizes the device
    want.push_back(RandomFloats(static_cast<size_t>(rows * heads * hd), 100 + op));
    got.push_back(std::make_unique<DeviceVector<float>>(want.back()));
  }
  for (int op = 0; op < kOps; ++op) {
    std::vector<int32_t> pos(static_cast<size_t>(rows));
    std::iota(pos.begin(), pos.end(), 1000 * (op % 3));  // three position sets, in turn
    fast.Rope(got[static_cast<size_t>(op)]->get(), pos, heads, hd, rope);  // nothing waits
    Cpu().Rope(want[static_cast<size_t>(op)].data(), pos, heads, hd, rope);
  }
  const Status done = fast.Synchronize();
  ASSERT_TRUE(done.ok()) << done.ToString();
  for (size_t op = 0; op < want.size(); ++op) {
    std::vector<float> host(want[op].size());
    ASSERT_EQ(cudaMemcpy(host.data(), got[op]->get(), got[op]->bytes(), cudaMemcpyDeviceToHost),
              cudaSuccess);
    ExpectClose(host, want[op], 1e-5, "rope op " + std::to_string(op));
  }
}

TEST(CudaBackend, MatMulEveryWeightTypeAndBatchSize) {
  for (WeightType type : {WeightType::kF32, WeightType::kF16, WeightType::kQ8_0}) {
    for (const auto& [rows, cols] :
         std::vector<std::pair<int64_t, int64_t>>{{64, 64}, {96, 160}, {1000, 2048}, {50, 100}}) {
      if (type == WeightType::kQ8_0 && cols % 32 != 0) continue;  // Q8_0 rows are 32-wide blocks
      // Two F32 sums of the same `cols` terms in different orders drift apart like a random
      // walk of rounding errors, about eps * sqrt(cols) * |partial sums|: on an H200, up to
      // 3.1e-5 for 2048 terms (inputs in [-1, 1] times weights in [-0.5, 0.5]) and under 1e-5
      // for 160. So the bound grows with sqrt(cols): 1.6e-5 at 64, 2.5e-5 at 160, 9e-5 at 2048,
      // still far below what a wrong element, scale or block would give (1e-2 and up).
      const double tol = type == WeightType::kF16 ? 1e-4 : 2e-6 * std::sqrt(double(cols));
      const HostWeights w = MakeWeights(type, rows, cols, 7);
      const PreparedWeight cpu_w = Cpu().PrepareMatMulWeight(w.view);
      const PreparedWeight gpu_w = Gpu().PrepareMatMulWeight(w.view);
      // m <= 4: the F16 GEMV (or, at 100 columns, conversion and cuBLAS); more: cuBLAS.
      for (int64_t m : {1, 2, 3, 4, 7, 8, 9, 33, 128, 300}) {
        const std::vector<float> x = RandomFloats(static_cast<size_t>(m * cols), 8 + m);
        std::vector<float> want(static_cast<size_t>(m * rows));
        Cpu().MatMul(x.data(), m, cpu_w.view, want.data());
        DeviceVector<float> dx(x), dy(std::vector<float>(want.size(), NAN));
        Gpu().MatMul(dx.get(), m, gpu_w.view, dy.get());
        ExpectClose(dy.ToHost(), want, tol,
                    std::string(WeightTypeName(type)) + " " + std::to_string(rows) + "x" +
                        std::to_string(cols) + " m " + std::to_string(m));
      }
    }
  }
}

struct Caches {
  Caches(int64_t n_kv, int64_t hd, int64_t bs, int64_t blocks)
      : n_kv(n_kv),
        hd(hd),
        bs(bs),
        blocks(blocks),
        host(static_cast<size_t>(blocks * 2 * n_kv * bs * hd), uint16_t{0xffff}),
        device(host) {}
  KvLayerView View(uint16_t* base) const {
    const int64_t per = n_kv * bs * hd;
    return KvLayerView{base, base + per, blocks, n_kv, bs, hd, 2 * per};
  }
  int64_t n_kv, hd, bs, blocks;
  std::vector<uint16_t> host;  // NaN everywhere: reading an unwritten slot shows
  DeviceVector<uint16_t> device;
};

struct SeqSpec {
  int32_t start;
  int64_t rows;
};

void CheckAttention(int64_t n_heads, int64_t n_kv, int64_t hd, int64_t bs,
                    const std::vector<SeqSpec>& specs, bool decode) {
  SCOPED_TRACE(::testing::Message() << "heads " << n_heads << "/" << n_kv << " hd " << hd << " bs "
                                  << bs << (decode ? " decode" : " prefill"));
  int64_t blocks = 1;
  for (const SeqSpec& s : specs) blocks += (s.start + s.rows + bs - 1) / bs;
  std::vector<int32_t> pool(static_cast<size_t>(blocks - 1));
  std::iota(pool.begin(), pool.end(), 1);
  std::shuffle(pool.begin(), pool.end(), std::mt19937(static_cast<uint32_t>(blocks)));
  std::vector<std::vector<int32_t>> tables;
  size_t next = 0;
  for (const SeqSpec& s : specs) {
    const auto n = static_cast<size_t>((s.start + s.rows + bs - 1) / bs);
    tables.emplace_back(pool.begin() + static_cast<long>(next),
                        pool.begin() + static_cast<long>(next + n));
    next += n;
  }
  Caches c(n_kv, hd, bs, blocks);
  const int64_t kvw = n_kv * hd, qw = n_heads * hd;
  std::vector<AttentionSequence> history, step;
  int64_t hist_rows = 0, rows = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].start > 0) history.push_back({hist_rows, specs[i].start, 0, tables[i]});
    hist_rows += specs[i].start;
    step.push_back({rows, specs[i].rows, specs[i].start, tables[i]});
    rows += specs[i].rows;
  }
  // History (earlier chunks) and this step, both stored by both backends.
  for (int pass = 0; pass < 2; ++pass) {
    const std::vector<AttentionSequence>& seqs = pass == 0 ? history : step;
    const int64_t n = pass == 0 ? hist_rows : rows;
    const std::vector<float> k = RandomFloats(static_cast<size_t>(n * kvw), 30 + pass);
    const std::vector<float> v = RandomFloats(static_cast<size_t>(n * kvw), 40 + pass);
    Cpu().StoreKv(c.View(c.host.data()), k.data(), v.data(), seqs);
    DeviceVector<float> dk(k), dv(v);
    Gpu().StoreKv(c.View(c.device.get()), dk.get(), dv.get(), seqs);
  }
  ASSERT_TRUE(c.device.ToHost() == c.host) << "StoreKv wrote different bits";

  const std::vector<float> q = RandomFloats(static_cast<size_t>(rows * qw), 50, 2.0f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<float> want(q.size());
  DeviceVector<float> dq(q), out(std::vector<float>(q.size(), NAN));
  if (decode) {
    Cpu().AttentionDecode(c.View(c.host.data()), q.data(), step, n_heads, scale, want.data());
    Gpu().AttentionDecode(c.View(c.device.get()), dq.get(), step, n_heads, scale, out.get());
  } else {
    Cpu().AttentionPrefill(c.View(c.host.data()), q.data(), step, n_heads, scale, want.data());
    Gpu().AttentionPrefill(c.View(c.device.get()), dq.get(), step, n_heads, scale, out.get());
  }
  ExpectClose(out.ToHost(), want, 1e-5, "attention");
}

TEST(CudaBackend, PrefillRaggedChunkedGqa) {
  for (int64_t hd : {128, 64}) {
    CheckAttention(32, 8, hd, 16, {{0, 300}, {16, 5}, {37, 70}, {0, 1}, {500, 129}}, false);
  }
  CheckAttention(8, 4, 8, 16, {{0, 5}, {5, 40}}, false);     // stories260K's shape
  CheckAttention(2, 2, 4, 16, {{0, 6}, {6, 20}}, false);     // llama-2-tiny-random's shape
  CheckAttention(4, 1, 256, 16, {{0, 77}, {3, 40}}, false);  // the opt-in shared-memory kernel
}

TEST(CudaBackend, DecodeRaggedGqaAndSplitK) {
  CheckAttention(32, 8, 128, 16, {{0, 1}, {14, 1}, {15, 1}, {16, 1}, {299, 1}, {4999, 1}}, true);
  CheckAttention(32, 8, 128, 16, {{32767, 1}}, true);  // one long sequence: many splits
  std::vector<SeqSpec> batch;
  for (int i = 0; i < 64; ++i) batch.push_back({static_cast<int32_t>(37 * i + 3), 1});
  CheckAttention(32, 8, 128, 16, batch, true);
  CheckAttention(8, 4, 8, 16, {{9, 1}, {300, 1}}, true);  // stories260K's shape
  CheckAttention(40, 4, 64, 16, {{100, 1}}, true);        // group 10: blocks of 8 and 2 heads
}

TEST(CudaBackend, ScratchStaysFlatAfterWarmUp) {
  // Two different batches in turn: each kind's metadata goes to both of its buffers.
  CheckAttention(32, 8, 128, 16, {{4000, 1}, {10, 1}}, true);
  CheckAttention(32, 8, 128, 16, {{3000, 1}, {20, 1}}, true);
  const uint64_t warm = Gpu().buffer_allocations();
  CheckAttention(32, 8, 128, 16, {{4000, 1}, {10, 1}}, true);
  CheckAttention(32, 8, 128, 16, {{3000, 1}, {20, 1}}, true);
  EXPECT_EQ(Gpu().buffer_allocations(), warm);
}

TEST(CudaBackend, WeightsComeFromTheHooksWhenSet) {
  Result<std::unique_ptr<CudaBackend>> b = CudaBackend::Create();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  const HostWeights w = MakeWeights(WeightType::kF16, 256, 512, 9);
  const size_t bytes = (*b)->PreparedBytes(w.view);
  void* arena = nullptr;
  ASSERT_EQ(cudaMalloc(&arena, 2 * bytes), cudaSuccess);
  size_t used = 0;
  MemoryHooks hooks;
  hooks.allocate_weights = [&](size_t n) -> void* {
    if (used + n > 2 * bytes) return nullptr;
    void* p = static_cast<char*>(arena) + used;
    used += n;
    return p;
  };
  (*b)->SetMemoryHooks(hooks);
  const PreparedWeight p = (*b)->PrepareMatMulWeight(w.view);
  EXPECT_EQ(p.view.data, arena);
  EXPECT_EQ((*b)->system_allocations(), 0u);
  const PreparedWeight again = (*b)->PrepareMatMulWeight(p.view);  // already on the device
  EXPECT_EQ(again.view.data, p.view.data);
  const PreparedWeight third = (*b)->PrepareMatMulWeight(w.view);
  const PreparedWeight fourth = (*b)->PrepareMatMulWeight(w.view);  // the arena is full: cudaMalloc
  EXPECT_EQ((*b)->system_allocations(), 1u);
  EXPECT_TRUE((*b)->Synchronize().ok());
  b->reset();
  cudaFree(arena);
}

TEST(CudaBackend, ErrorsAreStickyAndNameTheOp) {
  CudaBackendOptions o;
  o.debug_checks = true;
  Result<std::unique_ptr<CudaBackend>> b = CudaBackend::Create(o);
  ASSERT_TRUE(b.ok());
  std::vector<float> host(16, 1.0f);
  (*b)->Add(host.data(), host.data(), 16);  // host memory: refused before any launch
  const Status s = (*b)->Synchronize();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("CudaBackend::Add"), std::string::npos) << s.message();
  DeviceVector<float> d(host);
  (*b)->Add(d.get(), d.get(), 16);  // skipped: the first failure stays
  EXPECT_EQ((*b)->Synchronize(), s);
  EXPECT_EQ(d.ToHost(), host);
}

}  // namespace
}  // namespace bmad::kernels
