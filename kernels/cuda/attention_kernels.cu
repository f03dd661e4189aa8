// Paged attention on the GPU over the F16 KV cache (kernels/backend.h's KvLayerView layout),
// reading every key and value through the sequence's block table.
//
// Prefill (flash-style): a block per (tile of kPrefillRows query rows of one sequence, query
// head). Key and value tiles of kPrefillKvTile tokens are staged in shared memory; scores, the
// causal mask and an online softmax stay on chip, so the score matrix is never written out.
// Four threads share a query row (8 scores and head_dim/4 output dims each). Plain FMA, no tensor
// cores yet.
//
// Decode: a block per (sequence, KV head, group of up to 8 query heads sharing it, split of the
// context), so each key and value is read once for its whole GQA group. Long contexts are split
// (launch_params.h decides how many splits); each split writes an unnormalized partial (values,
// running max, running sum) and a second kernel combines them. Head dims of 8 to 256 that are
// powers of two read the cache in 16-byte loads (DecodeKernelVec); others a pair of dims at a
// time (DecodeKernel).
//
// Both need an even head_dim <= 256 (checked by the backend). Checked on an H200 by
// tests/gpu/run.sh (every op against the CPU backend).
#include "kernels/cuda/kernel_launchers.h"

namespace bmad::cuda::launch {
namespace {

struct SeqDesc {
  int row_begin, row_count, start_pos;
  const int32_t* table;
};

__device__ SeqDesc ReadSeq(const int32_t* meta, int n_seqs, int s) {
  const int32_t* d = meta + kSeqFields * s;
  return {d[0], d[1], d[2], meta + kSeqFields * n_seqs + d[3]};
}

// The cache row (head_dim elements) of `head` at position `pos`.
__device__ const __half* KvRow(const uint16_t* base, const KvArgs& kv, const int32_t* table,
                               int pos, int head) {
  const int32_t block = table[pos / kv.block_size];
  const int slot = pos % kv.block_size;
  return reinterpret_cast<const __half*>(base + int64_t{block} * kv.block_stride +
                                         (int64_t{head} * kv.block_size + slot) * kv.head_dim);
}

__device__ size_t Align16(size_t bytes) { return (bytes + 15) / 16 * 16; }

template <int kDims>
__global__ void PrefillKernel(KvArgs kv, const float* q, const int32_t* meta, int n_seqs,
                              const int32_t* work, int n_heads, float scale, float* out) {
  BMAD_DYNAMIC_SHARED(smem);
  const int hd = kv.head_dim, pairs = hd / 2;
  const int q_stride = hd + 4, kv_stride = hd + 2, s_stride = kPrefillKvTile + 1;
  float* qs = reinterpret_cast<float*>(smem);
  size_t off = Align16(size_t{kPrefillRows} * q_stride * sizeof(float));
  __half* ks = reinterpret_cast<__half*>(smem + off);
  off += Align16(size_t{kPrefillKvTile} * kv_stride * 2);
  __half* vs = reinterpret_cast<__half*>(smem + off);
  off += Align16(size_t{kPrefillKvTile} * kv_stride * 2);
  float* ss = reinterpret_cast<float*>(smem + off);

  const int h = blockIdx.y, kvh = h / (n_heads / kv.n_kv_heads);
  const int row_lo = work[2 * blockIdx.x + 1];
  const SeqDesc seq = ReadSeq(meta, n_seqs, work[2 * blockIdx.x]);
  const int rows_here = min(kPrefillRows, seq.row_count - row_lo);
  const int tid = threadIdx.x;

  for (int idx = tid; idx < kPrefillRows * hd; idx += blockDim.x) {
    const int r = idx / hd, d = idx % hd;
    qs[r * q_stride + d] =
        r < rows_here ? q[(int64_t{seq.row_begin + row_lo + r} * n_heads + h) * hd + d] * scale
                      : 0.0f;
  }
  const int r = tid / 4, sub = tid % 4;
  const int q_pos = r < rows_here ? seq.start_pos + row_lo + r : -1;
  const int last_pos = seq.start_pos + row_lo + rows_here - 1;
  float m_run = -INFINITY, l_run = 0.0f;
  float acc[kDims];
#pragma unroll
  for (int i = 0; i < kDims; ++i) acc[i] = 0.0f;

  for (int kv0 = 0; kv0 <= last_pos; kv0 += kPrefillKvTile) {
    __syncthreads();  // the previous tile is consumed (and the queries are stored)
    for (int idx = tid; idx < kPrefillKvTile * pairs; idx += blockDim.x) {
      const int c = idx / pairs, p = idx % pairs, pos = kv0 + c;
      __half2 kk = __float2half2_rn(0.0f), vv = kk;
      if (pos <= last_pos) {
        kk = reinterpret_cast<const __half2*>(KvRow(kv.k, kv, seq.table, pos, kvh))[p];
        vv = reinterpret_cast<const __half2*>(KvRow(kv.v, kv, seq.table, pos, kvh))[p];
      }
      reinterpret_cast<__half2*>(ks + c * kv_stride)[p] = kk;
      reinterpret_cast<__half2*>(vs + c * kv_stride)[p] = vv;
    }
    __syncthreads();

    float sc[kPrefillKvTile / 4];
    float tile_max = -INFINITY;
    const float2* qrow = reinterpret_cast<const float2*>(qs + r * q_stride);
#pragma unroll
    for (int j = 0; j < kPrefillKvTile / 4; ++j) {
      const int c = sub + 4 * j;
      const __half2* krow = reinterpret_cast<const __half2*>(ks + c * kv_stride);
      float dot = 0.0f;
      for (int p = 0; p < pairs; ++p) {
        const float2 qv = qrow[p], kf = __half22float2(krow[p]);
        dot = fmaf(qv.y, kf.y, fmaf(qv.x, kf.x, dot));
      }
      sc[j] = kv0 + c <= q_pos ? dot : -INFINITY;  // causal; q_pos -1 masks a padding row
      tile_max = fmaxf(tile_max, sc[j]);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
    const float m_new = fmaxf(m_run, tile_max);
    const float corr = m_new == -INFINITY ? 1.0f : expf(m_run - m_new);
    float psum = 0.0f;
#pragma unroll
    for (int j = 0; j < kPrefillKvTile / 4; ++j) {
      const float p = sc[j] == -INFINITY ? 0.0f : expf(sc[j] - m_new);
      ss[r * s_stride + sub + 4 * j] = p;
      psum += p;
    }
    psum += __shfl_xor_sync(0xffffffffu, psum, 1);
    psum += __shfl_xor_sync(0xffffffffu, psum, 2);
    l_run = l_run * corr + psum;
    m_run = m_new;
    __syncwarp();  // a row's four threads (one warp) read each other's probabilities
#pragma unroll
    for (int i = 0; i < kDims; ++i) acc[i] *= corr;
    for (int c = 0; c < kPrefillKvTile; ++c) {
      const float p = ss[r * s_stride + c];
      const __half* vrow = vs + c * kv_stride;
#pragma unroll
      for (int i = 0; i < kDims; ++i) {
        const int d = sub + 4 * i;
        if (d < hd) acc[i] = fmaf(p, __half2float(vrow[d]), acc[i]);
      }
    }
  }
  if (r >= rows_here) return;
  const float inv = 1.0f / l_run;
  float* o = out + (int64_t{seq.row_begin + row_lo + r} * n_heads + h) * hd;
#pragma unroll
  for (int i = 0; i < kDims; ++i) {
    const int d = sub + 4 * i;
    if (d < hd) o[d] = acc[i] * inv;
  }
}

struct DecodeArgs {
  int n_seqs, n_heads, heads_per_block, head_groups, splits, tokens_per_split, tile;
  float scale;
};

// What a decode block covers: one sequence, the query heads [h0, h0 + nh) of one KV head, the
// context positions [begin, end) of one split.
struct DecodeBlock {
  int s, sp, kvh, h0, nh, row, begin, end;
  SeqDesc seq;
};

__device__ DecodeBlock DecodeBlockOf(const int32_t* meta, const DecodeArgs& a, int n_kv_heads) {
  DecodeBlock b;
  b.s = blockIdx.x;
  b.sp = blockIdx.z;
  b.kvh = blockIdx.y / a.head_groups;
  const int hg = blockIdx.y % a.head_groups, group = a.n_heads / n_kv_heads;
  b.h0 = b.kvh * group + hg * a.heads_per_block;
  b.nh = min(a.heads_per_block, group - hg * a.heads_per_block);
  b.seq = ReadSeq(meta, a.n_seqs, b.s);
  b.row = b.seq.row_begin;
  b.begin = b.sp * a.tokens_per_split;
  b.end = min(b.seq.start_pos + 1, b.begin + a.tokens_per_split);
  return b;
}

// Shared memory of a decode block (launch_params.h DecodeSharedBytes): the pre-scaled queries
// [heads_per_block][hd], the score tile [heads_per_block][tile], the warps' value sums
// [heads_per_block][hd] and the tile's block-table entries [tile + 1].
struct DecodeShared {
  float* qs;
  float* sc;
  float* os;
  int32_t* blocks;
};

__device__ DecodeShared DecodeSharedOf(unsigned char* smem, const DecodeArgs& a, int hd) {
  const size_t q_bytes = Align16(static_cast<size_t>(a.heads_per_block) * hd * 4);
  const size_t s_bytes = Align16(static_cast<size_t>(a.heads_per_block) * a.tile * 4);
  DecodeShared d;
  d.qs = reinterpret_cast<float*>(smem);
  d.sc = reinterpret_cast<float*>(smem + q_bytes);
  d.os = reinterpret_cast<float*>(smem + q_bytes + s_bytes);
  d.blocks = reinterpret_cast<int32_t*>(smem + 2 * q_bytes + s_bytes);
  return d;
}

// Loads the block's queries (times the scale) and clears the value sums and running softmax.
__device__ void DecodeStart(const float* q, const DecodeArgs& a, const DecodeBlock& b, int hd,
                            const DecodeShared& d, float* m_s, float* l_s) {
  for (int idx = threadIdx.x; idx < b.nh * hd; idx += blockDim.x) {
    d.qs[idx] = q[(int64_t{b.row} * a.n_heads + b.h0) * hd + idx] * a.scale;
    d.os[idx] = 0.0f;
  }
  if (threadIdx.x < kDecodeMaxHeadsPerBlock) {
    m_s[threadIdx.x] = -INFINITY;
    l_s[threadIdx.x] = 0.0f;
  }
}

// Online softmax over a tile's scores, a warp per head: turns scores into probabilities relative
// to the new running max, and leaves the factor that rescales what came before in corr_s.
__device__ void DecodeSoftmaxTile(float* sc, int tile, int n_tok, int nh, float* m_s, float* l_s,
                                  float* corr_s) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  for (int j = warp; j < nh; j += warps) {
    float mx = -INFINITY;
    for (int tt = lane; tt < n_tok; tt += 32) mx = fmaxf(mx, sc[j * tile + tt]);
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    const float m_new = fmaxf(m_s[j], mx);
    const float corr = expf(m_s[j] - m_new);  // 0 on the first tile (m_s = -inf)
    float sum = 0.0f;
    for (int tt = lane; tt < n_tok; tt += 32) {
      const float p = expf(sc[j * tile + tt] - m_new);
      sc[j * tile + tt] = p;
      sum += p;
    }
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    __syncwarp();
    if (lane == 0) {
      l_s[j] = l_s[j] * corr + sum;
      m_s[j] = m_new;
      corr_s[j] = corr;
    }
  }
}

// The block's result from the summed values: normalized when the context is not split, else the
// split's unnormalized partial (values, running max, running sum) for DecodeReduceKernel.
__device__ void DecodeFinish(const DecodeArgs& a, const DecodeBlock& b, int hd, const float* os,
                             const float* m_s, const float* l_s, float* partials, float* out) {
  for (int idx = threadIdx.x; idx < b.nh * hd; idx += blockDim.x) {
    const int j = idx / hd, d = idx % hd, h = b.h0 + j;
    if (a.splits == 1) {
      out[(int64_t{b.row} * a.n_heads + h) * hd + d] = os[idx] / l_s[j];
    } else {
      float* part = partials + ((int64_t{b.s} * a.n_heads + h) * a.splits + b.sp) * (hd + 2);
      part[d] = os[idx];
      if (d == 0) {
        part[hd] = m_s[j];
        part[hd + 1] = l_s[j];
      }
    }
  }
}

// The lane's pairs of dims (lane, lane + 32, ...) of kUnroll consecutive rows of `base` (K or V)
// from position `pos`, all loads issued before any is used; rows at or past `live` of them and
// pairs past the row read as zero (a dead row's address is the first row's, always in range).
template <int kUnroll, int kChunks>
__device__ void LoadPairRows(const uint16_t* base, const KvArgs& kv, const DecodeBlock& b, int pos,
                             int live, int lane, float2 (&rows)[kUnroll][kChunks]) {
  const int pairs = kv.head_dim / 2;
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const __half2* row = reinterpret_cast<const __half2*>(
        KvRow(base, kv, b.seq.table, u < live ? pos + u : pos, b.kvh));
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int p = lane + 32 * c;
      rows[u][c] = u < live && p < pairs ? __half22float2(row[p]) : make_float2(0.0f, 0.0f);
    }
  }
}

// Any even head_dim: lanes across pairs of dims (kChunks = ceil(head_dim / 64) pairs a lane),
// a warp per token; every phase gives a warp kUnroll tokens at a time, their loads all issued
// before any is used.
template <int kChunks>
__global__ void __launch_bounds__(kDecodeThreads)
    DecodeKernel(KvArgs kv, const float* q, const int32_t* meta, DecodeArgs a, float* partials,
                 float* out) {
  constexpr int kH = kDecodeMaxHeadsPerBlock;
  constexpr int kUnroll = kChunks >= 4 ? 2 : 4;  // as many as the registers allow
  BMAD_DYNAMIC_SHARED(smem);
  __shared__ float m_s[kH], l_s[kH], corr_s[kH];
  const int hd = kv.head_dim, pairs = hd / 2;
  const DecodeShared d = DecodeSharedOf(smem, a, hd);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  const DecodeBlock b = DecodeBlockOf(meta, a, kv.n_kv_heads);
  const int nh = b.nh;
  DecodeStart(q, a, b, hd, d, m_s, l_s);
  float2 acc[kH][kChunks];
#pragma unroll
  for (int j = 0; j < kH; ++j) {
#pragma unroll
    for (int c = 0; c < kChunks; ++c) acc[j][c] = make_float2(0.0f, 0.0f);
  }
  __syncthreads();

  for (int t0 = b.begin; t0 < b.end; t0 += a.tile) {
    const int n_tok = min(a.tile, b.end - t0);
    // Scores, every head of the group at once.
    for (int base = warp * kUnroll; base < n_tok; base += warps * kUnroll) {
      float2 kf[kUnroll][kChunks];
      LoadPairRows(kv.k, kv, b, t0 + base, n_tok - base, lane, kf);
      float part[kUnroll][kH];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
        for (int j = 0; j < kH; ++j) part[u][j] = 0.0f;
      }
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        const int p = lane + 32 * c;
        if (p >= pairs) continue;
#pragma unroll
        for (int j = 0; j < kH; ++j) {
          if (j >= nh) continue;
          const float2 qv = reinterpret_cast<const float2*>(d.qs + j * hd)[p];
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) {
            part[u][j] = fmaf(qv.y, kf[u][c].y, fmaf(qv.x, kf[u][c].x, part[u][j]));
          }
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
        for (int j = 0; j < kH; ++j) {
          if (j >= nh) continue;
          float v = part[u][j];
          for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
          if (lane == 0 && base + u < n_tok) d.sc[j * a.tile + base + u] = v;
        }
      }
    }
    __syncthreads();
    DecodeSoftmaxTile(d.sc, a.tile, n_tok, nh, m_s, l_s, corr_s);
    __syncthreads();
    // Values: each warp sums its own tokens' rows, weighted by their probabilities.
#pragma unroll
    for (int j = 0; j < kH; ++j) {
      if (j >= nh) continue;
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        acc[j][c].x *= corr_s[j];
        acc[j][c].y *= corr_s[j];
      }
    }
    for (int base = warp * kUnroll; base < n_tok; base += warps * kUnroll) {
      float2 vf[kUnroll][kChunks];
      LoadPairRows(kv.v, kv, b, t0 + base, n_tok - base, lane, vf);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (base + u >= n_tok) continue;
#pragma unroll
        for (int j = 0; j < kH; ++j) {
          if (j >= nh) continue;
          const float p = d.sc[j * a.tile + base + u];
#pragma unroll
          for (int c = 0; c < kChunks; ++c) {
            acc[j][c].x = fmaf(p, vf[u][c].x, acc[j][c].x);
            acc[j][c].y = fmaf(p, vf[u][c].y, acc[j][c].y);
          }
        }
      }
    }
    __syncthreads();  // the next tile overwrites the scores
  }
  // The warps' sums, added one warp at a time: a fixed order, so the same bits on every run.
  for (int w = 0; w < warps; ++w) {
    if (warp == w) {
#pragma unroll
      for (int j = 0; j < kH; ++j) {
        if (j >= nh) continue;
#pragma unroll
        for (int c = 0; c < kChunks; ++c) {
          const int p = lane + 32 * c;
          if (p >= pairs) continue;
          d.os[j * hd + 2 * p] += acc[j][c].x;
          d.os[j * hd + 2 * p + 1] += acc[j][c].y;
        }
      }
    }
    __syncthreads();
  }
  DecodeFinish(a, b, hd, d.os, m_s, l_s, partials, out);
}

// head_dim = 8 * kG (64, 128, 256 in real models), rows 16-byte aligned: kG lanes share a row, 8
// dims each as one 16-byte load, so a warp's load covers 32 / kG rows and a lane has kUnroll
// loads in flight. The tile's block-table entries are staged in shared memory first, so a row's
// address needs no global load of its own.
template <int kG>
__global__ void __launch_bounds__(kDecodeThreads)
    DecodeKernelVec(KvArgs kv, const float* q, const int32_t* meta, DecodeArgs a, float* partials,
                    float* out) {
  constexpr int kH = kDecodeMaxHeadsPerBlock;
  constexpr int kHd = 8 * kG, kRows = 32 / kG, kUnroll = 4;
  BMAD_DYNAMIC_SHARED(smem);
  __shared__ float m_s[kH], l_s[kH], corr_s[kH];
  const DecodeShared d = DecodeSharedOf(smem, a, kHd);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  const int sub = lane % kG, rr = lane / kG;  // this lane's 8 dims, and its row of each load
  const DecodeBlock b = DecodeBlockOf(meta, a, kv.n_kv_heads);
  const int nh = b.nh, bs = kv.block_size;
  const int64_t head_offset = int64_t{b.kvh} * bs * kHd;
  DecodeStart(q, a, b, kHd, d, m_s, l_s);
  float acc[kH][8];
#pragma unroll
  for (int j = 0; j < kH; ++j) {
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[j][e] = 0.0f;
  }
  const int step = warps * kRows * kUnroll;  // tokens the block covers per pass
  __syncthreads();  // the cleared sums before any warp adds to them (an empty split has no tile)

  for (int t0 = b.begin; t0 < b.end; t0 += a.tile) {
    const int n_tok = min(a.tile, b.end - t0);
    const int first = t0 / bs, n_blocks = (t0 + n_tok - 1) / bs - first + 1;
    for (int i = threadIdx.x; i < n_blocks; i += blockDim.x) d.blocks[i] = b.seq.table[first + i];
    __syncthreads();
    // This lane's 16 bytes of row t0 + tt of `base` (K or V).
    auto load = [&](const uint16_t* base, int tt) {
      const int pos = t0 + tt;
      const uint16_t* row = base + int64_t{d.blocks[pos / bs - first]} * kv.block_stride +
                            head_offset + int64_t{pos % bs} * kHd;
      BMAD_CHECK_ALIGNED16(row);
      return reinterpret_cast<const uint4*>(row)[sub];
    };
    // Scores, every head of the group at once.
    for (int base = warp * kRows * kUnroll; base < n_tok; base += step) {
      uint4 kr[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int tt = base + u * kRows + rr;
        kr[u] = tt < n_tok ? load(kv.k, tt) : make_uint4(0, 0, 0, 0);
      }
      float part[kUnroll][kH];
#pragma unroll
      for (int j = 0; j < kH; ++j) {
        if (j >= nh) continue;
        const float* qv = d.qs + j * kHd + 8 * sub;
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const __half2* h = reinterpret_cast<const __half2*>(&kr[u]);
          float dot = 0.0f;
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const float2 kf = __half22float2(h[e]);
            dot = fmaf(qv[2 * e + 1], kf.y, fmaf(qv[2 * e], kf.x, dot));
          }
          part[u][j] = dot;
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int tt = base + u * kRows + rr;
#pragma unroll
        for (int j = 0; j < kH; ++j) {
          if (j >= nh) continue;
          float v = part[u][j];
          for (int o = kG / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
          if (sub == 0 && tt < n_tok) d.sc[j * a.tile + tt] = v;
        }
      }
    }
    __syncthreads();
    DecodeSoftmaxTile(d.sc, a.tile, n_tok, nh, m_s, l_s, corr_s);
    __syncthreads();
    // Values: each lane sums its rows' 8 dims, weighted by their probabilities.
#pragma unroll
    for (int j = 0; j < kH; ++j) {
      if (j >= nh) continue;
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[j][e] *= corr_s[j];
    }
    for (int base = warp * kRows * kUnroll; base < n_tok; base += step) {
      uint4 vr[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int tt = base + u * kRows + rr;
        vr[u] = tt < n_tok ? load(kv.v, tt) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int tt = base + u * kRows + rr;
        if (tt >= n_tok) continue;
        const __half2* h = reinterpret_cast<const __half2*>(&vr[u]);
        float2 vf[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) vf[e] = __half22float2(h[e]);
#pragma unroll
        for (int j = 0; j < kH; ++j) {
          if (j >= nh) continue;
          const float p = d.sc[j * a.tile + tt];
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            acc[j][2 * e] = fmaf(p, vf[e].x, acc[j][2 * e]);
            acc[j][2 * e + 1] = fmaf(p, vf[e].y, acc[j][2 * e + 1]);
          }
        }
      }
    }
    __syncthreads();  // the next tile overwrites the scores and the table entries
  }
  // Lanes holding the same dims (one per row of a load) add up their sums, then the warps add
  // theirs one warp at a time: a fixed order, so the same bits on every run.
#pragma unroll
  for (int j = 0; j < kH; ++j) {
    if (j >= nh) continue;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      for (int o = kG; o < 32; o <<= 1) acc[j][e] += __shfl_xor_sync(0xffffffffu, acc[j][e], o);
    }
  }
  for (int w = 0; w < warps; ++w) {
    if (warp == w && rr == 0) {
#pragma unroll
      for (int j = 0; j < kH; ++j) {
        if (j >= nh) continue;
#pragma unroll
        for (int e = 0; e < 8; ++e) d.os[j * kHd + 8 * sub + e] += acc[j][e];
      }
    }
    __syncthreads();
  }
  DecodeFinish(a, b, kHd, d.os, m_s, l_s, partials, out);
}

// Combines the splits of one (sequence, head): rescales each split's values and sum to the
// largest running max. Empty splits (max -inf, sum 0) contribute nothing.
__global__ void DecodeReduceKernel(const int32_t* meta, int n_seqs, int n_heads, int head_dim,
                                   int splits, const float* partials, float* out) {
  const int s = blockIdx.x / n_heads, h = blockIdx.x % n_heads;
  const int row = ReadSeq(meta, n_seqs, s).row_begin;
  const float* base = partials + (int64_t{s} * n_heads + h) * splits * (head_dim + 2);
  float mx = -INFINITY;
  for (int sp = 0; sp < splits; ++sp) mx = fmaxf(mx, base[sp * (head_dim + 2) + head_dim]);
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float num = 0.0f, den = 0.0f;
    for (int sp = 0; sp < splits; ++sp) {
      const float* part = base + sp * (head_dim + 2);
      if (part[head_dim] == -INFINITY) continue;
      const float w = expf(part[head_dim] - mx);
      num = fmaf(part[d], w, num);
      den = fmaf(part[head_dim + 1], w, den);
    }
    out[(int64_t{row} * n_heads + h) * head_dim + d] = num / den;
  }
}

}  // namespace

int AttentionPrefill(const KvArgs& kv, const float* q, const int32_t* meta, int64_t n_seqs,
                     const int32_t* work, int64_t n_work, int64_t n_heads, float scale, float* out,
                     cudaStream_t stream) {
  if (n_work == 0) return 0;
  const PrefillLaunch l = PrefillLaunchFor(kv.head_dim);
  const dim3 grid(static_cast<unsigned>(n_work), static_cast<unsigned>(n_heads));
  if (l.dims_per_thread == 32) {
    BMAD_LAUNCH(PrefillKernel<32>, grid, kPrefillThreads, l.shared_bytes, stream, kv, q, meta,
                static_cast<int>(n_seqs), work, static_cast<int>(n_heads), scale, out);
  } else {
    if (l.needs_opt_in) {
      const cudaError_t e =
          cudaFuncSetAttribute(PrefillKernel<64>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(l.shared_bytes));
      if (e != cudaSuccess) return static_cast<int>(e);
    }
    BMAD_LAUNCH(PrefillKernel<64>, grid, kPrefillThreads, l.shared_bytes, stream, kv, q, meta,
                static_cast<int>(n_seqs), work, static_cast<int>(n_heads), scale, out);
  }
  return static_cast<int>(cudaGetLastError());
}

int AttentionDecode(const KvArgs& kv, const float* q, const int32_t* meta, const DecodeLaunch& plan,
                    int64_t n_heads, float scale, float* partials, float* out,
                    cudaStream_t stream) {
  if (plan.n_seqs == 0) return 0;
  DecodeArgs a{static_cast<int>(plan.n_seqs),          static_cast<int>(n_heads),
               static_cast<int>(plan.heads_per_block), static_cast<int>(plan.head_groups),
               static_cast<int>(plan.splits),          static_cast<int>(plan.tokens_per_split),
               static_cast<int>(plan.tile_tokens),     scale};
  const dim3 grid(static_cast<unsigned>(plan.n_seqs),
                  static_cast<unsigned>(plan.n_kv_heads * plan.head_groups),
                  static_cast<unsigned>(plan.splits));
  // A row starts at k or v + block * block_stride + a multiple of head_dim (halves).
  const bool aligned = reinterpret_cast<uintptr_t>(kv.k) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(kv.v) % 16 == 0 && kv.block_stride % 8 == 0;
  const int hd = kv.head_dim;
#define BMAD_DECODE(kernel) \
  BMAD_LAUNCH(kernel, grid, kDecodeThreads, plan.shared_bytes, stream, kv, q, meta, a, partials, out)
  if (aligned && hd == 64) {
    BMAD_DECODE(DecodeKernelVec<8>);
  } else if (aligned && hd == 128) {
    BMAD_DECODE(DecodeKernelVec<16>);
  } else if (aligned && hd == 256) {
    BMAD_DECODE(DecodeKernelVec<32>);
  } else if (aligned && hd == 32) {
    BMAD_DECODE(DecodeKernelVec<4>);
  } else if (aligned && hd == 16) {
    BMAD_DECODE(DecodeKernelVec<2>);
  } else if (aligned && hd == 8) {
    BMAD_DECODE(DecodeKernelVec<1>);
  } else if (hd <= 64) {
    BMAD_DECODE(DecodeKernel<1>);
  } else if (hd <= 128) {
    BMAD_DECODE(DecodeKernel<2>);
  } else {
    BMAD_DECODE(DecodeKernel<4>);
  }
#undef BMAD_DECODE
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess || plan.splits == 1) return static_cast<int>(e);
  BMAD_LAUNCH(DecodeReduceKernel, static_cast<unsigned>(plan.n_seqs * n_heads), 128, 0, stream,
              meta, a.n_seqs, a.n_heads, kv.head_dim, a.splits, partials, out);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace bmad::cuda::launch
