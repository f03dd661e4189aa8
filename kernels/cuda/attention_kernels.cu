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
// running max, running sum) and a second kernel combines them.
//
// Both need an even head_dim <= 256 (checked by the backend). Not yet run on a GPU: see
// tests/gpu/run.sh.
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

// kChunks: pairs of dims per lane (ceil(head_dim / 64)).
template <int kChunks>
__global__ void __launch_bounds__(kDecodeThreads)
    DecodeKernel(KvArgs kv, const float* q, const int32_t* meta, DecodeArgs a, float* partials,
                 float* out) {
  constexpr int kH = kDecodeMaxHeadsPerBlock;
  constexpr int kUnroll = kChunks >= 4 ? 2 : 4;  // tokens a warp has in flight (registers allow)
  BMAD_DYNAMIC_SHARED(smem);
  __shared__ float m_s[kH], l_s[kH], corr_s[kH];
  const int hd = kv.head_dim, pairs = hd / 2;
  const size_t q_bytes = Align16(static_cast<size_t>(a.heads_per_block) * hd * 4);
  float* qs = reinterpret_cast<float*>(smem);  // [heads_per_block][hd], pre-scaled
  float* sc = reinterpret_cast<float*>(smem + q_bytes);  // [heads_per_block][tile]
  // [heads_per_block][hd]: the warps' value sums, added up at the end
  float* os = reinterpret_cast<float*>(
      smem + q_bytes + Align16(static_cast<size_t>(a.heads_per_block) * a.tile * 4));
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, warps = blockDim.x / 32;

  const int s = blockIdx.x, sp = blockIdx.z;
  const int kvh = blockIdx.y / a.head_groups, hg = blockIdx.y % a.head_groups;
  const int group = a.n_heads / kv.n_kv_heads;
  const int h0 = kvh * group + hg * a.heads_per_block;
  const int nh = min(a.heads_per_block, group - hg * a.heads_per_block);
  const SeqDesc seq = ReadSeq(meta, a.n_seqs, s);
  const int row = seq.row_begin, ctx = seq.start_pos + 1;
  const int begin = sp * a.tokens_per_split, end = min(ctx, begin + a.tokens_per_split);

  for (int idx = tid; idx < nh * hd; idx += blockDim.x) {
    qs[idx] = q[(int64_t{row} * a.n_heads + h0) * hd + idx] * a.scale;
    os[idx] = 0.0f;
  }
  if (tid < kH) {
    m_s[tid] = -INFINITY;
    l_s[tid] = 0.0f;
  }
  float2 acc[kH][kChunks];
#pragma unroll
  for (int j = 0; j < kH; ++j) {
#pragma unroll
    for (int c = 0; c < kChunks; ++c) acc[j][c] = make_float2(0.0f, 0.0f);
  }
  __syncthreads();

  // Every phase gives a warp kUnroll tokens at a time, lanes across the dims: the rows' loads are
  // all issued before any is used, so a warp has kUnroll rows in flight rather than one.
  for (int t0 = begin; t0 < end; t0 += a.tile) {
    const int n_tok = min(a.tile, end - t0);
    // Scores, every head of the group at once.
    for (int base = warp * kUnroll; base < n_tok; base += warps * kUnroll) {
      float2 kf[kUnroll][kChunks];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const bool live = base + u < n_tok;
        const __half2* krow =
            reinterpret_cast<const __half2*>(KvRow(kv.k, kv, seq.table, live ? t0 + base + u : t0, kvh));
#pragma unroll
        for (int c = 0; c < kChunks; ++c) {
          const int p = lane + 32 * c;
          kf[u][c] = live && p < pairs ? __half22float2(krow[p]) : make_float2(0.0f, 0.0f);
        }
      }
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
          const float2 qv = reinterpret_cast<const float2*>(qs + j * hd)[p];
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
          if (lane == 0 && base + u < n_tok) sc[j * a.tile + base + u] = v;
        }
      }
    }
    __syncthreads();
    // Online softmax: a warp per head.
    for (int j = warp; j < nh; j += warps) {
      float mx = -INFINITY;
      for (int tt = lane; tt < n_tok; tt += 32) mx = fmaxf(mx, sc[j * a.tile + tt]);
      for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
      const float m_new = fmaxf(m_s[j], mx);
      const float corr = expf(m_s[j] - m_new);  // 0 on the first tile (m_s = -inf)
      float sum = 0.0f;
      for (int tt = lane; tt < n_tok; tt += 32) {
        const float p = expf(sc[j * a.tile + tt] - m_new);
        sc[j * a.tile + tt] = p;
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
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const bool live = base + u < n_tok;
        const __half2* vrow =
            reinterpret_cast<const __half2*>(KvRow(kv.v, kv, seq.table, live ? t0 + base + u : t0, kvh));
#pragma unroll
        for (int c = 0; c < kChunks; ++c) {
          const int p = lane + 32 * c;
          vf[u][c] = live && p < pairs ? __half22float2(vrow[p]) : make_float2(0.0f, 0.0f);
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (base + u >= n_tok) continue;
#pragma unroll
        for (int j = 0; j < kH; ++j) {
          if (j >= nh) continue;
          const float p = sc[j * a.tile + base + u];
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
          os[j * hd + 2 * p] += acc[j][c].x;
          os[j * hd + 2 * p + 1] += acc[j][c].y;
        }
      }
    }
    __syncthreads();
  }
  for (int idx = tid; idx < nh * hd; idx += blockDim.x) {
    const int j = idx / hd, d = idx % hd, h = h0 + j;
    if (a.splits == 1) {
      out[(int64_t{row} * a.n_heads + h) * hd + d] = os[idx] / l_s[j];
    } else {
      float* part = partials + ((int64_t{s} * a.n_heads + h) * a.splits + sp) * (hd + 2);
      part[d] = os[idx];
      if (d == 0) {
        part[hd] = m_s[j];
        part[hd + 1] = l_s[j];
      }
    }
  }
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
  const int chunks = (kv.head_dim / 2 + 31) / 32;  // head_dim <= kMaxHeadDim: at most 4
  if (chunks == 1) {
    BMAD_LAUNCH(DecodeKernel<1>, grid, kDecodeThreads, plan.shared_bytes, stream, kv, q, meta,
                a, partials, out);
  } else if (chunks == 2) {
    BMAD_LAUNCH(DecodeKernel<2>, grid, kDecodeThreads, plan.shared_bytes, stream, kv, q, meta,
                a, partials, out);
  } else {
    BMAD_LAUNCH(DecodeKernel<4>, grid, kDecodeThreads, plan.shared_bytes, stream, kv, q, meta,
                a, partials, out);
  }
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess || plan.splits == 1) return static_cast<int>(e);
  BMAD_LAUNCH(DecodeReduceKernel, static_cast<unsigned>(plan.n_seqs * n_heads), 128, 0, stream,
              meta, a.n_seqs, a.n_heads, kv.head_dim, a.splits, partials, out);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace bmad::cuda::launch
