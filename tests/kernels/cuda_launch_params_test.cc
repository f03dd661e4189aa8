// The CUDA backend's launch decisions (kernels/cuda/launch_params.h), checked on the CPU: every
// grid covers its problem, nothing exceeds a hardware limit, and split-K covers every position
// of the longest sequence exactly once. These run in CI, where no GPU is.
#include "kernels/cuda/launch_params.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace bmad::cuda {
namespace {

// Limits of sm_80 / sm_90 the launches must respect.
constexpr int64_t kMaxGridY = 65535, kMaxGridZ = 65535;
constexpr size_t kMaxOptInShared = 163 * 1024;  // sm_80's opt-in limit (sm_90 allows 227 KiB)

TEST(CudaLaunchParams, ElementwiseCoversEveryElementWithCappedGrid) {
  EXPECT_EQ(ElementwiseLaunch(0).blocks, 0);
  EXPECT_EQ(ElementwiseLaunch(-3).blocks, 0);
  for (int64_t n : std::vector<int64_t>{1, 255, 256, 257, 100000, int64_t{1} << 31}) {
    const Launch1d l = ElementwiseLaunch(n);
    EXPECT_EQ(l.threads, kElementwiseThreads);
    EXPECT_GE(l.blocks, 1);
    EXPECT_LE(l.blocks, kMaxElementwiseBlocks) << n;
    // Grid-stride loops cover everything; without the cap, one element per thread.
    if (l.blocks < kMaxElementwiseBlocks) {
      EXPECT_GE(l.blocks * l.threads, n) << n;
    }
    EXPECT_LT((l.blocks - 1) * l.threads, n) << n;  // no block is idle from the start
  }
}

TEST(CudaLaunchParams, RowReductionThreadsArePowersOfTwoWarps) {
  EXPECT_EQ(RowReductionThreads(1), 32);
  EXPECT_EQ(RowReductionThreads(8), 32);
  EXPECT_EQ(RowReductionThreads(33), 64);
  EXPECT_EQ(RowReductionThreads(4096), 1024);
  EXPECT_EQ(RowReductionThreads(32000), 1024);
  for (int64_t n = 1; n < 3000; n += 7) {
    const int t = RowReductionThreads(n);
    EXPECT_EQ(t % 32, 0);
    EXPECT_EQ(t & (t - 1), 0) << "not a power of two: " << t;
    EXPECT_LE(t, 1024);
    if (t > 32) {
      EXPECT_LT(t / 2, n) << "more threads than the row needs";
    }
  }
}

TEST(CudaLaunchParams, Q8ProductsPickGemvForFewRowsAndCoverTheOutput) {
  for (int64_t m : std::vector<int64_t>{1, 2, 7, 8}) {
    const Q8Launch l = Q8MatMulLaunch(m, 4099);
    EXPECT_EQ(l.kernel, Q8Kernel::kGemv) << m;
    EXPECT_EQ(l.threads, 32 * kQ8GemvWarpsPerBlock);
    EXPECT_GE(l.grid_x * kQ8GemvWarpsPerBlock, 4099);
    EXPECT_EQ(l.grid_y, 1);
  }
  for (int64_t m : std::vector<int64_t>{9, 64, 65, 300, 4096}) {
    const Q8Launch l = Q8MatMulLaunch(m, 5632);
    EXPECT_EQ(l.kernel, Q8Kernel::kTiled) << m;
    EXPECT_EQ(l.threads, kQ8TileThreads);
    EXPECT_GE(l.grid_x * kQ8TileCols, 5632);
    EXPECT_LT((l.grid_x - 1) * kQ8TileCols, 5632);
    EXPECT_GE(l.grid_y * kQ8TileRows, m);
    EXPECT_LT((l.grid_y - 1) * kQ8TileRows, m);
    EXPECT_LE(l.grid_y, kMaxGridY);
  }
  // The tiled kernel's 4×4 outputs per thread cover the tile exactly.
  EXPECT_EQ(kQ8TileThreads * 16, kQ8TileRows * kQ8TileCols);
}

TEST(CudaLaunchParams, F16ActivationScratchIsAlignedAndLargeEnough) {
  for (int64_t m : std::vector<int64_t>{1, 3, 256}) {
    for (int64_t cols : std::vector<int64_t>{8, 2048, 5632}) {
      const size_t bytes = F16ActivationBytes(m, cols);
      EXPECT_EQ(bytes % 256, 0u);
      EXPECT_GE(bytes, static_cast<size_t>(m * cols * 2));
      EXPECT_LT(bytes, static_cast<size_t>(m * cols * 2) + 256);
    }
  }
}

TEST(CudaLaunchParams, PrefillTilesFitSharedMemoryAndCoverHeadDims) {
  for (int64_t hd = 2; hd <= kMaxHeadDim; hd += 2) {
    const PrefillLaunch l = PrefillLaunchFor(hd);
    EXPECT_GE(l.dims_per_thread * 4, hd) << "4 threads per row must cover head_dim " << hd;
    EXPECT_EQ(l.shared_bytes, PrefillSharedBytes(hd));
    EXPECT_EQ(l.needs_opt_in, l.shared_bytes > kDefaultSharedBytes) << hd;
    EXPECT_LE(l.shared_bytes, kMaxOptInShared) << hd;
    EXPECT_EQ(l.shared_bytes % 16, 0u);
  }
  // The common Llama head sizes need no opt-in.
  EXPECT_FALSE(PrefillLaunchFor(64).needs_opt_in);
  EXPECT_FALSE(PrefillLaunchFor(128).needs_opt_in);
  EXPECT_EQ(PrefillLaunchFor(128).dims_per_thread, 32);
  EXPECT_EQ(PrefillLaunchFor(256).dims_per_thread, 64);
  // Threads: four per query row, and a score tile divisible among them.
  EXPECT_EQ(kPrefillThreads, 4 * kPrefillRows);
  EXPECT_EQ(kPrefillKvTile % 4, 0);
}

TEST(CudaLaunchParams, PrefillWorkItemsCoverEveryRowOnce) {
  const std::vector<int64_t> rows = {1, 32, 33, 0, 70, 5};
  const std::vector<PrefillWorkItem> items = PrefillWorkItems(rows);
  std::vector<std::vector<int>> seen(rows.size());
  for (size_t s = 0; s < rows.size(); ++s) seen[s].assign(static_cast<size_t>(rows[s]), 0);
  int32_t last_seq = 0;
  for (const PrefillWorkItem& w : items) {
    EXPECT_GE(w.seq, last_seq) << "items are in sequence order";
    last_seq = w.seq;
    ASSERT_LT(w.row_lo, rows[static_cast<size_t>(w.seq)]) << "no item starts past its sequence";
    const int64_t end =
        std::min<int64_t>(w.row_lo + kPrefillRows, rows[static_cast<size_t>(w.seq)]);
    for (int64_t r = w.row_lo; r < end; ++r) {
      ++seen[static_cast<size_t>(w.seq)][static_cast<size_t>(r)];
    }
  }
  for (size_t s = 0; s < rows.size(); ++s) {
    for (int count : seen[s]) EXPECT_EQ(count, 1) << "sequence " << s;
  }
  EXPECT_EQ(items.size(), 1u + 1u + 2u + 0u + 3u + 1u);
  EXPECT_TRUE(PrefillWorkItems({}).empty());
}

TEST(CudaLaunchParams, RopeGivesFewRowsAThreadPerHeadAndManyRowsOnePerPair) {
  EXPECT_EQ(RopeHeadsPerThread(1, 64, 16), 1);      // decode at batch 1: 1024 threads
  EXPECT_EQ(RopeHeadsPerThread(32, 64, 16), 1);     // 32 rows: 32768 threads
  EXPECT_EQ(RopeHeadsPerThread(64, 64, 16), 2);     // 64 rows: 8 groups of 2
  EXPECT_EQ(RopeHeadsPerThread(4096, 64, 32), 32);  // a long prompt: one group
  EXPECT_EQ(RopeHeadsPerThread(0, 64, 8), 1);
  EXPECT_EQ(RopeHeadsPerThread(5, 4, 1), 1);
  for (int64_t rows : {1, 3, 100, 5000}) {
    for (int64_t heads : {1, 7, 32, 64}) {
      const int64_t hpt = RopeHeadsPerThread(rows, 32, heads);
      EXPECT_GE(hpt, 1);
      EXPECT_LE(hpt, heads);
    }
  }
}

TEST(CudaLaunchParams, F16GemvOnlyForFewRowsAndWhole16ByteLoads) {
  alignas(16) static const unsigned char buf[64] = {};
  const void* a = buf;
  EXPECT_TRUE(F16GemvApplies(1, 2048, 4096, a, a));
  EXPECT_TRUE(F16GemvApplies(kF16GemvMaxRows, 8, 16, a, a));
  EXPECT_FALSE(F16GemvApplies(kF16GemvMaxRows + 1, 2048, 4096, a, a));  // cuBLAS
  EXPECT_FALSE(F16GemvApplies(0, 2048, 4096, a, a));
  EXPECT_FALSE(F16GemvApplies(1, 2044, 4088, a, a));     // columns not a multiple of 8
  EXPECT_FALSE(F16GemvApplies(1, 2048, 4104, a, a));     // rows not 16 bytes apart
  EXPECT_FALSE(F16GemvApplies(1, 2048, 2048, a, a));     // rows shorter than the columns
  EXPECT_FALSE(F16GemvApplies(1, 2048, 4096, buf + 2, a));  // misaligned weights
  EXPECT_FALSE(F16GemvApplies(1, 2048, 4096, a, buf + 4));  // misaligned activations
}

TEST(CudaLaunchParams, DecodeLargeBatchNeedsNoSplits) {
  const DecodeLaunch l = DecodeLaunchFor(256, 32, 8, 128, 4096, 132);
  EXPECT_EQ(l.splits, 1);
  EXPECT_EQ(l.partial_floats, 0u);
  EXPECT_EQ(l.heads_per_block, 4);
  EXPECT_EQ(l.head_groups, 1);
  EXPECT_GE(l.tokens_per_split, 4096);
  EXPECT_EQ(l.blocks(), 256 * 8);
}

TEST(CudaLaunchParams, DecodeLongContextAtBatchOneSplitsToFillTheGpu) {
  const DecodeLaunch l = DecodeLaunchFor(1, 32, 8, 128, 32768, 132);
  EXPECT_GT(l.splits, 1);
  EXPECT_GE(l.blocks(), 132) << "at least one block per multiprocessor";
  EXPECT_GE(l.tokens_per_split, kDecodeMinTokensPerSplit);
  EXPECT_EQ(l.partial_floats, static_cast<size_t>(1 * 32 * l.splits * (128 + 2)));
}

TEST(CudaLaunchParams, DecodeShortContextUsesASmallTileAndNoSplit) {
  const DecodeLaunch l = DecodeLaunchFor(1, 8, 4, 8, 10, 132);
  EXPECT_EQ(l.splits, 1);
  EXPECT_EQ(l.tile_tokens, 32);
  EXPECT_EQ(l.heads_per_block, 2);
}

// One sequence of a short context (the end-to-end decode benchmark's batch 1): its 8 KV heads
// alone would give 8 blocks on a GPU of 132 multiprocessors.
TEST(CudaLaunchParams, DecodeShortContextAtBatchOneIsSplitToo) {
  const DecodeLaunch l = DecodeLaunchFor(1, 16, 8, 128, 136, 132);
  EXPECT_EQ(l.splits, 5);
  EXPECT_EQ(l.tokens_per_split, 32);
  EXPECT_EQ(l.tile_tokens, 32);
  EXPECT_EQ(l.blocks(), 40);
  EXPECT_EQ(l.partial_floats, static_cast<size_t>(16 * 5 * (128 + 2)));
}

TEST(CudaLaunchParams, DecodeLargeGroupsAreSplitOverBlocks) {
  const DecodeLaunch mqa = DecodeLaunchFor(4, 64, 1, 128, 100, 132);
  EXPECT_EQ(mqa.heads_per_block, kDecodeMaxHeadsPerBlock);
  EXPECT_EQ(mqa.head_groups, 8);
  const DecodeLaunch odd = DecodeLaunchFor(4, 48, 8, 64, 100, 132);
  EXPECT_EQ(odd.heads_per_block, 6);
  EXPECT_EQ(odd.head_groups, 1);
  const DecodeLaunch ragged = DecodeLaunchFor(4, 40, 4, 64, 100, 132);  // group 10: 8 + 2
  EXPECT_EQ(ragged.heads_per_block, 8);
  EXPECT_EQ(ragged.head_groups, 2);
}

// Random shapes: the splits cover [0, max_context) with no empty split at the end, tiles divide
// splits, shared memory fits without opt-in, and the grid is within limits.
TEST(CudaLaunchParams, DecodeSplitsCoverTheContextForRandomShapes) {
  std::mt19937 rng(7);
  for (int i = 0; i < 5000; ++i) {
    const int64_t n_kv = int64_t{1} << (rng() % 4);
    const int64_t group = 1 + rng() % 16;
    const int64_t hd = 2 * (1 + rng() % (kMaxHeadDim / 2));
    const int64_t seqs = 1 + rng() % 300;
    const int64_t ctx = 1 + rng() % 200000;
    const int sms = 1 + static_cast<int>(rng() % 200);
    const DecodeLaunch l = DecodeLaunchFor(seqs, n_kv * group, n_kv, hd, ctx, sms);
    SCOPED_TRACE(::testing::Message() << "seqs " << seqs << " heads " << n_kv * group << "/" << n_kv
                                    << " hd " << hd << " ctx " << ctx << " sms " << sms);
    ASSERT_GE(l.splits, 1);
    ASSERT_LE(l.splits, kDecodeMaxSplits);
    ASSERT_LE(l.splits, kMaxGridZ);
    ASSERT_EQ(l.tokens_per_split % l.tile_tokens, 0);
    ASSERT_GE(l.splits * l.tokens_per_split, ctx);
    ASSERT_LT((l.splits - 1) * l.tokens_per_split, ctx);
    ASSERT_LE(l.tile_tokens, kDecodeMaxTile);
    ASSERT_GE(l.tile_tokens, kDecodeMinTokensPerSplit);
    ASSERT_EQ(l.tile_tokens % 32, 0);
    ASSERT_LE(l.heads_per_block, kDecodeMaxHeadsPerBlock);
    ASSERT_GE(l.heads_per_block * l.head_groups, group);
    ASSERT_LT((l.head_groups - 1) * l.heads_per_block, group);
    ASSERT_LE(n_kv * l.head_groups, kMaxGridY);
    ASSERT_LE(l.shared_bytes, kDefaultSharedBytes);
    if (l.splits > 1) {
      ASSERT_GE(l.tokens_per_split, kDecodeMinTokensPerSplit);
      ASSERT_EQ(l.partial_floats, static_cast<size_t>(seqs * n_kv * group * l.splits * (hd + 2)));
    } else {
      ASSERT_EQ(l.partial_floats, 0u);
    }
  }
}

}  // namespace
}  // namespace bmad::cuda
