// One row (or a block-aligned part of one) of a GGUF-layout weight matrix of any type, as F32:
// the portable kernels, the reference backend and the embedding lookups of quantized tables
// share it.
#pragma once

#include <cstdint>

#include "kernels/weight_matrix.h"

namespace bmad::kernels {

// out[0, n) = the n values `row` holds (n a multiple of BlockElements(type)).
void DequantizeRowOfType(WeightType type, const uint8_t* row, int64_t n, float* out);

}  // namespace bmad::kernels
