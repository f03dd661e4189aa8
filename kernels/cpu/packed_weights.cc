#include "kernels/cpu/packed_weights.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "common/bfloat16.h"
#include "common/half.h"
#include "kernels/legacy_quants.h"
#include "kernels/q8_0.h"

namespace bmad::kernels::cpu {
namespace {

void FreeAligned(uint8_t* p) { std::free(p); }
void FreeNothing(uint8_t*) {}

// Puts block b of a row (as Q8_0) into lane `lane` of panel p.
void PackQ8Block(const BlockQ8_0& block, int64_t b, int64_t lane, uint8_t* p) {
  uint8_t* pb = p + static_cast<size_t>(b) * kPanelQ8BlockBytes;
  const float scale = HalfToFloat(block.scale);
  std::memcpy(pb + lane * 4, &scale, 4);
  for (int j = 0; j < kQ8_0Block; ++j) {
    pb[PanelQ8ValueOffset(j, lane)] = static_cast<uint8_t>(block.q[j] + 128);
  }
}

// Puts block b of a row with mins into lane `lane` of panel p.
void PackQ8MinBlock(const LevelsWithMin& block, int64_t b, int64_t lane, uint8_t* p) {
  uint8_t* pb = p + static_cast<size_t>(b) * kPanelQ8MinBlockBytes;
  std::memcpy(pb + lane * 4, &block.scale, 4);
  std::memcpy(pb + (kPanelRows + lane) * 4, &block.min, 4);
  for (int j = 0; j < kQ8_0Block; ++j) {
    pb[PanelQ8ValueOffset(j, lane, 2 * kPanelRows * sizeof(float))] = static_cast<uint8_t>(block.q[j] + 128);
  }
}

}  // namespace

size_t PanelBytes(WeightType type, int64_t cols) {
  switch (type) {
    case WeightType::kF32: return static_cast<size_t>(cols) * kPanelRows * 4;
    case WeightType::kF16:
    case WeightType::kBF16: return static_cast<size_t>(cols) * kPanelRows * 2;
    case WeightType::kQ8_0:
    case WeightType::kQ4_0:
    case WeightType::kQ5_0: return static_cast<size_t>(cols / kQ8_0Block) * kPanelQ8BlockBytes;
    case WeightType::kQ4_1:
    case WeightType::kQ5_1: return static_cast<size_t>(cols / kQ8_0Block) * kPanelQ8MinBlockBytes;
    case WeightType::kQ4_K:
    case WeightType::kQ5_K:
    case WeightType::kQ6_K: return 0;  // not Packable
  }
  return 0;
}

PackedWeights PackWeights(const WeightMatrix& w, const std::function<void*(size_t)>& allocate) {
  PackedWeights out;
  const size_t panel = PanelBytes(w.type, w.cols);
  const int64_t panels = PanelCount(w.rows);
  out.bytes = panel * static_cast<size_t>(panels);
  const size_t rounded = (out.bytes + 63) / 64 * 64;
  auto* data = static_cast<uint8_t*>(allocate ? allocate(rounded) : std::aligned_alloc(64, rounded));
  std::memset(data, 0, out.bytes);
  out.storage = {data, allocate ? FreeNothing : FreeAligned};
  for (int64_t r = 0; r < w.rows; ++r) {
    uint8_t* p = data + static_cast<size_t>(r / kPanelRows) * panel;
    const int64_t lane = r % kPanelRows;
    const uint8_t* row = w.Row(r);
    switch (w.type) {
      case WeightType::kF32:
        for (int64_t c = 0; c < w.cols; ++c) {
          std::memcpy(p + (c * kPanelRows + lane) * 4, row + c * 4, 4);
        }
        break;
      case WeightType::kF16:
      case WeightType::kBF16:
        for (int64_t c = 0; c < w.cols; ++c) {
          std::memcpy(p + (c * kPanelRows + lane) * 2, row + c * 2, 2);
        }
        break;
      case WeightType::kQ8_0: {
        const auto* blocks = reinterpret_cast<const BlockQ8_0*>(row);
        for (int64_t b = 0; b < w.cols / kQ8_0Block; ++b) PackQ8Block(blocks[b], b, lane, p);
        break;
      }
      case WeightType::kQ4_0: {
        const auto* blocks = reinterpret_cast<const BlockQ4_0*>(row);
        for (int64_t b = 0; b < w.cols / kQ8_0Block; ++b) PackQ8Block(ToQ8_0(blocks[b]), b, lane, p);
        break;
      }
      case WeightType::kQ5_0: {
        const auto* blocks = reinterpret_cast<const BlockQ5_0*>(row);
        for (int64_t b = 0; b < w.cols / kQ8_0Block; ++b) PackQ8Block(ToQ8_0(blocks[b]), b, lane, p);
        break;
      }
      case WeightType::kQ4_1: {
        const auto* blocks = reinterpret_cast<const BlockQ4_1*>(row);
        for (int64_t b = 0; b < w.cols / kQ8_0Block; ++b) PackQ8MinBlock(Levels(blocks[b]), b, lane, p);
        break;
      }
      case WeightType::kQ5_1: {
        const auto* blocks = reinterpret_cast<const BlockQ5_1*>(row);
        for (int64_t b = 0; b < w.cols / kQ8_0Block; ++b) PackQ8MinBlock(Levels(blocks[b]), b, lane, p);
        break;
      }
      case WeightType::kQ4_K:
      case WeightType::kQ5_K:
      case WeightType::kQ6_K: break;  // not Packable: PanelBytes is 0
    }
  }
  out.view = WeightMatrix{PackedType(w.type), WeightLayout::kPanels16, data, w.rows, w.cols, panel};
  return out;
}

float PackedElement(const WeightMatrix& w, int64_t r, int64_t c) {
  const auto* p = static_cast<const uint8_t*>(w.data) + static_cast<size_t>(r / kPanelRows) * w.row_bytes;
  const int64_t lane = r % kPanelRows;
  switch (w.type) {
    case WeightType::kF32: {
      float v;
      std::memcpy(&v, p + (c * kPanelRows + lane) * 4, 4);
      return v;
    }
    case WeightType::kF16: {
      uint16_t h;
      std::memcpy(&h, p + (c * kPanelRows + lane) * 2, 2);
      return HalfToFloat(h);
    }
    case WeightType::kBF16: {
      uint16_t h;
      std::memcpy(&h, p + (c * kPanelRows + lane) * 2, 2);
      return Bf16ToFloat(h);
    }
    case WeightType::kQ8_0: {
      const uint8_t* pb = p + static_cast<size_t>(c / kQ8_0Block) * kPanelQ8BlockBytes;
      float scale;
      std::memcpy(&scale, pb + lane * 4, 4);
      const int q = static_cast<int>(pb[PanelQ8ValueOffset(c % kQ8_0Block, lane)]) - 128;
      return scale * static_cast<float>(q);
    }
    case WeightType::kQ4_1:
    case WeightType::kQ5_1: {
      const uint8_t* pb = p + static_cast<size_t>(c / kQ8_0Block) * kPanelQ8MinBlockBytes;
      float scale, min;
      std::memcpy(&scale, pb + lane * 4, 4);
      std::memcpy(&min, pb + (kPanelRows + lane) * 4, 4);
      const int q = static_cast<int>(pb[PanelQ8ValueOffset(c % kQ8_0Block, lane, 2 * kPanelRows * sizeof(float))]) - 128;
      return std::fma(scale, static_cast<float>(q), min);
    }
    case WeightType::kQ4_0:
    case WeightType::kQ5_0:  // packed as Q8_0
    case WeightType::kQ4_K:
    case WeightType::kQ5_K:
    case WeightType::kQ6_K: break;  // never packed
  }
  return 0;
}

}  // namespace bmad::kernels::cpu
