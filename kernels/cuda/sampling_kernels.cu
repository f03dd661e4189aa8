// Drawing tokens where the logits are (Backend::SampleRows): one block per row, the definition
// of kernels/sample_row.h without sorting the vocabulary.
//
// Every selection in that definition is "the first tokens in the more-likely order (higher score,
// then lower id) until a count or a running sum of weights reaches a threshold". Scores map to
// 32-bit keys that sort as the scores do, so the boundary token's key is the largest key x whose
// tokens at or above x reach the threshold: found bit by bit, 32 passes over the row, each a
// block reduction. Tokens tied at the boundary key are taken in id order: each thread owns a
// contiguous range of ids, and a scan over the threads gives each its first tie's rank.
//
// Sums of weights are in double and reduced in a fixed order (shuffles, then one warp), so a
// row's draw is the same on every run; it can differ from the CPU's, which adds in the
// more-likely order, only when the draw lands within rounding of a boundary.
//
// Checked on an H200 against the CPU backend by tests/gpu/run.sh.
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/kernel_launchers.h"

namespace bmad::cuda::launch {
namespace {

constexpr int kThreads = 1024;  // the most a block may have; smaller rows use fewer

__device__ uint32_t FloatBits(float f) {
#if defined(BMAD_SIMT_EMULATION)
  uint32_t b;
  __builtin_memcpy(&b, &f, sizeof b);
  return b;
#else
  return __float_as_uint(f);
#endif
}

// A key that orders as the score does (-0 and +0 alike, as the CPU's comparisons have them).
__device__ uint32_t KeyOf(float score) {
  const uint32_t b = FloatBits(score == 0.0f ? 0.0f : score);
  return (b & 0x80000000u) != 0 ? ~b : (b | 0x80000000u);
}

// The sum of `v` over the threads before this one (thread order is id order). `shared`: one
// value per thread.
template <typename T>
__device__ T ExclusiveScan(T v, T* shared) {
  __syncthreads();
  shared[threadIdx.x] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    T running{0};
    for (unsigned t = 0; t < blockDim.x; ++t) {
      const T here = shared[t];
      shared[t] = running;
      running += here;
    }
  }
  __syncthreads();
  return shared[threadIdx.x];
}

// One row's state as the selections narrow it. A token survives stage s when it survived stage
// s - 1 and its key is above cut[s], or equal to it and among the first take[s] such tokens in
// id order (tie_base[s]: this thread's first such token's rank). Stage 0 keeps finite tokens;
// stage 1 is top-k, stage 2 top-p; a stage that cuts nothing has cut 0 and take "all".
struct Cuts {
  uint32_t cut[3];
  int64_t take[3];
};

struct Walker {
  const float* row;
  int64_t begin, end;  // this thread's ids
  float max_score, temperature, min_p;
  const Cuts* cuts;
  int64_t tie_base[3];

  __device__ float Weight(float score) const {
    return expf(__fdiv_rn(__fsub_rn(score, max_score), temperature));
  }

  // Calls f(id, key, weight) for each token of this thread's range that survives `stage`
  // (0: finite; 1: top-k; 2: top-p; 3: min-p too), in id order.
  template <typename F>
  __device__ void ForEach(int stage, F&& f) const {
    int64_t ties[3] = {tie_base[0], tie_base[1], tie_base[2]};
    for (int64_t i = begin; i < end; ++i) {
      const float s = row[i];
      if (!(s > -INFINITY)) continue;
      const uint32_t key = KeyOf(s);
      bool keep = true;
      for (int k = 1; k <= 2 && k <= stage && keep; ++k) {
        if (key > cuts->cut[k]) continue;
        if (key < cuts->cut[k]) {
          keep = false;
          continue;
        }
        keep = ties[k]++ < cuts->take[k];
      }
      if (!keep) continue;
      const float w = Weight(s);
      if (stage >= 3 && w < min_p) continue;
      f(i, key, w);
    }
  }
};

// The largest key x such that reaches(measure(x)), for measure non-increasing in x;
// reaches(measure(0)) must hold. Every thread calls it together (measure reduces over the block).
template <typename Measure, typename Reaches>
__device__ uint32_t LargestKeyReaching(Measure&& measure, Reaches&& reaches) {
  uint32_t x = 0;
  for (int bit = 31; bit >= 0; --bit) {
    const uint32_t candidate = x | (1u << bit);
    if (reaches(measure(candidate))) x = candidate;
  }
  return x;
}

// The tokens of `stage` tied at `key`: how many in the block, how many before this thread's
// range (for the id-order ranks), and their common weight.
struct Ties {
  int64_t count, before;
  float weight;
};

struct Scratch {
  double sum_d[32];
  int64_t sum_i[32];
  float max_f[32];
  int64_t scan_i[kThreads];
  double scan_d[kThreads];
  int64_t last_i[kThreads];
};

__device__ Ties TiesAt(const Walker& w, int stage, uint32_t key, Scratch& sh) {
  int64_t mine = 0;
  float weight = 0.0f;
  w.ForEach(stage, [&](int64_t, uint32_t k, float wt) {
    if (k == key) {
      ++mine;
      weight = wt;
    }
  });
  Ties t;
  t.weight = BlockMax(weight, sh.max_f);  // the tied tokens' common weight (0 where none)
  t.count = BlockSum(mine, sh.sum_i);
  t.before = ExclusiveScan(mine, sh.scan_i);
  return t;
}

// Launched with up to kThreads threads: the bound keeps the compiler within a block's register
// file at that size (without it, ptxas gives this kernel 66-68 registers a thread, and a launch
// of 1024 threads fails for lack of registers).
__global__ void __launch_bounds__(kThreads)
    SampleRowsKernel(const float* x, int64_t n, const RowSamplingArgs* params, int32_t* out) {
  __shared__ Scratch sh;
  __shared__ float best_v[32];
  __shared__ int64_t best_i[32];
  __shared__ Cuts cuts;

  const RowSamplingArgs p = params[blockIdx.x];
  const float* row = x + blockIdx.x * n;
  const int64_t chunk = (n + blockDim.x - 1) / blockDim.x;
  const int64_t begin = threadIdx.x * chunk, end = begin + chunk;
  // min-p as the host sampler clamps it: NaN or <= 0 off, at most 1.
  const float min_p = p.min_p > 0.0f ? fminf(p.min_p, 1.0f) : 0.0f;
  Walker w{row, begin < n ? begin : n, end < n ? end : n, 0.0f, p.temperature, min_p, &cuts,
           {0, 0, 0}};

  // The argmax (lowest id on ties) and whether the row can be sampled at all.
  float v = -INFINITY;
  int64_t idx = -1;
  int64_t bad = 0, finite = 0;
  for (int64_t i = w.begin; i < w.end; ++i) {
    const float e = row[i];
    if (!(e < INFINITY)) bad = 1;  // NaN or +inf
    if (e > -INFINITY) ++finite;
    if (e > v) {
      v = e;
      idx = i;
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int64_t oi = __shfl_xor_sync(0xffffffffu, idx, o);
    if (oi >= 0 && (idx < 0 || ov > v || (ov == v && oi < idx))) {
      v = ov;
      idx = oi;
    }
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  if (lane == 0) {
    best_v[warp] = v;
    best_i[warp] = idx;
  }
  bad = BlockSum(bad, sh.sum_i);  // its barriers also publish best_v and best_i
  finite = BlockSum(finite, sh.sum_i);
  v = -INFINITY;
  idx = -1;
  for (int k = 0; k < warps; ++k) {  // every thread, in the same order: the same answer
    if (best_i[k] >= 0 && (idx < 0 || best_v[k] > v || (best_v[k] == v && best_i[k] < idx))) {
      v = best_v[k];
      idx = best_i[k];
    }
  }
  if (bad != 0 || finite == 0 || idx < 0) {
    if (threadIdx.x == 0) out[blockIdx.x] = -1;
    return;
  }
  // Greedy below kGreedyBelowTemperature (kernels/sample_row.h), as the host sampler.
  if (!(p.temperature >= 1e-5f) || p.temperature == INFINITY) {
    if (threadIdx.x == 0) out[blockIdx.x] = static_cast<int32_t>(idx);
    return;
  }
  w.max_score = v;
  if (threadIdx.x == 0) {
    for (int k = 0; k < 3; ++k) {
      cuts.cut[k] = 0;  // no finite score has key 0: a stage cut at 0 keeps everything
      cuts.take[k] = INT64_MAX;
    }
  }
  __syncthreads();

  // Stage 1, top-k: the k-th token's key, and how many of the tokens at that key come in.
  const bool top_k = p.top_k > 0 && p.top_k < n;
  if (top_k && p.top_k < finite) {
    const auto count_at_or_above = [&](uint32_t key) {
      int64_t c = 0;
      w.ForEach(0, [&](int64_t, uint32_t k, float) { c += k >= key ? 1 : 0; });
      return BlockSum(c, sh.sum_i);
    };
    const int64_t k = p.top_k;
    const uint32_t cut = LargestKeyReaching(count_at_or_above, [&](int64_t c) { return c >= k; });
    const int64_t above = cut == 0xffffffffu ? 0 : count_at_or_above(cut + 1);
    const Ties ties = TiesAt(w, 0, cut, sh);
    if (threadIdx.x == 0) {
      cuts.cut[1] = cut;
      cuts.take[1] = k - above;
    }
    w.tie_base[1] = ties.before;
    __syncthreads();
  }

  const auto weight_at_or_above = [&](int stage, uint32_t key) {
    double m = 0.0;
    w.ForEach(stage, [&](int64_t, uint32_t k, float wt) {
      if (k >= key) m += wt;
    });
    return BlockSum(m, sh.sum_d);
  };

  // Stage 2, top-p: the shortest more-likely-first prefix whose weight reaches top_p · total.
  // If even everything falls short (rounding), top-p keeps everything.
  if (p.top_p < 1.0f) {
    const double total = weight_at_or_above(1, 0);
    const double mass = static_cast<double>(p.top_p > 0.0f ? p.top_p : 0.0f) * total;
    if (total >= mass) {
      const auto at = [&](uint32_t key) { return weight_at_or_above(1, key); };
      // At least one token must be in: with a mass of 0 that is the most likely one alone.
      const uint32_t cut =
          LargestKeyReaching(at, [&](double m) { return m >= mass && m > 0.0; });
      const double above = cut == 0xffffffffu ? 0.0 : at(cut + 1);
      const Ties ties = TiesAt(w, 1, cut, sh);
      if (threadIdx.x == 0) {
        // As the CPU walks: tied tokens come in while the running sum is short of the mass.
        double running = above;
        int64_t take = 0;
        while (take < ties.count && running < mass) {
          running += ties.weight;
          ++take;
        }
        cuts.cut[2] = cut;
        cuts.take[2] = take > 0 ? take : 1;
      }
      w.tie_base[2] = ties.before;
      __syncthreads();
    }
  }

  // Stage 3 adds min-p, a filter on the weight (Walker::ForEach). The draw: the first token of
  // the walk whose running sum exceeds uniform · total.
  const double total = weight_at_or_above(3, 0);
  const double target = p.uniform * total;
  int64_t chosen = -1;
  if (top_k) {  // the walk goes in the more-likely order
    const auto at = [&](uint32_t key) { return weight_at_or_above(3, key); };
    if (total > target) {
      const uint32_t cut = LargestKeyReaching(at, [&](double m) { return m > target; });
      const double above = cut == 0xffffffffu ? 0.0 : at(cut + 1);
      const Ties ties = TiesAt(w, 3, cut, sh);
      // The rank, among the tied tokens in id order, of the one the draw lands on.
      double running = above;
      int64_t rank = 0;
      while (rank < ties.count - 1 && !(target < running + ties.weight)) {
        running += ties.weight;
        ++rank;
      }
      int64_t seen = ties.before;
      w.ForEach(3, [&](int64_t i, uint32_t key, float) {
        if (key == cut && seen++ == rank) chosen = i;
      });
    }
  } else {  // the walk goes in id order: each thread's share of the running sum, then its range
    double mine = 0.0;
    w.ForEach(3, [&](int64_t, uint32_t, float wt) { mine += wt; });
    double running = ExclusiveScan(mine, sh.scan_d);
    w.ForEach(3, [&](int64_t i, uint32_t, float wt) {
      if (chosen >= 0 || wt <= 0.0f) return;
      running += wt;
      if (target < running) chosen = i;
    });
  }

  // The answer: the lowest id chosen (in id order the first thread to cross; in the more-likely
  // order one thread at most chose). None: rounding ran past the end, and the draw belongs to
  // the walk's last token with a weight above 0.
  int64_t my_last = -1;
  uint32_t my_last_key = 0;
  w.ForEach(3, [&](int64_t i, uint32_t key, float wt) {
    if (wt <= 0.0f) return;
    if (!top_k || my_last < 0 || key < my_last_key || (key == my_last_key && i > my_last)) {
      my_last = i;
      my_last_key = key;
    }
  });
  __syncthreads();
  sh.scan_i[threadIdx.x] = chosen;
  sh.last_i[threadIdx.x] = my_last;
  __syncthreads();
  if (threadIdx.x != 0) return;
  int64_t found = -1, last = -1;
  uint32_t last_key = 0;
  for (unsigned t = 0; t < blockDim.x; ++t) {
    const int64_t c = sh.scan_i[t], l = sh.last_i[t];
    if (c >= 0 && (found < 0 || c < found)) found = c;
    if (l < 0) continue;
    const uint32_t key = KeyOf(row[l]);
    if (last < 0 || (!top_k && l > last) ||
        (top_k && (key < last_key || (key == last_key && l > last)))) {
      last = l;
      last_key = key;
    }
  }
  out[blockIdx.x] = static_cast<int32_t>(found >= 0 ? found : last);
}

}  // namespace

int SampleRows(const float* x, int64_t rows, int64_t n, const RowSamplingArgs* params,
               int32_t* out, cudaStream_t stream) {
  if (rows == 0) return 0;
  BMAD_LAUNCH(SampleRowsKernel, static_cast<unsigned>(rows), RowReductionThreads(n), 0, stream, x,
              n, params, out);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace bmad::cuda::launch
