#include "kernels/reference/reference_backend.h"

#include <cmath>
#include <vector>

#include "common/bfloat16.h"
#include "common/half.h"
#include "kernels/cpu/packed_weights.h"
#include "kernels/dequantize_row.h"
#include "kernels/k_quants.h"
#include "kernels/q8_0.h"

namespace bmad::kernels {

void DequantizeRow(const WeightMatrix& w, int64_t r, float* out) {
  if (w.layout == WeightLayout::kPanels16) {
    for (int64_t c = 0; c < w.cols; ++c) out[c] = cpu::PackedElement(w, r, c);
    return;
  }
  DequantizeRowOfType(w.type, w.Row(r), w.cols, out);
}

void ReferenceBackend::Embedding(const WeightMatrix& table, std::span<const int32_t> ids,
                                 float* out) {
  for (size_t i = 0; i < ids.size(); ++i) DequantizeRow(table, ids[i], out + i * table.cols);
}

void ReferenceBackend::RmsNorm(const float* x, const float* weight, int64_t rows, int64_t dim,
                               float eps, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t i = 0; i < dim; ++i) sum += double(x[r * dim + i]) * x[r * dim + i];
    const double scale = 1.0 / std::sqrt(sum / double(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) {
      out[r * dim + i] = static_cast<float>(x[r * dim + i] * scale * weight[i]);
    }
  }
}

void ReferenceBackend::Rope(float* x, std::span<const int32_t> positions, int64_t n_heads,
                            int64_t head_dim, const RopeConfig& rope) {
  for (size_t t = 0; t < positions.size(); ++t) {
    const double pos = double(positions[t]) * rope.freq_scale;
    for (int64_t h = 0; h < n_heads; ++h) {
      float* head = x + (int64_t(t) * n_heads + h) * head_dim;
      for (int64_t i = 0; i < rope.rope_dim / 2; ++i) {
        double theta = pos * std::pow(double(rope.freq_base), -2.0 * double(i) / double(rope.rope_dim));
        if (!rope.freq_factors.empty()) theta /= double(rope.freq_factors[static_cast<size_t>(i)]);
        const double c = std::cos(theta), s = std::sin(theta);
        const double x0 = head[2 * i], x1 = head[2 * i + 1];
        head[2 * i] = static_cast<float>(x0 * c - x1 * s);
        head[2 * i + 1] = static_cast<float>(x0 * s + x1 * c);
      }
    }
  }
}

void ReferenceBackend::MatMul(const float* x, int64_t m, const WeightMatrix& w, float* y) {
  std::vector<float> row(static_cast<size_t>(w.cols));
  // The activations as the weights' type multiplies them (see Backend::MatMul).
  std::vector<float> xs(x, x + m * w.cols);
  switch (ActivationRoundingOf(w.type)) {
    case ActivationRounding::kNone: break;
    case ActivationRounding::kHalf:
      for (float& v : xs) v = RoundToHalf(v);
      break;
    case ActivationRounding::kBf16:
      for (float& v : xs) v = RoundToBf16(v);
      break;
    case ActivationRounding::kQ8_0:
      RoundToQ8_0(xs.data(), static_cast<int64_t>(xs.size()), xs.data());
      break;
    case ActivationRounding::kQ8_K:
      RoundToQ8_K(xs.data(), static_cast<int64_t>(xs.size()), xs.data());
      break;
  }
  for (int64_t r = 0; r < w.rows; ++r) {
    DequantizeRow(w, r, row.data());
    for (int64_t i = 0; i < m; ++i) {
      double acc = 0;
      for (int64_t c = 0; c < w.cols; ++c) {
        acc += double(xs[static_cast<size_t>(i * w.cols + c)]) * row[c];
      }
      y[i * w.rows + r] = static_cast<float>(acc);
    }
  }
}

void ReferenceBackend::SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

void ReferenceBackend::Add(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void ReferenceBackend::Softmax(float* x, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * n;
    double mx = row[0];
    for (int64_t i = 1; i < n; ++i) mx = std::max(mx, double(row[i]));
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += std::exp(row[i] - mx);
    for (int64_t i = 0; i < n; ++i) row[i] = static_cast<float>(std::exp(row[i] - mx) / sum);
  }
}

void ReferenceBackend::Argmax(const float* x, int64_t rows, int64_t n, int32_t* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * n;
    bool finite = true;
    for (int64_t i = 0; i < n; ++i) finite = finite && !std::isnan(row[i]) && row[i] != INFINITY;
    int64_t best = -1;
    for (int64_t i = 0; i < n && finite; ++i) {
      if (row[i] != -INFINITY && (best < 0 || row[i] > row[best])) best = i;
    }
    out[r] = static_cast<int32_t>(best);
  }
}

void ReferenceBackend::SampleRows(const float* x, int64_t rows, int64_t n,
                                  std::span<const RowSampling> params, int32_t* out) {
  std::vector<int32_t> order;
  for (int64_t r = 0; r < rows; ++r) {
    out[r] = SampleRow({x + r * n, static_cast<size_t>(n)}, params[static_cast<size_t>(r)], order);
  }
}

void ReferenceBackend::StoreKv(const KvLayerView& c, const float* k, const float* v,
                               std::span<const AttentionSequence> sequences) {
  const int64_t width = c.n_kv_heads * c.head_dim;
  for (const AttentionSequence& s : sequences) {
    for (int64_t t = 0; t < s.row_count; ++t) {
      const int64_t pos = s.start_pos + t;
      const int64_t row = s.row_begin + t;
      for (int64_t h = 0; h < c.n_kv_heads; ++h) {
        for (int64_t d = 0; d < c.head_dim; ++d) {
          const int64_t idx = KvIndex(c, s.block_table, pos, h, d);
          c.k[idx] = FloatToHalf(k[row * width + h * c.head_dim + d]);
          c.v[idx] = FloatToHalf(v[row * width + h * c.head_dim + d]);
        }
      }
    }
  }
}

namespace {

void AttendAll(const KvLayerView& c, const float* q, std::span<const AttentionSequence> sequences,
               int64_t n_heads, float scale, float* out) {
  const int64_t group = n_heads / c.n_kv_heads;
  const int64_t hd = c.head_dim;
  for (const AttentionSequence& s : sequences) {
    for (int64_t t = 0; t < s.row_count; ++t) {
      const int64_t row = s.row_begin + t;
      const int64_t last = s.start_pos + t;  // causal: positions 0..last
      for (int64_t h = 0; h < n_heads; ++h) {
        const int64_t kvh = h / group;
        const float* qh = q + (row * n_heads + h) * hd;
        std::vector<double> scores(static_cast<size_t>(last + 1));
        double mx = -INFINITY;
        for (int64_t p = 0; p <= last; ++p) {
          double dot = 0;
          for (int64_t d = 0; d < hd; ++d) {
            dot += double(qh[d]) * HalfToFloat(c.k[KvIndex(c, s.block_table, p, kvh, d)]);
          }
          scores[p] = dot * scale;
          mx = std::max(mx, scores[p]);
        }
        double sum = 0;
        for (double& sc : scores) {
          sc = std::exp(sc - mx);
          sum += sc;
        }
        float* oh = out + (row * n_heads + h) * hd;
        for (int64_t d = 0; d < hd; ++d) {
          double acc = 0;
          for (int64_t p = 0; p <= last; ++p) {
            acc += scores[p] * HalfToFloat(c.v[KvIndex(c, s.block_table, p, kvh, d)]);
          }
          oh[d] = static_cast<float>(acc / sum);
        }
      }
    }
  }
}

}  // namespace

void ReferenceBackend::AttentionPrefill(const KvLayerView& cache, const float* q,
                                        std::span<const AttentionSequence> sequences,
                                        int64_t n_heads, float scale, float* out) {
  AttendAll(cache, q, sequences, n_heads, scale, out);
}

void ReferenceBackend::AttentionDecode(const KvLayerView& cache, const float* q,
                                       std::span<const AttentionSequence> sequences,
                                       int64_t n_heads, float scale, float* out) {
  AttendAll(cache, q, sequences, n_heads, scale, out);
}

}  // namespace bmad::kernels
