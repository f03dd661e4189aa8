#include "kernels/weight_matrix.h"

#include "kernels/k_quants.h"
#include "kernels/legacy_quants.h"
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
    case WeightType::kBF16: return "bf16";
    case WeightType::kQ4_0: return "q4_0";
    case WeightType::kQ5_0: return "q5_0";
    case WeightType::kQ4_1: return "q4_1";
    case WeightType::kQ5_1: return "q5_1";
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
    case WeightType::kBF16: return static_cast<size_t>(cols) * 2;
    case WeightType::kQ4_0: return static_cast<size_t>(cols / kQ8_0Block) * sizeof(BlockQ4_0);
    case WeightType::kQ5_0: return static_cast<size_t>(cols / kQ8_0Block) * sizeof(BlockQ5_0);
    case WeightType::kQ4_1: return static_cast<size_t>(cols / kQ8_0Block) * sizeof(BlockQ4_1);
    case WeightType::kQ5_1: return static_cast<size_t>(cols / kQ8_0Block) * sizeof(BlockQ5_1);
  }
  return 0;
}

int64_t BlockElements(WeightType type) {
  switch (type) {
    case WeightType::kF32:
    case WeightType::kF16:
    case WeightType::kBF16: return 1;
    case WeightType::kQ8_0:
    case WeightType::kQ4_0:
    case WeightType::kQ5_0:
    case WeightType::kQ4_1:
    case WeightType::kQ5_1: return kQ8_0Block;
    case WeightType::kQ4_K:
    case WeightType::kQ5_K:
    case WeightType::kQ6_K: return kQK_K;
  }
  return 1;
}

ActivationRounding ActivationRoundingOf(WeightType type) {
  switch (type) {
    case WeightType::kF32: return ActivationRounding::kNone;
    case WeightType::kF16: return ActivationRounding::kHalf;
    case WeightType::kBF16: return ActivationRounding::kBf16;
    case WeightType::kQ8_0:
    case WeightType::kQ4_0:
    case WeightType::kQ5_0:
    case WeightType::kQ4_1:
    case WeightType::kQ5_1: return ActivationRounding::kQ8_0;
    case WeightType::kQ4_K:
    case WeightType::kQ5_K:
    case WeightType::kQ6_K: return ActivationRounding::kQ8_K;
  }
  return ActivationRounding::kNone;
}

}  // namespace bmad::kernels
