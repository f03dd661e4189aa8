// The CPU backend's packed weight layout (WeightLayout::kPanels16).
//
// Rows are grouped into panels of 16 (the last one zero-padded). A panel stores its 16 rows
// k-major, so the matmul kernel reads one input feature of 16 outputs with one vector load and
// multiplies it by one broadcast activation: no horizontal sums, every output accumulated in
// input order by one FMA chain. That fixed order is what makes results independent of how many
// rows a step has (batch invariance), and the layout streams through memory panel by panel.
//
//   F32:  float  [k][16]                                  panel bytes = 64 k
//   F16:  uint16 [k][16]                                  panel bytes = 32 k
//   BF16: uint16 [k][16]                                  panel bytes = 32 k
//   Q8_0: for each block of 32 inputs: float scale[16], then uint8 [8][16][4]: 8 groups of 4
//         inputs, each 16 rows x 4 consecutive inputs (one 64-byte vector), stored as q + 128
//                                                         panel bytes = 18 k
//   Q4_0, Q5_0: as Q8_0, the same values (ToQ8_0 in kernels/legacy_quants.h): the packed view's
//         type is kQ8_0, and its products are Q8_0's.
//   Q4_1, Q5_1: as Q8_0 with the unsigned levels q (w = scale * q + min), and float min[16]
//         after the scales                                panel bytes = 20 k
// The Q8_0 order is the one AVX-512 VNNI's vpdpbusd reads: each 32-bit lane (one row) takes 4
// unsigned bytes and multiplies them by 4 signed activation bytes (see simd_kernels_vnni.cc).
// Packing copies (no dequantization): Q8_0 stays 8-bit, F16 and BF16 stay 16-bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "kernels/weight_matrix.h"

namespace bmad::kernels::cpu {

inline constexpr int64_t kPanelRows = 16;
inline constexpr size_t kPanelQ8BlockBytes = kPanelRows * sizeof(float) + 32 * kPanelRows;
inline constexpr size_t kPanelQ8MinBlockBytes = kPanelQ8BlockBytes + kPanelRows * sizeof(float);

// Offset, within a panel's Q8_0 block (with mins: `header` = 128), of the byte of input j
// (0-31) of row `lane`.
inline constexpr size_t PanelQ8ValueOffset(int64_t j, int64_t lane, size_t header = kPanelRows * sizeof(float)) {
  return header + static_cast<size_t>((j / 4) * 64 + lane * 4 + j % 4);
}

// Whether the CPU backend packs weights of `type` into panels. K-quants stay in rows: their
// integer kernels read each super-block whole (kernels/cpu/kquant_dot_vnni.cc).
inline bool Packable(WeightType type) { return !IsKQuant(type); }

// The type of the packed view of a matrix of `type`.
inline WeightType PackedType(WeightType type) {
  return type == WeightType::kQ4_0 || type == WeightType::kQ5_0 ? WeightType::kQ8_0 : type;
}

// Bytes of one panel of a Packable type (0 for the others).
size_t PanelBytes(WeightType type, int64_t cols);
inline int64_t PanelCount(int64_t rows) { return (rows + kPanelRows - 1) / kPanelRows; }

struct PackedWeights {
  std::unique_ptr<uint8_t[], void (*)(uint8_t*)> storage{nullptr, nullptr};  // 64-byte aligned
  size_t bytes = 0;
  WeightMatrix view;  // layout kPanels16; row_bytes holds the panel stride
};

// Packs a kRows matrix of a Packable type. Q8_0 needs cols % 32 == 0 (as GGUF guarantees). `allocate`, when set,
// provides the memory (64-byte aligned, owned by the caller: never freed here); otherwise it
// comes from the system allocator and is freed with the PackedWeights.
PackedWeights PackWeights(const WeightMatrix& rows_layout,
                          const std::function<void*(size_t bytes)>& allocate = nullptr);

// Element (r, c) of a packed matrix as F32 (tests and the reference backend).
float PackedElement(const WeightMatrix& packed, int64_t r, int64_t c);

}  // namespace bmad::kernels::cpu
