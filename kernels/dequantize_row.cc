#include "kernels/dequantize_row.h"

#include "common/bfloat16.h"
#include "common/half.h"
#include "kernels/k_quants.h"
#include "kernels/legacy_quants.h"
#include "kernels/q8_0.h"

namespace bmad::kernels {

void DequantizeRowOfType(WeightType type, const uint8_t* row, int64_t n, float* out) {
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
    case WeightType::kQ4_K:
      DequantizeRowQ4_K(reinterpret_cast<const BlockQ4_K*>(row), n, out);
      break;
    case WeightType::kQ5_K:
      DequantizeRowQ5_K(reinterpret_cast<const BlockQ5_K*>(row), n, out);
      break;
    case WeightType::kQ6_K:
      DequantizeRowQ6_K(reinterpret_cast<const BlockQ6_K*>(row), n, out);
      break;
    case WeightType::kBF16:
      for (int64_t i = 0; i < n; ++i) out[i] = Bf16ToFloat(reinterpret_cast<const uint16_t*>(row)[i]);
      break;
    case WeightType::kQ4_0:
      DequantizeRowQ4_0(reinterpret_cast<const BlockQ4_0*>(row), n, out);
      break;
    case WeightType::kQ5_0:
      DequantizeRowQ5_0(reinterpret_cast<const BlockQ5_0*>(row), n, out);
      break;
    case WeightType::kQ4_1:
      DequantizeRowQ4_1(reinterpret_cast<const BlockQ4_1*>(row), n, out);
      break;
    case WeightType::kQ5_1:
      DequantizeRowQ5_1(reinterpret_cast<const BlockQ5_1*>(row), n, out);
      break;
  }
}

}  // namespace bmad::kernels
