#include "kernels/legacy_quants.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/half.h"

namespace bmad::kernels {
namespace {

constexpr int kBlock = 32;

// The scale the reference quantizers pick: the value of largest magnitude (the first of them)
// divided by -levels, so that it maps to the lowest level.
float SignedScale(const float* x, float levels) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kBlock; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max / -levels;
}

// q = min(top, (int8_t)(x * id + offset)), the conversion truncating toward zero.
uint8_t Level(float x, float id, float offset, int top) {
  const float v = x * id + offset;
  // The reference casts to int8_t first; values here lie in (-1, top + 1), so truncation and the
  // cast agree (NaN, which it leaves undefined, becomes 0).
  const int t = std::isnan(v) ? 0 : static_cast<int>(std::clamp(v, -128.0f, 127.0f));
  return static_cast<uint8_t>(std::min(top, t));
}

// The 5-bit levels of a Q5 block (low nibbles in qs, fifth bits in qh).
void FiveBitLevels(const uint8_t* qs, const uint8_t* qh_bytes, uint8_t* q) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, sizeof qh);
  for (int j = 0; j < 16; ++j) {
    q[j] = static_cast<uint8_t>((qs[j] & 0x0F) | (((qh >> j) & 1u) << 4));
    q[j + 16] = static_cast<uint8_t>((qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4));
  }
}

void FourBitLevels(const uint8_t* qs, uint8_t* q) {
  for (int j = 0; j < 16; ++j) {
    q[j] = qs[j] & 0x0F;
    q[j + 16] = qs[j] >> 4;
  }
}

void DequantizeLevels(const LevelsWithMin& l, float* y) {
  for (int j = 0; j < kBlock; ++j) y[j] = l.scale * static_cast<float>(l.q[j]) + l.min;
}

// Packs 5-bit levels into qs (low nibbles) and qh (fifth bits), as FiveBitLevels reads them.
void PackFiveBitLevels(const uint8_t* q, uint8_t* qs, uint8_t* qh_bytes) {
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 0x0F) | ((q[j + 16] & 0x0F) << 4));
    qh |= static_cast<uint32_t>(q[j] >> 4) << j;
    qh |= static_cast<uint32_t>(q[j + 16] >> 4) << (j + 16);
  }
  std::memcpy(qh_bytes, &qh, sizeof qh);
}

// The _1 quantizers' scale, min and levels for one block.
LevelsWithMin QuantizeWithMin(const float* x, int top) {
  // As ggml's: comparisons that a NaN fails, so NaNs are skipped wherever they are.
  float min = std::numeric_limits<float>::max(), max = -std::numeric_limits<float>::max();
  for (int j = 0; j < kBlock; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
  LevelsWithMin l;
  l.scale = (max - min) / static_cast<float>(top);
  l.min = min;
  const float id = l.scale != 0.0f ? 1.0f / l.scale : 0.0f;
  for (int j = 0; j < kBlock; ++j) l.q[j] = Level(x[j] - min, id, 0.5f, top);
  return l;
}

}  // namespace

LevelsWithMin Levels(const BlockQ4_1& b) {
  LevelsWithMin l;
  l.scale = HalfToFloat(b.scale);
  l.min = HalfToFloat(b.min);
  FourBitLevels(b.qs, l.q);
  return l;
}

LevelsWithMin Levels(const BlockQ5_1& b) {
  LevelsWithMin l;
  l.scale = HalfToFloat(b.scale);
  l.min = HalfToFloat(b.min);
  FiveBitLevels(b.qs, b.qh, l.q);
  return l;
}

BlockQ8_0 ToQ8_0(const BlockQ4_0& b) {
  uint8_t q[kBlock];
  FourBitLevels(b.qs, q);
  BlockQ8_0 out;
  out.scale = b.scale;
  for (int j = 0; j < kBlock; ++j) out.q[j] = static_cast<int8_t>(q[j] - 8);
  return out;
}

BlockQ8_0 ToQ8_0(const BlockQ5_0& b) {
  uint8_t q[kBlock];
  FiveBitLevels(b.qs, b.qh, q);
  BlockQ8_0 out;
  out.scale = b.scale;
  for (int j = 0; j < kBlock; ++j) out.q[j] = static_cast<int8_t>(q[j] - 16);
  return out;
}

void DequantizeRowQ4_0(const BlockQ4_0* in, int64_t n, float* y) {
  for (int64_t b = 0; b < n / kBlock; ++b) {
    const BlockQ8_0 q = ToQ8_0(in[b]);
    DequantizeRowQ8_0(&q, kBlock, y + b * kBlock);
  }
}

void DequantizeRowQ5_0(const BlockQ5_0* in, int64_t n, float* y) {
  for (int64_t b = 0; b < n / kBlock; ++b) {
    const BlockQ8_0 q = ToQ8_0(in[b]);
    DequantizeRowQ8_0(&q, kBlock, y + b * kBlock);
  }
}

void DequantizeRowQ4_1(const BlockQ4_1* in, int64_t n, float* y) {
  for (int64_t b = 0; b < n / kBlock; ++b) DequantizeLevels(Levels(in[b]), y + b * kBlock);
}

void DequantizeRowQ5_1(const BlockQ5_1* in, int64_t n, float* y) {
  for (int64_t b = 0; b < n / kBlock; ++b) DequantizeLevels(Levels(in[b]), y + b * kBlock);
}

void QuantizeRowQ4_0(const float* x, int64_t n, BlockQ4_0* out) {
  for (int64_t b = 0; b < n / kBlock; ++b) {
    const float* xb = x + b * kBlock;
    const float d = SignedScale(xb, 8.0f);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].scale = FloatToHalf(d);
    for (int j = 0; j < 16; ++j) {
      out[b].qs[j] = static_cast<uint8_t>(Level(xb[j], id, 8.5f, 15) | (Level(xb[j + 16], id, 8.5f, 15) << 4));
    }
  }
}

void QuantizeRowQ5_0(const float* x, int64_t n, BlockQ5_0* out) {
  for (int64_t b = 0; b < n / kBlock; ++b) {
    const float* xb = x + b * kBlock;
    const float d = SignedScale(xb, 16.0f);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].scale = FloatToHalf(d);
    uint8_t q[kBlock];
    for (int j = 0; j < kBlock; ++j) q[j] = Level(xb[j], id, 16.5f, 31);
    PackFiveBitLevels(q, out[b].qs, out[b].qh);
  }
}

void QuantizeRowQ4_1(const float* x, int64_t n, BlockQ4_1* out) {
  for (int64_t b = 0; b < n / kBlock; ++b) {
    const LevelsWithMin l = QuantizeWithMin(x + b * kBlock, 15);
    out[b].scale = FloatToHalf(l.scale);
    out[b].min = FloatToHalf(l.min);
    for (int j = 0; j < 16; ++j) out[b].qs[j] = static_cast<uint8_t>(l.q[j] | (l.q[j + 16] << 4));
  }
}

void QuantizeRowQ5_1(const float* x, int64_t n, BlockQ5_1* out) {
  for (int64_t b = 0; b < n / kBlock; ++b) {
    const LevelsWithMin l = QuantizeWithMin(x + b * kBlock, 31);
    out[b].scale = FloatToHalf(l.scale);
    out[b].min = FloatToHalf(l.min);
    PackFiveBitLevels(l.q, out[b].qs, out[b].qh);
  }
}

}  // namespace bmad::kernels
