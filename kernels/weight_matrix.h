// A weight matrix as the kernels see it: `rows` output features, each a contiguous run of
// `cols` input features (ggml's [cols, rows] layout, which is how GGUF stores llama weights).
// The data is never owned here: it points into a mapped GGUF file or an arena.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace bmad::kernels {

// kQ4_K, kQ5_K and kQ6_K: kernels/k_quants.h (rows only: the CPU backend does not pack them).
enum class WeightType { kF32, kF16, kQ8_0, kQ4_K, kQ6_K, kQ5_K };

// Whether rows of `type` are made of K-quant super-blocks (256 elements each).
inline bool IsKQuant(WeightType type) {
  return type == WeightType::kQ4_K || type == WeightType::kQ5_K || type == WeightType::kQ6_K;
}

// How the bytes are laid out.
//  kRows:     row r is a contiguous run of `cols` elements (GGUF's layout).
//  kPanels16: the CPU backend's packed layout (kernels/cpu/packed_weights.h): groups of 16
//             rows stored k-major, so one vector load gives one input feature of 16 outputs.
enum class WeightLayout { kRows, kPanels16 };

std::string_view WeightTypeName(WeightType type);
// Elements per block of `type`: 1 for F32 and F16, 32 for Q8_0, 256 for the K-quants.
int64_t BlockElements(WeightType type);
// Bytes of one row of `cols` elements (cols a multiple of BlockElements(type)).
size_t RowBytes(WeightType type, int64_t cols);

struct WeightMatrix {
  WeightType type = WeightType::kF32;
  WeightLayout layout = WeightLayout::kRows;
  const void* data = nullptr;
  int64_t rows = 0;        // output features
  int64_t cols = 0;        // input features, contiguous
  size_t row_bytes = 0;    // stride between rows

  // kRows only.
  const uint8_t* Row(int64_t r) const {
    return static_cast<const uint8_t*>(data) + static_cast<size_t>(r) * row_bytes;
  }
  // Rows [begin, begin + count): the slice a tensor-parallel rank owns when splitting outputs
  // (kRows only).
  WeightMatrix RowSlice(int64_t begin, int64_t count) const {
    WeightMatrix s = *this;
    s.data = Row(begin);
    s.rows = count;
    return s;
  }
};

inline WeightMatrix MakeWeightMatrix(WeightType type, const void* data, int64_t rows,
                                     int64_t cols) {
  return WeightMatrix{type, WeightLayout::kRows, data, rows, cols, RowBytes(type, cols)};
}

}  // namespace bmad::kernels
