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
//   Q8_0: for each block of 32 inputs: float scale[16], then uint8 [8][16][4]: 8 groups of 4
//         inputs, each 16 rows x 4 consecutive inputs (one 64-byte vector), stored as q + 128
//                                                         panel bytes = 18 k
// The Q8_0 order is the one AVX-512 VNNI's vpdpbusd reads: each 32-bit lane (one row) takes 4
// unsigned bytes and multiplies them by 4 signed activation bytes (see simd_kernels_vnni.cc).
// Packing copies (no dequantization): Q8_0 stays 8-bit, F16 stays 16-bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "kernels/weight_matrix.h"

namespace bmad::kernels::cpu {

inline constexpr int64_t kPanelRows = 16;
inline constexpr size_t kPanelQ8BlockBytes = kPanelRows * sizeof(float) + 32 * kPanelRows;

// Offset, within a panel's Q8_0 block, of the byte of input j (0-31) of row `lane`.
inline constexpr size_t PanelQ8ValueOffset(int64_t j, int64_t lane) {
  return kPanelRows * sizeof(float) + static_cast<size_t>((j / 4) * 64 + lane * 4 + j % 4);
}

// Whether the CPU backend packs weights of `type` into panels. K-quants stay in rows: their
// integer kernels read each super-block whole (kernels/cpu/kquant_dot_vnni.cc).
inline bool Packable(WeightType type) { return !IsKQuant(type); }

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
