// Portable versions of the inner loops (any CPU; the compiler may auto-vectorize them).
#include <algorithm>
#include <cmath>
#include <limits>

#include "common/half.h"
#include "kernels/cpu/packed_weights.h"
#include "kernels/cpu/simd_kernels.h"
#include "kernels/q8_0.h"

namespace bmad::kernels::cpu {
namespace {

void DequantRowScalar(WeightType type, const uint8_t* row, int64_t n, float* out) {
  switch (type) {
    case WeightType::kF32:
      for (int64_t i = 0; i < n; ++i) out[i] = reinterpret_cast<const float*>(row)[i];
      break;
    case WeightType::kF16:
      for (int64_t i = 0; i < n; ++i) out[i] = HalfToFloat(reinterpret_cast<const uint16_t*>(row)[i]);
      break;
    case WeightType::kQ8_0:
      DequantizeRowQ8_0(reinterpret_cast<const BlockQ8_0*>(row), n, out);
      break;
  }
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
        // Q8_0 blocks are 32 wide and 4096 is a multiple of 32, so chunks stay block-aligned.
        const size_t offset = type == WeightType::kQ8_0
                                  ? static_cast<size_t>(k0 / kQ8_0Block) * sizeof(BlockQ8_0)
                                  : static_cast<size_t>(k0) * (type == WeightType::kF16 ? 2 : 4);
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

void HalfToFloatScalar(const uint16_t* in, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = HalfToFloat(in[i]);
}

void FloatToHalfScalar(const float* in, int64_t n, uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = FloatToHalf(in[i]);
}

float DotScalar(const float* a, const float* b, int64_t n) {
  float acc = 0.0f;
  for (int64_t i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

inline float KvValue(const float* p, int64_t i) { return p[i]; }
inline float KvValue(const uint16_t* p, int64_t i) { return HalfToFloat(p[i]); }

template <typename Src>
void AttendBlockScalar(const float* q, const Src* k, const Src* v, int64_t n, int64_t hd,
                       float scale, float* scores, float* run_max, float* run_sum, float* acc) {
  float block_max = -std::numeric_limits<float>::infinity();
  for (int64_t t = 0; t < n; ++t) {
    float s = 0.0f;
    for (int64_t d = 0; d < hd; ++d) s += q[d] * KvValue(k, t * hd + d);
    scores[t] = s * scale;
    block_max = std::max(block_max, scores[t]);
  }
  const float new_max = std::max(*run_max, block_max);
  const float correction = std::exp(*run_max - new_max);
  if (correction != 1.0f) {
    for (int64_t d = 0; d < hd; ++d) acc[d] *= correction;
  }
  float sum = *run_sum * correction;
  for (int64_t t = 0; t < n; ++t) {
    const float p = std::exp(scores[t] - new_max);
    sum += p;
    for (int64_t d = 0; d < hd; ++d) acc[d] += p * KvValue(v, t * hd + d);
  }
  *run_sum = sum;
  *run_max = new_max;
}

}  // namespace

const SimdKernels& ScalarSimdKernels() {
  static const SimdKernels kKernels{"scalar",         DotRowsScalar,     PanelGemmScalar,
                                    DequantRowScalar,
                                    RoundHalfScalar,  HalfToFloatScalar, FloatToHalfScalar,
                                    DotScalar,        AttendBlockScalar<float>,
                                    AttendBlockScalar<uint16_t>};
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
