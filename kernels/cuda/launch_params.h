// Launch decisions of the CUDA backend (grid and block sizes, split-K, tile sizes, shared memory
// bytes) as plain C++ functions of the problem's shape, so they are unit-tested on machines
// without a GPU (tests/kernels/cuda_launch_params_test.cc). The kernels (kernels/cuda/*.cu) and
// the host code (cuda_backend.cc) both read the constants here, so they cannot disagree.
//
// This header is included by nvcc-compiled files too: keep it C++17 and free of project headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace bmad::cuda {

// ---- element-wise and row kernels ----

inline constexpr int kElementwiseThreads = 256;
// Grid-stride loops need no more blocks than this to fill an H100/H200 (132 SMs × 16 blocks).
inline constexpr int64_t kMaxElementwiseBlocks = 132 * 16;

struct Launch1d {
  int64_t blocks = 0;
  int threads = 0;
};

// n independent elements, grid-stride: ceil(n / threads) blocks, at most kMaxElementwiseBlocks.
// n <= 0 gives 0 blocks (nothing to launch).
Launch1d ElementwiseLaunch(int64_t n);

// Threads of a one-block-per-row reduction (RMSNorm, softmax, argmax) over n columns: a power
// of two from 32 to 1024, no more than n needs (rounded up to a warp).
int RowReductionThreads(int64_t n);

// RoPE: a thread per (row, rotated pair, group of heads); each computes its pair's angle once
// (in double, for the CPU's bits) and rotates that pair in every head of its group. Heads are
// grouped only as far as there are kRopeTargetThreads threads without: a decode step's few rows
// get a thread per head, a long prompt one per (row, pair) for all its heads.
inline constexpr int64_t kRopeTargetThreads = 32768;
// Heads per thread, from 1 (n_heads groups) to n_heads (one group).
int64_t RopeHeadsPerThread(int64_t rows, int64_t half_rope_dim, int64_t n_heads);

// ---- matrix products ----

// F16 products of at most this many activation rows run the GEMV kernel (matmul_f16_kernels.cu:
// a warp per weight row, 16-byte loads) instead of converting the input and calling cuBLAS;
// beyond it every weight byte is read against more activation bytes than L1 serves well.
inline constexpr int64_t kF16GemvMaxRows = 4;
inline constexpr int kF16GemvWarpsPerBlock = 4;
// The GEMV reads 8 columns as one 16-byte load of weights and two of activations: the rows (and
// the pointers) must allow that.
bool F16GemvApplies(int64_t m, int64_t cols, size_t row_bytes, const void* w, const void* x);

// Q8_0 products with at most this many activation rows run the GEMV kernel (one warp per weight
// row, every activation row at once); more rows run the tiled kernel.
inline constexpr int64_t kQ8GemvMaxRows = 8;
inline constexpr int kQ8GemvWarpsPerBlock = 4;
// The tiled Q8_0 kernel: kQ8TileRows activation rows × kQ8TileCols weight rows per block of
// kQ8TileThreads threads (4×4 outputs each), stepping through one 32-element Q8_0 block of the
// inner dimension at a time.
inline constexpr int kQ8TileRows = 64;
inline constexpr int kQ8TileCols = 64;
inline constexpr int kQ8TileThreads = 256;

enum class Q8Kernel { kGemv, kTiled };

struct Q8Launch {
  Q8Kernel kernel = Q8Kernel::kGemv;
  int64_t grid_x = 0;  // GEMV: blocks of weight rows; tiled: tiles of weight rows
  int64_t grid_y = 1;  // tiled: tiles of activation rows
  int threads = 0;
};

// y[m, rows] = x[m, cols] · Wᵀ for a Q8_0 W of `rows` × `cols`.
Q8Launch Q8MatMulLaunch(int64_t m, int64_t rows);

// Bytes of the F16 copy of the activations an F16 product needs (m × cols halves), rounded up to
// 256 bytes so consecutive scratch carves stay aligned.
size_t F16ActivationBytes(int64_t m, int64_t cols);

// ---- attention ----

// Ints per sequence in the attention metadata (op_metadata.h, kernel_launchers.h).
inline constexpr int kSeqFields = 4;

// Every attention kernel needs an even head_dim (it reads keys and values in pairs) of at most
// this many elements.
inline constexpr int64_t kMaxHeadDim = 256;

// Prefill: one block per (tile of kPrefillRows query rows of one sequence, query head), 4
// threads per query row, key/value tiles of kPrefillKvTile tokens staged in shared memory.
inline constexpr int kPrefillRows = 32;
inline constexpr int kPrefillKvTile = 32;
inline constexpr int kPrefillThreads = kPrefillRows * 4;

struct PrefillLaunch {
  int dims_per_thread = 0;    // output dims each thread accumulates: 32 (head_dim <= 128) or 64
  size_t shared_bytes = 0;    // dynamic shared memory
  bool needs_opt_in = false;  // shared_bytes > 48 KiB: cudaFuncSetAttribute first
};
PrefillLaunch PrefillLaunchFor(int64_t head_dim);

// Shared memory of the prefill kernel: the query tile (F32, pre-scaled), the key and value tiles
// (F16) and the score tile, each padded to avoid bank conflicts.
size_t PrefillSharedBytes(int64_t head_dim);

// One prefill block's work: query rows [row_lo, row_lo + kPrefillRows) of sequence `seq`.
struct PrefillWorkItem {
  int32_t seq = 0;
  int32_t row_lo = 0;
};
// The work items for sequences with these row counts, in sequence order.
std::vector<PrefillWorkItem> PrefillWorkItems(const std::vector<int64_t>& row_counts);

// Decode: one block of kDecodeThreads threads per (sequence, KV head, group of query heads,
// split of the context). Blocks score a tile of up to kDecodeMaxTile tokens at a time into shared
// memory, then accumulate values; a split with splits > 1 writes an unnormalized partial result
// (accumulator, running max, running sum) that a second kernel combines.
inline constexpr int kDecodeThreads = 128;
inline constexpr int kDecodeMaxHeadsPerBlock = 8;  // register accumulators per thread
inline constexpr int64_t kDecodeMaxTile = 256;
// Splits are whole multiples of this many tokens (and tiles of at least this many). Small: a
// block's warps have 8 to 16 rows in flight at a time, so even one sequence of a few hundred
// tokens is spread over several blocks per KV head.
inline constexpr int64_t kDecodeMinTokensPerSplit = 32;
inline constexpr int64_t kDecodeMaxSplits = 64;
// Splits are added until the grid has this many blocks per multiprocessor (or the context runs
// out): at batch 1 the other dimensions give only the KV heads' few blocks.
inline constexpr int64_t kDecodeTargetBlocksPerSm = 4;

struct DecodeLaunch {
  int64_t heads_per_block = 0;   // query heads sharing one KV head that one block serves
  int64_t head_groups = 0;       // ceil(group / heads_per_block)
  int64_t splits = 1;            // blocks along the context
  int64_t tokens_per_split = 0;  // a multiple of tile_tokens
  int64_t tile_tokens = 0;
  size_t shared_bytes = 0;
  size_t partial_floats = 0;  // scratch for split partials (0 when splits == 1)
  int64_t blocks() const;     // total blocks of the main kernel, given n_seqs and n_kv_heads
  int64_t n_seqs = 0;
  int64_t n_kv_heads = 0;
};

// `max_context` is the longest sequence's context (its position + 1); `sm_count` the device's
// multiprocessors. Splits are added only when the other dimensions give fewer than
// kDecodeTargetBlocksPerSm blocks per multiprocessor, and never below kDecodeMinTokensPerSplit
// tokens each.
DecodeLaunch DecodeLaunchFor(int64_t n_seqs, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                             int64_t max_context, int sm_count);

// Shared memory of the decode kernels: the pre-scaled queries, the score tile, the warps' summed
// values and a tile's block-table entries (at most tile + 1).
size_t DecodeSharedBytes(int64_t heads_per_block, int64_t head_dim, int64_t tile_tokens);

inline constexpr size_t kDefaultSharedBytes = 48 * 1024;

}  // namespace bmad::cuda
