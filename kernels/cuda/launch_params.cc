#include "kernels/cuda/launch_params.h"

#include <algorithm>

namespace bmad::cuda {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t RoundUp(int64_t a, int64_t b) { return CeilDiv(a, b) * b; }
size_t Align16(size_t bytes) { return (bytes + 15) / 16 * 16; }

}  // namespace

Launch1d ElementwiseLaunch(int64_t n) {
  if (n <= 0) return {0, kElementwiseThreads};
  return {std::min(CeilDiv(n, kElementwiseThreads), kMaxElementwiseBlocks), kElementwiseThreads};
}

int RowReductionThreads(int64_t n) {
  int threads = 32;
  while (threads < 1024 && threads < n) threads *= 2;
  return threads;
}

int64_t RopeHeadsPerThread(int64_t rows, int64_t half_rope_dim, int64_t n_heads) {
  if (n_heads <= 1) return 1;
  const int64_t pairs = std::max<int64_t>(rows * half_rope_dim, 1);
  const int64_t groups = std::clamp<int64_t>(CeilDiv(kRopeTargetThreads, pairs), 1, n_heads);
  return CeilDiv(n_heads, groups);
}

bool F16GemvApplies(int64_t m, int64_t cols, size_t row_bytes, const void* w, const void* x) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return m >= 1 && m <= kF16GemvMaxRows && cols > 0 && cols % 8 == 0 && row_bytes % 16 == 0 &&
         row_bytes >= static_cast<size_t>(cols) * 2 && aligned(w) && aligned(x);
}

Q8Launch Q8MatMulLaunch(int64_t m, int64_t rows) {
  Q8Launch l;
  if (m <= kQ8GemvMaxRows) {
    l.kernel = Q8Kernel::kGemv;
    l.grid_x = CeilDiv(rows, kQ8GemvWarpsPerBlock);
    l.grid_y = 1;
    l.threads = 32 * kQ8GemvWarpsPerBlock;
  } else {
    l.kernel = Q8Kernel::kTiled;
    l.grid_x = CeilDiv(rows, kQ8TileCols);
    l.grid_y = CeilDiv(m, kQ8TileRows);
    l.threads = kQ8TileThreads;
  }
  return l;
}

size_t F16ActivationBytes(int64_t m, int64_t cols) {
  const size_t bytes = static_cast<size_t>(m) * static_cast<size_t>(cols) * 2;
  return (bytes + 255) / 256 * 256;
}

size_t PrefillSharedBytes(int64_t head_dim) {
  const auto hd = static_cast<size_t>(head_dim);
  const size_t q = Align16(kPrefillRows * (hd + 4) * sizeof(float));
  const size_t k = Align16(kPrefillKvTile * (hd + 2) * 2);
  const size_t v = Align16(kPrefillKvTile * (hd + 2) * 2);
  const size_t s = Align16(kPrefillRows * (kPrefillKvTile + 1) * sizeof(float));
  return q + k + v + s;
}

PrefillLaunch PrefillLaunchFor(int64_t head_dim) {
  PrefillLaunch l;
  l.dims_per_thread = head_dim <= 128 ? 32 : 64;
  l.shared_bytes = PrefillSharedBytes(head_dim);
  l.needs_opt_in = l.shared_bytes > kDefaultSharedBytes;
  return l;
}

std::vector<PrefillWorkItem> PrefillWorkItems(const std::vector<int64_t>& row_counts) {
  std::vector<PrefillWorkItem> items;
  for (size_t s = 0; s < row_counts.size(); ++s) {
    for (int64_t lo = 0; lo < row_counts[s]; lo += kPrefillRows) {
      items.push_back({static_cast<int32_t>(s), static_cast<int32_t>(lo)});
    }
  }
  return items;
}

size_t DecodeSharedBytes(int64_t heads_per_block, int64_t head_dim, int64_t tile_tokens) {
  const auto h = static_cast<size_t>(heads_per_block);
  const size_t head_rows = Align16(h * static_cast<size_t>(head_dim) * sizeof(float));
  return 2 * head_rows + Align16(h * static_cast<size_t>(tile_tokens) * sizeof(float)) +
         Align16(static_cast<size_t>(tile_tokens + 1) * sizeof(int32_t));
}

int64_t DecodeLaunch::blocks() const { return n_seqs * n_kv_heads * head_groups * splits; }

DecodeLaunch DecodeLaunchFor(int64_t n_seqs, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                             int64_t max_context, int sm_count) {
  DecodeLaunch l;
  l.n_seqs = n_seqs;
  l.n_kv_heads = n_kv_heads;
  const int64_t group = n_heads / n_kv_heads;
  l.heads_per_block = std::min<int64_t>(group, kDecodeMaxHeadsPerBlock);
  l.head_groups = CeilDiv(group, l.heads_per_block);
  max_context = std::max<int64_t>(max_context, 1);

  const int64_t base_blocks = n_seqs * n_kv_heads * l.head_groups;
  const int64_t target_blocks = kDecodeTargetBlocksPerSm * std::max(sm_count, 1);
  int64_t splits = 1;
  if (base_blocks < target_blocks) {
    splits = std::min({CeilDiv(target_blocks, base_blocks),
                       CeilDiv(max_context, kDecodeMinTokensPerSplit), kDecodeMaxSplits});
    splits = std::max<int64_t>(splits, 1);
  }
  // A split is a whole number of tiles; rounding may leave fewer splits than asked for.
  const int64_t per_split = RoundUp(CeilDiv(max_context, splits), kDecodeMinTokensPerSplit);
  l.tile_tokens = std::min(kDecodeMaxTile, per_split);
  l.tokens_per_split = RoundUp(per_split, l.tile_tokens);
  l.splits = CeilDiv(max_context, l.tokens_per_split);
  l.shared_bytes = DecodeSharedBytes(l.heads_per_block, head_dim, l.tile_tokens);
  l.partial_floats = l.splits > 1 ? static_cast<size_t>(n_seqs * n_heads * l.splits) *
                                        static_cast<size_t>(head_dim + 2)
                                  : 0;
  return l;
}

}  // namespace bmad::cuda
