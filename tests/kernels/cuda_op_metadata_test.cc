// The CUDA backend's host-side metadata (kernels/cuda/op_metadata.h): the attention and StoreKv
// arrays the kernels read, and the mapping of a row-major y = x · Wᵀ onto cuBLAS's column-major
// GEMM, checked with a plain column-major GEMM written from cuBLAS's documented semantics.
#include "kernels/cuda/op_metadata.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/cuda/launch_params.h"

namespace bmad::cuda {
namespace {

using kernels::AttentionSequence;

TEST(CudaOpMetadata, AttentionMetaListsSequencesThenTheBlocksTheyReach) {
  const std::vector<int32_t> t0 = {5, 9, 2, 77};  // longer than needed: only 2 blocks reached
  const std::vector<int32_t> t1 = {3};
  const std::vector<int32_t> t2 = {8, 1, 4};
  const std::vector<AttentionSequence> seqs = {{0, 20, 0, t0}, {20, 1, 15, t1}, {21, 4, 30, t2}};
  std::vector<int32_t> meta = {-1};  // appends after what is there
  AppendAttentionMeta(seqs, 16, meta);
  const std::vector<int32_t> want = {-1, 0, 20, 0, 0,  // 20 tokens: blocks 0..1
                                     20, 1, 15, 2,     // position 15: block 0
                                     21, 4, 30, 3,     // positions 30..33: blocks 0..2
                                     5,  9, 3,  8, 1, 4};
  EXPECT_EQ(meta, want);
  EXPECT_EQ(kSeqFields, 4);
  EXPECT_EQ(MaxContext(seqs), 34);
  EXPECT_EQ(MaxContext({}), 1);
}

TEST(CudaOpMetadata, KvSlotsNameRowBlockAndSlotOfEveryNewToken) {
  const std::vector<int32_t> t0 = {6, 2};
  const std::vector<int32_t> t1 = {9};
  const std::vector<AttentionSequence> seqs = {{0, 3, 3, t0}, {3, 1, 0, t1}};
  std::vector<int32_t> slots;
  AppendKvSlots(seqs, 4, slots);
  EXPECT_EQ(slots, (std::vector<int32_t>{0, 6, 3, 1, 2, 0, 2, 2, 1, 3, 9, 0}));
}

// C (m × n, column-major, ldc) = op(A) · B as cublasGemmEx computes it.
void ColumnMajorGemm(const GemmArgs& g, const float* a, const float* b, float* c) {
  for (int j = 0; j < g.n; ++j) {
    for (int i = 0; i < g.m; ++i) {
      double acc = 0;
      for (int k = 0; k < g.k; ++k) {
        const float av = g.transpose_a ? a[k + i * g.lda] : a[i + k * g.lda];
        acc += double(av) * b[k + j * g.ldb];
      }
      c[i + j * g.ldc] = static_cast<float>(acc);
    }
  }
}

TEST(CudaOpMetadata, RowMajorProductMapsOntoColumnMajorGemm) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (const auto& [m, rows, cols, stride] :
       std::vector<std::tuple<int, int, int, int>>{{1, 7, 5, 5}, {4, 3, 8, 8}, {6, 9, 4, 10}}) {
    std::vector<float> x(static_cast<size_t>(m * cols)), w(static_cast<size_t>(rows * stride));
    for (float& v : x) v = dist(rng);
    for (float& v : w) v = dist(rng);
    std::vector<float> want(static_cast<size_t>(m * rows)), got(want.size(), -99.0f);
    for (int i = 0; i < m; ++i) {
      for (int r = 0; r < rows; ++r) {
        double acc = 0;
        for (int c = 0; c < cols; ++c) acc += double(x[i * cols + c]) * w[r * stride + c];
        want[static_cast<size_t>(i * rows + r)] = static_cast<float>(acc);
      }
    }
    const GemmArgs g = RowMajorProduct(m, rows, cols, stride);
    ColumnMajorGemm(g, w.data(), x.data(), got.data());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR(got[i], want[i], 1e-5) << "m " << m << " rows " << rows << " at " << i;
    }
    EXPECT_GE(g.lda, g.k) << "cuBLAS needs lda >= k for op T";
    EXPECT_GE(g.ldb, g.k);
    EXPECT_GE(g.ldc, g.m);
  }
}

}  // namespace
}  // namespace bmad::cuda
