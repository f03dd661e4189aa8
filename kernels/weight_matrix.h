// A weight matrix as the kernels see it: `rows` output features, each a contiguous run of
// `cols` input features (ggml's [cols, rows] layout, which is how GGUF stores llama weights).
// The data is never owned here: it points into a mapped GGUF file or an arena.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace bmad::kernels {

// kQ4_K, kQ5_K and kQ6_K: kernels/k_quants.h (rows only: the CPU backend does not pack them).
// kQ4_0, kQ5_0, kQ4_1 and kQ5_1: kernels/legacy_quants.h (the CPU backend packs the _0 types as
// Q8_0, the _1 types as Q8_0 with a min per block). kBF16: F32's top half (common/bfloat16.h).
// New types go at the end: the CUDA kernels number the first three.
enum class WeightType { kF32, kF16, kQ8_0, kQ4_K, kQ6_K, kQ5_K, kBF16, kQ4_0, kQ5_0, kQ4_1, kQ5_1 };

// Whether blocks of `type` carry a min added to every weight (w = d * q + m): Q4_1 and Q5_1.
inline bool HasBlockMins(WeightType type) { return type == WeightType::kQ4_1 || type == WeightType::kQ5_1; }

// Whether rows of `type` are made of K-quant super-blocks (256 elements each).
inline bool IsKQuant(WeightType type) {
  return type == WeightType::kQ4_K || type == WeightType::kQ5_K || type == WeightType::kQ6_K;
}

// What products with weights of a type do to the activations first, as llama.cpp does (see
// Backend::MatMul): F32 takes them as they are; F16 and BF16 round them to their own type;
// Q8_0 and the 32-weight types (Q4_0, Q5_0, Q4_1, Q5_1) round them to Q8_0 blocks
// (kernels/q8_0.h); the K-quants to Q8_K blocks.
enum class ActivationRounding { kNone, kHalf, kBf16, kQ8_0, kQ8_K };
ActivationRounding ActivationRoundingOf(WeightType type);

// How the bytes are laid out.
//  kRows:     row r is a contiguous run of `cols` elements (GGUF's layout).
//  kPanels16: the CPU backend's packed layout (kernels/cpu/packed_weights.h): groups of 16
//             rows stored k-major, so one vector load gives one input feature of 16 outputs.
enum class WeightLayout { kRows, kPanels16 };

std::string_view WeightTypeName(WeightType type);
// Elements per block of `type`: 1 for F32, F16 and BF16, 32 for Q8_0, Q4_0, Q5_0, Q4_1 and
// Q5_1, 256 for the K-quants.
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
