#include "kernels/cpu/cpu_backend.h"

#include "kernels/cpu/packed_weights.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace bmad::kernels {
namespace {

// Below this many elements an element-wise op runs on the calling thread alone.
constexpr int64_t kParallelElements = 1 << 15;
// Query rows per prefill attention task.
constexpr int64_t kPrefillRowsPerTask = 16;

}  // namespace

struct CpuBackend::AttentionTask {
  const AttentionSequence* seq;
  int64_t kv_head_lo;  // KV heads [kv_head_lo, kv_head_hi)
  int64_t kv_head_hi;
  int64_t row_lo;
  int64_t row_hi;
};

CpuBackend::CpuBackend(const CpuBackendOptions& options)
    : simd_(options.simd ? *options.simd : cpu::BestSimdKernels()),
      pool_(options.threads > 0 ? options.threads : cpu::AvailableCores()),
      scratch_(pool_.size() + 1),
      matmul_(pool_, simd_, scratch_, options.sgemm_for_rows_layout) {
  tasks_.reserve(4096);
  // Our pool parallelizes around sgemm; OpenBLAS's own threads would only compete with it.
  openblas_set_num_threads(1);
}

CpuBackend::~CpuBackend() = default;

uint64_t CpuBackend::buffer_allocations() const { return scratch_.growths(); }

void CpuBackend::SetMemoryHooks(MemoryHooks hooks) {
  hooks_ = hooks;
  scratch_.SetHooks(hooks);
}

size_t CpuBackend::PreparedBytes(const WeightMatrix& w) const {
  if (w.layout == WeightLayout::kPanels16) return 0;
  return cpu::PanelBytes(w.type, w.cols) * static_cast<size_t>(cpu::PanelCount(w.rows));
}

PreparedWeight CpuBackend::PrepareMatMulWeight(const WeightMatrix& w) {
  if (w.layout == WeightLayout::kPanels16) return {w, nullptr};
  auto packed = std::make_shared<cpu::PackedWeights>(cpu::PackWeights(w, hooks_.allocate_weights));
  const WeightMatrix view = packed->view;
  return {view, std::shared_ptr<const void>(packed, packed->storage.get())};
}

void CpuBackend::Embedding(const WeightMatrix& table, std::span<const int32_t> ids, float* out) {
  for (size_t i = 0; i < ids.size(); ++i) {
    simd_.dequant_row(table.type, table.Row(ids[i]), table.cols, out + i * table.cols);
  }
}

void CpuBackend::RmsNorm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps,
                         float* out) {
  auto norm_rows = [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = x + r * dim;
      float* o = out + r * dim;
      const float sum = simd_.dot(xr, xr, dim);
      const float scale = 1.0f / std::sqrt(sum / static_cast<float>(dim) + eps);
      for (int64_t i = 0; i < dim; ++i) o[i] = xr[i] * scale * weight[i];
    }
  };
  if (rows * dim < kParallelElements) {
    norm_rows(0, rows, 0);
  } else {
    pool_.ParallelFor(rows, 4, norm_rows);
  }
}

void CpuBackend::Rope(float* x, std::span<const int32_t> positions, int64_t n_heads,
                      int64_t head_dim, const RopeConfig& rope) {
  const int64_t half = rope.rope_dim / 2;
  const int64_t rows = static_cast<int64_t>(positions.size());
  auto rotate_rows = [&](int64_t begin, int64_t end, int) {
    float cos_sin[2 * 256];
    for (int64_t t = begin; t < end; ++t) {
      const float pos = static_cast<float>(positions[static_cast<size_t>(t)]) * rope.freq_scale;
      for (int64_t i = 0; i < half; ++i) {
        const double inv_freq =
            std::pow(double(rope.freq_base), -2.0 * double(i) / double(rope.rope_dim));
        const double theta = double(pos) * inv_freq;
        cos_sin[2 * i] = static_cast<float>(std::cos(theta));
        cos_sin[2 * i + 1] = static_cast<float>(std::sin(theta));
      }
      for (int64_t h = 0; h < n_heads; ++h) {
        float* v = x + (t * n_heads + h) * head_dim;
        for (int64_t i = 0; i < half; ++i) {
          const float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
          const float x0 = v[2 * i], x1 = v[2 * i + 1];
          v[2 * i] = x0 * c - x1 * s;
          v[2 * i + 1] = x0 * s + x1 * c;
        }
      }
    }
  };
  if (rows * n_heads * head_dim < kParallelElements) {
    rotate_rows(0, rows, 0);
  } else {
    pool_.ParallelFor(rows, 4, rotate_rows);
  }
}

void CpuBackend::MatMul(const float* x, int64_t m, const WeightMatrix& w, float* y) {
  matmul_.Run(x, m, w, y);
}

void CpuBackend::SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  auto run = [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      const float g = gate[i];
      out[i] = g / (1.0f + std::exp(-g)) * up[i];
    }
  };
  if (n < kParallelElements) {
    run(0, n, 0);
  } else {
    pool_.ParallelFor(n, 4096, run);
  }
}

void CpuBackend::Add(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void CpuBackend::Softmax(float* x, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * n;
    const float mx = *std::max_element(row, row + n);
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
      row[i] = std::exp(row[i] - mx);
      sum += row[i];
    }
    const float inv = 1.0f / sum;
    for (int64_t i = 0; i < n; ++i) row[i] *= inv;
  }
}

void CpuBackend::Argmax(const float* x, int64_t rows, int64_t n, int32_t* out) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * n;
    int64_t best = -1;
    float best_value = -kInf;
    for (int64_t i = 0; i < n; ++i) {
      if (!(row[i] < kInf)) {  // NaN or +inf
        best = -1;
        break;
      }
      if (row[i] > best_value) {  // strict: ties keep the lowest index; -inf is never taken
        best_value = row[i];
        best = i;
      }
    }
    out[r] = static_cast<int32_t>(best);
  }
}

void CpuBackend::ParallelForOnHost(int64_t n, const std::function<void(int64_t i)>& body) {
  pool_.ParallelFor(n, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) body(i);
  });
}

void CpuBackend::SampleRows(const float* x, int64_t rows, int64_t n,
                            std::span<const RowSampling> params, int32_t* out) {
  // The engine samples on the host when the backend is a host backend; this op serves the
  // simulated device backend of the tests and callers of the op interface. Plain is enough.
  for (int64_t r = 0; r < rows; ++r) {
    out[r] = SampleRow({x + r * n, static_cast<size_t>(n)}, params[static_cast<size_t>(r)],
                       sample_order_);
  }
}

void CpuBackend::StoreKv(const KvLayerView& c, const float* k, const float* v,
                         std::span<const AttentionSequence> sequences) {
  const int64_t width = c.n_kv_heads * c.head_dim;
  for (const AttentionSequence& s : sequences) {
    for (int64_t t = 0; t < s.row_count; ++t) {
      const int64_t pos = s.start_pos + t;
      const int64_t block = s.block_table[static_cast<size_t>(pos / c.block_size)];
      const int64_t slot = pos % c.block_size;
      const int64_t row = s.row_begin + t;
      for (int64_t h = 0; h < c.n_kv_heads; ++h) {
        const int64_t at = c.Offset(block, h, slot);
        simd_.float_to_half(k + row * width + h * c.head_dim, c.head_dim, c.k + at);
        simd_.float_to_half(v + row * width + h * c.head_dim, c.head_dim, c.v + at);
      }
    }
  }
}

// Floats of scratch one attention tile with `n_q` (row, head) pairs needs: a K block, a V block,
// one score per block slot, accumulators, running max and sum.
namespace {
size_t AttentionScratchFloats(const KvLayerView& c, int64_t n_q) {
  return static_cast<size_t>(2 * c.block_size * c.head_dim + c.block_size + n_q * (c.head_dim + 2));
}
}  // namespace

// Online-softmax attention of query rows [row_lo, row_hi) of one sequence, for the query heads
// of KV heads [kv_lo, kv_hi). Keys and values are read block by block through the block table;
// a KV head's part of a block is read as F16 when one query uses it, else converted to F32 once
// for all of its rows and query heads (the arithmetic is the same either way). The
// heads of a block lie next to each other in the cache, so a tile of several KV heads reads
// each block front to back; every head's result is the same whatever the tile.
void CpuBackend::AttendTile(const KvLayerView& c, const float* q, const AttentionSequence& seq,
                            int64_t kv_lo, int64_t kv_hi, int64_t row_lo, int64_t row_hi,
                            int64_t n_heads, float scale, float* out, int thread) {
  const int64_t hd = c.head_dim;
  const int64_t bs = c.block_size;
  const int64_t group = n_heads / c.n_kv_heads;
  const int64_t n_rows = row_hi - row_lo;
  const int64_t n_q = (kv_hi - kv_lo) * n_rows * group;  // (KV head, row, head) triples
  float* kf = scratch_.Get(thread, AttentionScratchFloats(c, n_q));
  float* vf = kf + bs * hd;
  float* scores = vf + bs * hd;
  float* acc = scores + bs;
  float* run_max = acc + n_q * hd;
  float* run_sum = run_max + n_q;
  std::fill(acc, acc + n_q * hd, 0.0f);
  std::fill(run_max, run_max + n_q, -std::numeric_limits<float>::infinity());
  std::fill(run_sum, run_sum + n_q, 0.0f);
  const auto query_index = [&](int64_t kv, int64_t r, int64_t j) {
    return ((kv - kv_lo) * n_rows + r) * group + j;
  };

  const int64_t last_pos = seq.start_pos + row_hi - 1;  // the tile's latest query position
  const int64_t n_blocks = last_pos / bs + 1;
  const int64_t prefetch_bytes = (kv_hi - kv_lo) * bs * hd * 2;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int64_t block = seq.block_table[static_cast<size_t>(b)];
    const int64_t first = b * bs;
    const int64_t n_tok = std::min(bs, last_pos + 1 - first);
    // Blocks are a block stride apart (or anywhere, once the cache has churned): ask for the
    // tile's part of them two blocks ahead (and for block 1 at the start), or decode attention
    // waits on memory.
    for (int64_t ahead = b == 0 ? 1 : 2; ahead <= 2 && b + ahead < n_blocks; ++ahead) {
      const int64_t next = c.Offset(seq.block_table[static_cast<size_t>(b + ahead)], kv_lo, 0);
      for (int64_t byte = 0; byte < prefetch_bytes; byte += 64) {
        __builtin_prefetch(reinterpret_cast<const char*>(c.k + next) + byte);
        __builtin_prefetch(reinterpret_cast<const char*>(c.v + next) + byte);
      }
    }
    for (int64_t kv = kv_lo; kv < kv_hi; ++kv) {
      const int64_t at = c.Offset(block, kv, 0);
      if (n_rows * group == 1) {
        // One query for this head (decode without GQA): read the F16 block in place.
        const int64_t valid = std::min(n_tok, seq.start_pos + row_lo + 1 - first);
        if (valid <= 0) continue;
        const int64_t h = kv * group;
        const int64_t qi = query_index(kv, 0, 0);
        simd_.attend_block_f16(q + ((seq.row_begin + row_lo) * n_heads + h) * hd, c.k + at,
                               c.v + at, valid, hd, scale, scores, &run_max[qi], &run_sum[qi],
                               acc + qi * hd);
        continue;
      }
      // Several queries share the block: convert it once.
      simd_.half_to_float(c.k + at, n_tok * hd, kf);
      simd_.half_to_float(c.v + at, n_tok * hd, vf);
      for (int64_t r = 0; r < n_rows; ++r) {
        const int64_t pos = seq.start_pos + row_lo + r;
        const int64_t valid = std::min(n_tok, pos + 1 - first);  // causal mask
        if (valid <= 0) continue;
        for (int64_t j = 0; j < group; ++j) {
          const int64_t h = kv * group + j;
          const int64_t qi = query_index(kv, r, j);
          simd_.attend_block_f32(q + ((seq.row_begin + row_lo + r) * n_heads + h) * hd, kf, vf,
                                 valid, hd, scale, scores, &run_max[qi], &run_sum[qi],
                                 acc + qi * hd);
        }
      }
    }
  }
  for (int64_t kv = kv_lo; kv < kv_hi; ++kv) {
    for (int64_t r = 0; r < n_rows; ++r) {
      for (int64_t j = 0; j < group; ++j) {
        const int64_t h = kv * group + j;
        const int64_t qi = query_index(kv, r, j);
        float* o = out + ((seq.row_begin + row_lo + r) * n_heads + h) * hd;
        const float inv = 1.0f / run_sum[qi];
        for (int64_t d = 0; d < hd; ++d) o[d] = acc[qi * hd + d] * inv;
      }
    }
  }
}

void CpuBackend::RunAttention(const KvLayerView& cache, const float* q,
                              std::span<const AttentionSequence> sequences, int64_t n_heads,
                              float scale, int64_t rows_per_task, int64_t kv_heads_per_task,
                              float* out) {
  tasks_.clear();
  int64_t widest_tile = 0;
  for (const AttentionSequence& s : sequences) {
    widest_tile = std::max(widest_tile, std::min(s.row_count, rows_per_task));
    for (int64_t h = 0; h < cache.n_kv_heads; h += kv_heads_per_task) {
      const int64_t h_hi = std::min(cache.n_kv_heads, h + kv_heads_per_task);
      for (int64_t lo = 0; lo < s.row_count; lo += rows_per_task) {
        tasks_.push_back({&s, h, h_hi, lo, std::min(s.row_count, lo + rows_per_task)});
      }
    }
  }
  const int64_t group = n_heads / cache.n_kv_heads;
  scratch_.Reserve(pool_.size(),
                   AttentionScratchFloats(cache, widest_tile * group * kv_heads_per_task));
  pool_.ParallelFor(static_cast<int64_t>(tasks_.size()), 1,
                    [&](int64_t begin, int64_t end, int thread) {
                      for (int64_t i = begin; i < end; ++i) {
                        const AttentionTask& t = tasks_[static_cast<size_t>(i)];
                        AttendTile(cache, q, *t.seq, t.kv_head_lo, t.kv_head_hi, t.row_lo,
                                   t.row_hi, n_heads, scale, out, thread);
                      }
                    });
}

void CpuBackend::AttentionPrefill(const KvLayerView& cache, const float* q,
                                  std::span<const AttentionSequence> sequences, int64_t n_heads,
                                  float scale, float* out) {
  RunAttention(cache, q, sequences, n_heads, scale, kPrefillRowsPerTask, 1, out);
}

void CpuBackend::AttentionDecode(const KvLayerView& cache, const float* q,
                                 std::span<const AttentionSequence> sequences, int64_t n_heads,
                                 float scale, float* out) {
  // One query row per sequence: tiles of several KV heads read the cache in long runs. Keep
  // about four tiles per thread for balance.
  const int64_t n_seqs = static_cast<int64_t>(sequences.size());
  const int64_t tiles_wanted = 4 * static_cast<int64_t>(pool_.size());
  const int64_t heads_per_tile = std::clamp<int64_t>(
      cache.n_kv_heads * n_seqs / std::max<int64_t>(1, tiles_wanted), 1, cache.n_kv_heads);
  RunAttention(cache, q, sequences, n_heads, scale, 1, heads_per_tile, out);
}

}  // namespace bmad::kernels
