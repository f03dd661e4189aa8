#include "kernels/cpu/cpu_backend.h"

#include "kernels/cpu/packed_weights.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <system_error>

namespace bmad::kernels {
namespace {

// Below this many elements an element-wise op runs on the calling thread alone.
constexpr int64_t kParallelElements = 1 << 15;
// RMSNorm splits rows among the threads from here (a decode step of 8 rows of width 768 is
// 6K): the next op is a product every thread reads the whole output of, so a norm left to the
// calling thread is both a wait for the others and a buffer they must all fetch from its core.
constexpr int64_t kParallelNormElements = 1 << 12;
// Query rows per prefill attention task, at most.
constexpr int64_t kPrefillRowsPerTask = 16;
// Attention takes the context in spans of about this many tokens (AttendRowsF16Fn).
constexpr int64_t kAttentionSpanTokens = 2048;
// Scores one attention task may hold (1 MiB): fewer prefill rows a task for wide GQA groups.
constexpr int64_t kScoreFloatsPerTask = 1 << 18;

}  // namespace

struct CpuBackend::AttentionTask {
  const AttentionSequence* seq;
  int64_t kv_head_lo;  // KV heads [kv_head_lo, kv_head_hi)
  int64_t kv_head_hi;
  int64_t row_lo;
  int64_t row_hi;
};

Result<std::unique_ptr<CpuBackend>> CpuBackend::Create(const CpuBackendOptions& options) {
  try {
    return std::make_unique<CpuBackend>(options);
  } catch (const std::system_error& e) {
    // The system refused a thread (a process or memory limit): say so instead of aborting.
    return ResourceExhausted("cannot start " + std::to_string(options.threads > 0 ? options.threads : cpu::AvailableCores()) +
                             " compute threads: " + e.what());
  }
}

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
  if (w.layout == WeightLayout::kPanels16 || !cpu::Packable(w.type)) return 0;
  return cpu::PanelBytes(w.type, w.cols) * static_cast<size_t>(cpu::PanelCount(w.rows));
}

PreparedWeight CpuBackend::PrepareMatMulWeight(const WeightMatrix& w) {
  // K-quants are multiplied where they are mapped.
  if (w.layout == WeightLayout::kPanels16 || !cpu::Packable(w.type)) return {w, nullptr};
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
  if (rows * dim < kParallelNormElements) {
    norm_rows(0, rows, 0);
  } else {
    const int64_t grain = std::max<int64_t>(1, (kParallelElements / 8) / dim);
    pool_.ParallelFor(rows, grain, norm_rows);
  }
}

const float* CpuBackend::RopeAngles(std::span<const int32_t> positions, const RopeConfig& rope) {
  const bool same = rope.rope_dim == rope_config_.rope_dim &&
                    rope.freq_base == rope_config_.freq_base &&
                    rope.freq_scale == rope_config_.freq_scale &&
                    std::equal(rope.freq_factors.begin(), rope.freq_factors.end(),
                               rope_freq_factors_.begin(), rope_freq_factors_.end()) &&
                    std::equal(positions.begin(), positions.end(), rope_positions_.begin(),
                               rope_positions_.end());
  if (same) return rope_angles_.data();
  const int64_t half = rope.rope_dim / 2;
  rope_inv_freq_.resize(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    rope_inv_freq_[static_cast<size_t>(i)] =
        std::pow(double(rope.freq_base), -2.0 * double(i) / double(rope.rope_dim));
    if (!rope.freq_factors.empty()) {
      rope_inv_freq_[static_cast<size_t>(i)] /= double(rope.freq_factors[static_cast<size_t>(i)]);
    }
  }
  rope_angles_.resize(positions.size() * static_cast<size_t>(2 * half));
  for (size_t t = 0; t < positions.size(); ++t) {
    const float pos = static_cast<float>(positions[t]) * rope.freq_scale;
    float* cos_sin = rope_angles_.data() + t * static_cast<size_t>(2 * half);
    for (int64_t i = 0; i < half; ++i) {
      const double theta = double(pos) * rope_inv_freq_[static_cast<size_t>(i)];
      cos_sin[2 * i] = static_cast<float>(std::cos(theta));
      cos_sin[2 * i + 1] = static_cast<float>(std::sin(theta));
    }
  }
  rope_positions_.assign(positions.begin(), positions.end());
  rope_config_ = rope;
  rope_freq_factors_.assign(rope.freq_factors.begin(), rope.freq_factors.end());
  return rope_angles_.data();
}

void CpuBackend::Rope(float* x, std::span<const int32_t> positions, int64_t n_heads,
                      int64_t head_dim, const RopeConfig& rope) {
  const int64_t half = rope.rope_dim / 2;
  const int64_t rows = static_cast<int64_t>(positions.size());
  const float* angles = RopeAngles(positions, rope);
  auto rotate_rows = [&](int64_t begin, int64_t end, int) {
    for (int64_t t = begin; t < end; ++t) {
      const float* cos_sin = angles + t * 2 * half;
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

void CpuBackend::MatMuls(const float* x, int64_t m, std::span<const WeightMatrix* const> ws,
                         std::span<float* const> ys) {
  matmul_.RunShared(x, m, ws, ys);
}

void CpuBackend::SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  // An exp per element: worth both threads from a few thousand elements (a decode step of 8
  // sequences has 16K).
  auto run = [&](int64_t begin, int64_t end, int) {
    simd_.swiglu(gate + begin, up + begin, end - begin, out + begin);
  };
  constexpr int64_t kChunk = 2048;
  if (n < 2 * kChunk) {
    run(0, n, 0);
  } else {
    pool_.ParallelFor(n, kChunk, run);
  }
}

void CpuBackend::Add(float* x, const float* y, int64_t n) {
  // From 32K elements (a prefill chunk's residual is 512 rows of 768: 393K) both threads; a
  // decode step of the 134M model stays below that up to 42 sequences.
  auto add = [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) x[i] += y[i];
  };
  if (n < kParallelElements) {
    add(0, n, 0);
  } else {
    pool_.ParallelFor(n, kParallelElements / 4, add);
  }
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
  auto argmax_rows = [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) {
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
  };
  if (rows * n < kParallelElements) {
    argmax_rows(0, rows, 0);
  } else {
    pool_.ParallelFor(rows, 1, argmax_rows);
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
  auto store = [&](const AttentionSequence& s, int64_t t) {
    const int64_t pos = s.start_pos + t;
    const int64_t block = s.block_table[static_cast<size_t>(pos / c.block_size)];
    const int64_t slot = pos % c.block_size;
    const int64_t row = s.row_begin + t;
    for (int64_t h = 0; h < c.n_kv_heads; ++h) {
      const int64_t at = c.Offset(block, h, slot);
      simd_.float_to_half(k + row * width + h * c.head_dim, c.head_dim, c.k + at);
      simd_.float_to_half(v + row * width + h * c.head_dim, c.head_dim, c.v + at);
    }
  };
  int64_t rows = 0;
  for (const AttentionSequence& s : sequences) rows += s.row_count;
  if (rows * width < kParallelElements) {
    for (const AttentionSequence& s : sequences) {
      for (int64_t t = 0; t < s.row_count; ++t) store(s, t);
    }
    return;
  }
  // Many rows (a prefill chunk; a decode step only with very many sequences or wide KV heads),
  // split among the threads: task r is the r-th (sequence, token) pair, taking the sequences in
  // order. Tasks write different slots: only full blocks are shared between sequences.
  pool_.ParallelFor(rows, std::max<int64_t>(1, kParallelElements / (4 * width)),
                    [&](int64_t begin, int64_t end, int) {
    size_t i = 0;
    int64_t first_row = 0;  // of sequences[i] among all rows
    while (first_row + sequences[i].row_count <= begin) first_row += sequences[i++].row_count;
    for (int64_t r = begin; r < end; ++r) {
      while (r >= first_row + sequences[i].row_count) first_row += sequences[i++].row_count;
      store(sequences[i], r - first_row);
    }
  });
}

void CpuBackend::RunAttention(const KvLayerView& cache, const float* q,
                              std::span<const AttentionSequence> sequences, int64_t n_heads,
                              float scale, int64_t kv_heads_per_task, int64_t max_rows_per_task,
                              float* out) {
  const int64_t group = n_heads / cache.n_kv_heads;
  const int64_t hd = cache.head_dim;
  // Spans of about kAttentionSpanTokens whole blocks: the scratch depends on neither the
  // context nor the batch, so it is sized once.
  const int64_t span = std::max<int64_t>(1, kAttentionSpanTokens / cache.block_size) * cache.block_size;
  const int64_t per_row = cpu::AttendRowsScratchFloats(1, kv_heads_per_task * group, span);
  const int64_t rows = std::clamp<int64_t>(kScoreFloatsPerTask / per_row, 1, max_rows_per_task);
  tasks_.clear();
  for (const AttentionSequence& s : sequences) {
    for (int64_t h = 0; h < cache.n_kv_heads; h += kv_heads_per_task) {
      const int64_t h_hi = std::min(cache.n_kv_heads, h + kv_heads_per_task);
      for (int64_t lo = 0; lo < s.row_count; lo += rows) {
        tasks_.push_back({&s, h, h_hi, lo, std::min(s.row_count, lo + rows)});
      }
    }
  }
  const size_t scratch_floats = static_cast<size_t>(rows * per_row);
  scratch_.Reserve(pool_.size(), scratch_floats);
  pool_.ParallelFor(static_cast<int64_t>(tasks_.size()), 1,
                    [&](int64_t begin, int64_t end, int thread) {
    float* scratch = scratch_.Get(thread, scratch_floats);
    for (int64_t i = begin; i < end; ++i) {
      const AttentionTask& t = tasks_[static_cast<size_t>(i)];
      const int64_t first = ((t.seq->row_begin + t.row_lo) * n_heads + t.kv_head_lo * group) * hd;
      simd_.attend_rows_f16(q + first, n_heads * hd, t.row_hi - t.row_lo,
                            t.seq->start_pos + t.row_lo + 1, t.kv_head_hi - t.kv_head_lo, group,
                            cache.k + cache.Offset(0, t.kv_head_lo, 0),
                            cache.v + cache.Offset(0, t.kv_head_lo, 0), t.seq->block_table.data(),
                            cache.block_stride, cache.block_size, hd, scale, span, scratch,
                            out + first);
    }
  });
}

void CpuBackend::AttentionPrefill(const KvLayerView& cache, const float* q,
                                  std::span<const AttentionSequence> sequences, int64_t n_heads,
                                  float scale, float* out) {
  // A task is one KV head's queries for a tile of rows: every row reuses each block it reads.
  RunAttention(cache, q, sequences, n_heads, scale, 1, kPrefillRowsPerTask, out);
}

void CpuBackend::AttentionDecode(const KvLayerView& cache, const float* q,
                                 std::span<const AttentionSequence> sequences, int64_t n_heads,
                                 float scale, float* out) {
  // One row per sequence: a task covers several KV heads, which lie next to each other in every
  // block, so it reads each block front to back. Keep about four tasks per thread for balance.
  const int64_t n_seqs = static_cast<int64_t>(sequences.size());
  const int64_t tasks_wanted = 4 * static_cast<int64_t>(pool_.size());
  const int64_t heads_per_task = std::clamp<int64_t>(
      cache.n_kv_heads * n_seqs / std::max<int64_t>(1, tasks_wanted), 1, cache.n_kv_heads);
  RunAttention(cache, q, sequences, n_heads, scale, heads_per_task, 1, out);
}

}  // namespace bmad::kernels
