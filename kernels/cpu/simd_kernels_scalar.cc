// Portable versions of the inner loops (any CPU; the compiler may auto-vectorize them).
#include <algorithm>
#include <cmath>
#include <limits>

#include "common/bfloat16.h"
#include "common/half.h"
#include "kernels/cpu/packed_weights.h"
#include "kernels/cpu/simd_kernels.h"
#include "kernels/dequantize_row.h"
#include "kernels/k_quants.h"
#include "kernels/q8_0.h"

namespace bmad::kernels::cpu {
namespace {

void DequantRowScalar(WeightType type, const uint8_t* row, int64_t n, float* out) {
  DequantizeRowOfType(type, row, n, out);
}

void DotRowsScalar(WeightType type, const uint8_t* w, size_t w_stride, int64_t rows,
                   const float* x, int64_t ldx, int64_t cols, int64_t k, float* y, int64_t ldy) {
  float row[4096];
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* wr = w + static_cast<size_t>(r) * w_stride;
    for (int64_t c = 0; c < cols; ++c) {
      float acc = 0.0f;
      for (int64_t k0 = 0; k0 < k; k0 += 4096) {
        const int64_t n = std::min<int64_t>(4096, k - k0);
        // Blocks are at most 256 wide and 4096 is a multiple of 256: chunks stay block-aligned.
        const size_t offset = RowBytes(type, k0);
        DequantRowScalar(type, wr + offset, n, row);
        for (int64_t i = 0; i < n; ++i) acc += row[i] * x[c * ldx + k0 + i];
      }
      y[c * ldy + r] = acc;
    }
  }
}

void PanelGemmScalar(WeightType type, const uint8_t* panels, size_t panel_stride, int64_t rows,
                     const float* x, int64_t ldx, int64_t cols, int64_t k, float* y,
                     int64_t ldy) {
  const WeightMatrix w{type, WeightLayout::kPanels16, panels, rows, k, panel_stride};
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      float acc = 0.0f;
      for (int64_t i = 0; i < k; ++i) acc = std::fma(PackedElement(w, r, i), x[c * ldx + i], acc);
      y[c * ldy + r] = acc;
    }
  }
}

void RoundHalfScalar(const float* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = RoundToHalf(x[i]);
}

void RoundBf16Scalar(const float* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = RoundToBf16(x[i]);
}

void FloatToHalfScalar(const float* in, int64_t n, uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = FloatToHalf(in[i]);
}

float DotScalar(const float* a, const float* b, int64_t n) {
  float acc = 0.0f;
  for (int64_t i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

void AttendRowsScalar(const float* q, int64_t row_stride, int64_t n_rows, int64_t first_n,
                      int64_t n_kv, int64_t group, const uint16_t* k, const uint16_t* v,
                      const int32_t* blocks, int64_t block_stride, int64_t block_size, int64_t hd,
                      float scale, int64_t span_tokens, float* scratch, float* out) {
  const int64_t n_q = n_kv * group;
  float* s = scratch;  // one query's span of scores at a time
  for (int64_t r = 0; r < n_rows; ++r) {
    const int64_t n = first_n + r;
    for (int64_t j = 0; j < n_q; ++j) {
      const int64_t head = (j / group) * block_size * hd;
      const auto at = [&](int64_t t) {
        return blocks[t / block_size] * block_stride + head + (t % block_size) * hd;
      };
      const float* qj = q + r * row_stride + j * hd;
      float* o = out + r * row_stride + j * hd;
      std::fill(o, o + hd, 0.0f);
      float run_max = -std::numeric_limits<float>::infinity(), run_sum = 0.0f;
      for (int64_t c0 = 0; c0 < n; c0 += span_tokens) {
        const int64_t len = std::min(span_tokens, n - c0);
        float span_max = -std::numeric_limits<float>::infinity();
        for (int64_t t = 0; t < len; ++t) {
          float dot = 0.0f;
          for (int64_t d = 0; d < hd; ++d) dot += qj[d] * HalfToFloat(k[at(c0 + t) + d]);
          s[t] = dot * scale;
          span_max = std::max(span_max, s[t]);
        }
        const float new_max = std::max(run_max, span_max);
        if (run_max != -std::numeric_limits<float>::infinity() && run_max != new_max) {
          const float correction = std::exp(run_max - new_max);
          run_sum *= correction;
          for (int64_t d = 0; d < hd; ++d) o[d] *= correction;
        }
        for (int64_t t = 0; t < len; ++t) {
          s[t] = std::exp(s[t] - new_max);
          run_sum += s[t];
          for (int64_t d = 0; d < hd; ++d) o[d] += s[t] * HalfToFloat(v[at(c0 + t) + d]);
        }
        run_max = new_max;
      }
      for (int64_t d = 0; d < hd; ++d) o[d] /= run_sum;
    }
  }
}

void SwiGluScalar(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

}  // namespace

void KQuantDotRowsScalar(WeightType type, const uint8_t* w, size_t w_stride, int64_t rows,
                         const ActivationBlockQ8_K* xq, int64_t cols, int64_t k, float* y,
                         int64_t ldy) {
  const int64_t nb = k / kQK_K;
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = w + static_cast<size_t>(r) * w_stride;
    if (type == WeightType::kQ4_K) {
      DotQ4_KQ8_KRows(reinterpret_cast<const BlockQ4_K*>(row), xq, nb, cols, y + r, ldy);
    } else if (type == WeightType::kQ5_K) {
      DotQ5_KQ8_KRows(reinterpret_cast<const BlockQ5_K*>(row), xq, nb, cols, y + r, ldy);
    } else {
      DotQ6_KQ8_KRows(reinterpret_cast<const BlockQ6_K*>(row), xq, nb, cols, y + r, ldy);
    }
  }
}

void QuantizeQ8KRowsScalar(const float* x, int64_t m, int64_t k, ActivationBlockQ8_K* out) {
  QuantizeActivationRowQ8_K(x, m * k, out);
}

const SimdKernels& ScalarSimdKernels() {
  static const SimdKernels kKernels{"scalar",         DotRowsScalar,     PanelGemmScalar,
                                    DequantRowScalar,
                                    RoundHalfScalar,  FloatToHalfScalar,
                                    DotScalar,        AttendRowsScalar,
                                    SwiGluScalar,     nullptr,
                                    nullptr,          KQuantDotRowsScalar,
                                    QuantizeQ8KRowsScalar, RoundBf16Scalar};
  return kKernels;
}

const SimdKernels& BestSimdKernels() {
  static const SimdKernels* best = [] {
    const SimdKernels* avx512 = Avx512SimdKernels();
    return avx512 ? avx512 : &ScalarSimdKernels();
  }();
  return *best;
}

}  // namespace bmad::kernels::cpu
