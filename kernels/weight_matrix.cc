#include "kernels/weight_matrix.h"

#include "kernels/q8_0.h"

namespace bmad::kernels {

std::string_view WeightTypeName(WeightType type) {
  switch (type) {
    case WeightType::kF32: return "f32";
    case WeightType::kF16: return "f16";
    case WeightType::kQ8_0: return "q8_0";
  }
  return "?";
}

size_t RowBytes(WeightType type, int64_t cols) {
  switch (type) {
    case WeightType::kF32: return static_cast<size_t>(cols) * 4;
    case WeightType::kF16: return static_cast<size_t>(cols) * 2;
    case WeightType::kQ8_0: return static_cast<size_t>(cols / kQ8_0Block) * sizeof(BlockQ8_0);
  }
  return 0;
}

}  // namespace bmad::kernels
