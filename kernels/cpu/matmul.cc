#include "kernels/cpu/matmul.h"

#include <cblas.h>

#include <algorithm>

#include "kernels/cpu/packed_weights.h"
#include "kernels/k_quants.h"
#include "kernels/q8_0.h"

namespace bmad::kernels::cpu {
namespace {

// Rows of W per parallel task in the dot-product regimes: enough work to amortize the handout,
// small enough to balance 2-64 threads.
constexpr int64_t kRowsPerTask = 64;
// Packed panels per parallel task: 192 outputs, divisible by every NP the kernels use (12, 6,
// 4, 3). From 7 activation rows every kernel takes 3 panels at a time, and tasks of 6 panels
// halve the wait for the last task of a narrow product (768 outputs are 4 tasks of 12).
constexpr int64_t kPanelsPerTask = 12;
constexpr int64_t kPanelsPerTaskManyRows = 6;
constexpr int64_t kManyRows = 7;
// Activation elements below which rounding them (F16, Q8_0) stays on the calling thread.
constexpr int64_t kParallelActivationElements = 1 << 15;
// Activation elements up to which each thread of a packed product rounds its own copy (a
// decode step's rows, up to 64 of the widest input here): at most half a MiB per thread.
constexpr int64_t kPerThreadInputElements = 1 << 17;

}  // namespace

MatMulEngine::MatMulEngine(ThreadPool& pool, const SimdKernels& simd, ScratchBuffers& scratch,
                           bool sgemm_for_rows_layout)
    : pool_(pool), simd_(simd), scratch_(scratch), sgemm_for_rows_layout_(sgemm_for_rows_layout) {}

void MatMulEngine::Run(const float* x, int64_t m, const WeightMatrix& w, float* y) {
  const WeightMatrix* ws[] = {&w};
  float* ys[] = {y};
  RunShared(x, m, ws, ys);
}

void MatMulEngine::RunShared(const float* x, int64_t m, std::span<const WeightMatrix* const> ws,
                             std::span<float* const> ys) {
  if (m <= 0 || ws.empty()) return;
  const WeightMatrix& w0 = *ws[0];
  bool shared = w0.layout == WeightLayout::kPanels16;
  for (const WeightMatrix* w : ws) {
    shared = shared && w->layout == w0.layout && w->type == w0.type && w->cols == w0.cols;
  }
  if (!shared) {
    // K-quant products of one input share its rounding to Q8_K (a layer's Q, K and V).
    const ActivationBlockQ8_K* xq = nullptr;
    for (size_t i = 0; i < ws.size(); ++i) {
      const WeightMatrix& w = *ws[i];
      if (w.rows <= 0) continue;
      if (IsKQuant(w.type)) {
        if (xq == nullptr) xq = QuantizeQ8K(x, m, w.cols);
        RunKQuant(xq, m, w, ys[i]);
        continue;
      }
      xq = nullptr;  // the products below may reuse (or grow) the scratch it lives in
      if (w.layout == WeightLayout::kPanels16) {
        RunShared(x, m, ws.subspan(i, 1), ys.subspan(i, 1));
      } else if (sgemm_for_rows_layout_ && m >= kSgemmMinRows) {
        RunSgemm(RoundedInput(x, m, w), m, w, ys[i]);
      } else {
        RunDot(RoundedInput(x, m, w), m, w, ys[i]);
      }
    }
    return;
  }
  // With VNNI, Q8_0 (Q4_1, Q5_1) panels take the activations as 8-bit integers (RunPanelsQ8).
  if ((w0.type == WeightType::kQ8_0 || HasBlockMins(w0.type)) && simd_.panel_gemm_q8 != nullptr) {
    RunPanelsQ8(x, m, ws, ys);
  } else {
    RunPanels(x, m, ws, ys);
  }
}

const float* MatMulEngine::RoundedInput(const float* x, int64_t m, const WeightMatrix& w) {
  // llama.cpp rounds the activations as the weights' type multiplies them (ActivationRoundingOf);
  // doing the same keeps our products within float order of its (F16: greedy output token for
  // token equal; Q4_1/Q5_1 differ in the min's term, see kernels/legacy_quants.h). Without VNNI,
  // Q8_0 products multiply the values the Q8_0-rounded activations stand for, in floats.
  const ActivationRounding rounding = ActivationRoundingOf(w.type);
  if (rounding == ActivationRounding::kNone || rounding == ActivationRounding::kQ8_K) return x;
  const int64_t k = w.cols;
  float* rounded = scratch_.Get(pool_.size(), static_cast<size_t>(m * k));
  ForRowBlocks(m, k, [&](int64_t r0, int64_t rows) { Round(rounding, x + r0 * k, rows * k, rounded + r0 * k); });
  return rounded;
}

void MatMulEngine::Round(ActivationRounding rounding, const float* x, int64_t n, float* out) const {
  switch (rounding) {
    case ActivationRounding::kHalf: simd_.round_half(x, n, out); break;
    case ActivationRounding::kBf16: simd_.round_bf16(x, n, out); break;
    case ActivationRounding::kQ8_0: RoundToQ8_0(x, n, out); break;
    case ActivationRounding::kNone:
    case ActivationRounding::kQ8_K: std::copy(x, x + n, out); break;  // not float roundings
  }
}

void MatMulEngine::ForRowBlocks(int64_t m, int64_t k,
                                const std::function<void(int64_t, int64_t)>& fn) {
  // A decode step's few rows are not worth waking the pool for; a prefill chunk's are.
  if (m * k < kParallelActivationElements) {
    fn(0, m);
    return;
  }
  const int64_t rows_per_task = std::max<int64_t>(1, kParallelActivationElements / k);
  pool_.ParallelFor((m + rows_per_task - 1) / rows_per_task, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t r0 = t * rows_per_task;
      fn(r0, std::min(rows_per_task, m - r0));
    }
  });
}

void MatMulEngine::ForPanelGroups(
    int64_t m, std::span<const WeightMatrix* const> ws,
    const std::function<void(size_t, const uint8_t*, int64_t, int64_t, int)>& fn) {
  // Task t is group t - first[i] of weight i, for the i whose range holds it.
  const int64_t panels_per_task = m >= kManyRows ? kPanelsPerTaskManyRows : kPanelsPerTask;
  std::vector<int64_t>& first = task_starts_;
  first.assign(1, 0);
  for (const WeightMatrix* w : ws) {
    first.push_back(first.back() + (PanelCount(w->rows) + panels_per_task - 1) / panels_per_task);
  }
  pool_.ParallelFor(first.back(), 1, [&](int64_t begin, int64_t end, int thread) {
    size_t i = 0;
    for (int64_t t = begin; t < end; ++t) {
      while (t >= first[i + 1]) ++i;
      const WeightMatrix& w = *ws[i];
      const int64_t p0 = (t - first[i]) * panels_per_task;
      fn(i, static_cast<const uint8_t*>(w.data) + static_cast<size_t>(p0) * w.row_bytes,
         p0 * kPanelRows, std::min(panels_per_task * kPanelRows, w.rows - p0 * kPanelRows), thread);
    }
  });
}

void MatMulEngine::RunPanels(const float* x, int64_t m, std::span<const WeightMatrix* const> ws,
                             std::span<float* const> ys) {
  const int64_t k = ws[0]->cols;
  const WeightType type = ws[0]->type;
  // F16, BF16 and, without VNNI, Q8_0 products take rounded activations; F32 ones take x as it is.
  const bool rounds = type != WeightType::kF32;
  const bool per_thread = rounds && PrepareInputPerThread(m, k, static_cast<size_t>(m * k));
  const float* shared = rounds && !per_thread ? RoundedInput(x, m, *ws[0]) : x;
  ForPanelGroups(m, ws, [&](size_t i, const uint8_t* panels, int64_t first, int64_t rows, int thread) {
    const float* input = shared;
    if (per_thread) {
      float* own = scratch_.Get(thread, static_cast<size_t>(m * k));
      if (!input_ready_[thread]) {
        Round(ActivationRoundingOf(type), x, m * k, own);
        input_ready_[thread] = 1;
      }
      input = own;
    }
    const WeightMatrix& w = *ws[i];
    simd_.panel_gemm(w.type, panels, w.row_bytes, rows, input, w.cols, m, w.cols, ys[i] + first,
                     w.rows);
  });
}

void MatMulEngine::RunPanelsQ8(const float* x, int64_t m, std::span<const WeightMatrix* const> ws,
                               std::span<float* const> ys) {
  const int64_t k = ws[0]->cols;
  const size_t row_bytes = Q8ActivationRowBytes(k);
  const size_t floats = (row_bytes * static_cast<size_t>(m) + 3) / 4;
  const bool per_thread = PrepareInputPerThread(m, k, floats);
  uint8_t* shared = nullptr;
  if (!per_thread) {
    shared = reinterpret_cast<uint8_t*>(scratch_.Get(pool_.size(), floats));
    ForRowBlocks(m, k, [&](int64_t r0, int64_t rows) {
      simd_.quantize_q8_rows(x + r0 * k, rows, k, shared + static_cast<size_t>(r0) * row_bytes);
    });
  }
  ForPanelGroups(m, ws, [&](size_t i, const uint8_t* panels, int64_t first, int64_t rows, int thread) {
    const uint8_t* input = shared;
    if (per_thread) {
      auto* own = reinterpret_cast<uint8_t*>(scratch_.Get(thread, floats));
      if (!input_ready_[thread]) {
        simd_.quantize_q8_rows(x, m, k, own);
        input_ready_[thread] = 1;
      }
      input = own;
    }
    const WeightMatrix& w = *ws[i];
    simd_.panel_gemm_q8(w.type, panels, w.row_bytes, rows, input, m, k, ys[i] + first, w.rows);
  });
}

bool MatMulEngine::PrepareInputPerThread(int64_t m, int64_t k, size_t floats) {
  // A decode step's few rows: each thread rounds its own copy, on its first task. Rounding
  // them once on the calling thread would leave the others waiting, and then every thread
  // would read a buffer another core has just written, line by line (measured on a 16-row F16
  // step: 2.4% of all samples, nearly all store stalls, with the other thread idle meanwhile).
  // A prefill chunk's many rows are rounded once, in parallel, into one shared buffer.
  if (m * k > kPerThreadInputElements || pool_.size() == 1) return false;
  scratch_.Reserve(pool_.size(), floats);
  input_ready_.assign(static_cast<size_t>(pool_.size()), 0);
  return true;
}

void MatMulEngine::RunSgemm(const float* x, int64_t m, const WeightMatrix& w, float* y) {
  const int64_t k = w.cols;
  const int64_t n = w.rows;
  if (w.type == WeightType::kF32) {
    // About four tiles per thread, for balance.
    const int64_t tile = std::max<int64_t>(16, (n / (4 * pool_.size()) + 15) / 16 * 16);
    pool_.ParallelFor((n + tile - 1) / tile, 1, [&](int64_t begin, int64_t end, int) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t r0 = t * tile;
        const int64_t rows = std::min(tile, n - r0);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m),
                    static_cast<int>(rows), static_cast<int>(k), 1.0f, x, static_cast<int>(k),
                    reinterpret_cast<const float*>(w.Row(r0)), static_cast<int>(k), 0.0f,
                    y + r0, static_cast<int>(n));
      }
    });
    return;
  }
  // A tile of dequantized rows that stays within ~256 KiB of L2.
  const int64_t tile = std::clamp<int64_t>((65536 / k) / 16 * 16, 16, 256);
  scratch_.Reserve(pool_.size(), static_cast<size_t>(tile * k));
  pool_.ParallelFor((n + tile - 1) / tile, 1, [&](int64_t begin, int64_t end, int thread) {
    float* buf = scratch_.Get(thread, static_cast<size_t>(tile * k));
    for (int64_t t = begin; t < end; ++t) {
      const int64_t r0 = t * tile;
      const int64_t rows = std::min(tile, n - r0);
      for (int64_t r = 0; r < rows; ++r) simd_.dequant_row(w.type, w.Row(r0 + r), k, buf + r * k);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m),
                  static_cast<int>(rows), static_cast<int>(k), 1.0f, x, static_cast<int>(k), buf,
                  static_cast<int>(k), 0.0f, y + r0, static_cast<int>(n));
    }
  });
}

const ActivationBlockQ8_K* MatMulEngine::QuantizeQ8K(const float* x, int64_t m, int64_t k) {
  const int64_t blocks = k / kQK_K;
  const size_t bytes = static_cast<size_t>(m * blocks) * sizeof(ActivationBlockQ8_K);
  auto* xq = reinterpret_cast<ActivationBlockQ8_K*>(scratch_.Get(pool_.size(), (bytes + 3) / 4));
  // A prefill chunk's many rows in parallel.
  ForRowBlocks(m, k, [&](int64_t r0, int64_t rows) {
    simd_.quantize_q8_k_rows(x + r0 * k, rows, k, xq + r0 * blocks);
  });
  return xq;
}

void MatMulEngine::RunKQuant(const ActivationBlockQ8_K* xq, int64_t m, const WeightMatrix& w,
                             float* y) {
  const int64_t n = w.rows;
  const int64_t tasks = (n + kRowsPerTask - 1) / kRowsPerTask;
  pool_.ParallelFor(tasks, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t r0 = t * kRowsPerTask;
      simd_.kquant_dot_rows(w.type, w.Row(r0), w.row_bytes, std::min(kRowsPerTask, n - r0), xq, m,
                            w.cols, y + r0, n);
    }
  });
}

void MatMulEngine::RunDot(const float* x, int64_t m, const WeightMatrix& w, float* y) {
  const int64_t k = w.cols;
  const int64_t n = w.rows;
  const int64_t tasks = (n + kRowsPerTask - 1) / kRowsPerTask;
  // With more than one activation row and converted weights, convert each weight row once into
  // the thread's buffer and reuse it for every activation row.
  const bool convert_first = m > 4 && w.type != WeightType::kF32;
  if (convert_first) scratch_.Reserve(pool_.size(), static_cast<size_t>(kRowsPerTask * k));
  pool_.ParallelFor(tasks, 1, [&](int64_t begin, int64_t end, int thread) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t r0 = t * kRowsPerTask;
      const int64_t rows = std::min(kRowsPerTask, n - r0);
      if (convert_first) {
        float* buf = scratch_.Get(thread, static_cast<size_t>(kRowsPerTask * k));
        for (int64_t r = 0; r < rows; ++r) simd_.dequant_row(w.type, w.Row(r0 + r), k, buf + r * k);
        simd_.dot_rows(WeightType::kF32, reinterpret_cast<const uint8_t*>(buf),
                       static_cast<size_t>(k) * sizeof(float), rows, x, k, m, k, y + r0, n);
      } else {
        simd_.dot_rows(w.type, w.Row(r0), w.row_bytes, rows, x, k, m, k, y + r0, n);
      }
    }
  });
}

}  // namespace bmad::kernels::cpu
