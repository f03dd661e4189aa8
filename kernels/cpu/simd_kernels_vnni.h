// The integer Q8_0 kernels, built for AVX-512 VNNI (simd_kernels_vnni.cc), and the integer K-quant
// ones (kquant_dot_vnni.cc); called only after the runtime check in simd_kernels_avx512.cc.
// Contracts: QuantizeQ8RowsFn, PanelGemmQ8Fn and KQuantDotRowsFn (simd_kernels.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/k_quants.h"
#include "kernels/weight_matrix.h"

namespace bmad::kernels::cpu {

void QuantizeQ8RowsVnni(const float* x, int64_t m, int64_t k, uint8_t* out);
void PanelGemmQ8Vnni(WeightType type, const uint8_t* panels, size_t panel_stride, int64_t rows,
                     const uint8_t* xq, int64_t cols, int64_t k, float* y, int64_t ldy);
// KQuantDotRowsFn (kernels/cpu/kquant_dot_vnni.cc).
void KQuantDotRowsVnni(WeightType type, const uint8_t* w, size_t w_stride, int64_t rows,
                       const ActivationBlockQ8_K* xq, int64_t cols, int64_t k, float* y,
                       int64_t ldy);

}  // namespace bmad::kernels::cpu
