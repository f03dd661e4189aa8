#include "kernels/weight_matrix.h"

#include "kernels/k_quants.h"
#include "kernels/q8_0.h"

namespace bmad::kernels {

std::string_view WeightTypeName(WeightType type) {
  switch (type) {
    case WeightType::kF32: return "f32";
    case WeightType::kF16: return "f16";
    case WeightType::kQ8_0: return "q8_0";
    case WeightType::kQ4_K: return "q4_K";
    case WeightType::kQ5_K: return "q5_K";
    case WeightType::kQ6_K: return "q6_K";
  }
  return "?";
}

size_t RowBytes(WeightType type, int64_t cols) {
  switch (type) {
    case WeightType::kF32: return static_cast<size_t>(cols) * 4;
    case WeightType::kF16: return static_cast<size_t>(cols) * 2;
    case WeightType::kQ8_0: return static_cast<size_t>(cols / kQ8_0Block) * sizeof(BlockQ8_0);
    case WeightType::kQ4_K: return static_cast<size_t>(cols / kQK_K) * sizeof(BlockQ4_K);
    case WeightType::kQ5_K: return static_cast<size_t>(cols / kQK_K) * sizeof(BlockQ5_K);
    case WeightType::kQ6_K: return static_cast<size_t>(cols / kQK_K) * sizeof(BlockQ6_K);
  }
  return 0;
}

int64_t BlockElements(WeightType type) {
  switch (type) {
    case WeightType::kF32:
    case WeightType::kF16: return 1;
    case WeightType::kQ8_0: return kQ8_0Block;
    case WeightType::kQ4_K:
    case WeightType::kQ5_K:
    case WeightType::kQ6_K: return kQK_K;
  }
  return 1;
}

}  // namespace bmad::kernels
