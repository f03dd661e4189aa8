#include "kernels/k_quants.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/half.h"

namespace bmad::kernels {
namespace {

// The 256 values of a Q4_K block's nibbles, in element order (0..15).
void UnpackQ4_K(const BlockQ4_K& b, uint8_t* q) {
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      q[64 * c + l] = b.qs[32 * c + l] & 0xF;
      q[64 * c + 32 + l] = b.qs[32 * c + l] >> 4;
    }
  }
}

// The 256 values of a Q5_K block, in element order (0..31).
void UnpackQ5_K(const BlockQ5_K& b, uint8_t* q) {
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      q[64 * c + l] = static_cast<uint8_t>((b.qs[32 * c + l] & 0xF) | (((b.qh[l] >> (2 * c)) & 1) << 4));
      q[64 * c + 32 + l] = static_cast<uint8_t>((b.qs[32 * c + l] >> 4) | (((b.qh[l] >> (2 * c + 1)) & 1) << 4));
    }
  }
}

// The 256 values of a Q6_K block, in element order, with the 32 offset taken off (-32..31).
void UnpackQ6_K(const BlockQ6_K& b, int8_t* q) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = b.ql + 64 * h;
    const uint8_t* qh = b.qh + 32 * h;
    int8_t* out = q + 128 * h;
    for (int l = 0; l < 32; ++l) {
      out[l] = static_cast<int8_t>(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
      out[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
      out[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
      out[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
    }
  }
}

int RoundClamp(float v, int lo, int hi) {
  if (!(v == v)) return lo;  // NaN
  return static_cast<int>(std::nearbyint(std::clamp(v, static_cast<float>(lo), static_cast<float>(hi))));
}

}  // namespace

namespace {

// Q4_K and Q5_K: w = d * sc * q - dmin * m per sub-block of 32.
template <class Block, void (*Unpack)(const Block&, uint8_t*)>
void DequantizeScaledMin(const Block* in, int64_t n, float* y) {
  uint8_t q[kQK_K];
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float d = HalfToFloat(in[b].d);
    const float dmin = HalfToFloat(in[b].dmin);
    Unpack(in[b], q);
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      Q4_KScaleMin(in[b].scales, j, &sc, &m);
      const float ds = d * static_cast<float>(sc);
      const float ms = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) y[b * kQK_K + 32 * j + l] = ds * static_cast<float>(q[32 * j + l]) - ms;
    }
  }
}

}  // namespace

void DequantizeRowQ4_K(const BlockQ4_K* in, int64_t n, float* y) { DequantizeScaledMin<BlockQ4_K, UnpackQ4_K>(in, n, y); }
void DequantizeRowQ5_K(const BlockQ5_K* in, int64_t n, float* y) { DequantizeScaledMin<BlockQ5_K, UnpackQ5_K>(in, n, y); }

void DequantizeRowQ6_K(const BlockQ6_K* in, int64_t n, float* y) {
  int8_t q[kQK_K];
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float d = HalfToFloat(in[b].d);
    UnpackQ6_K(in[b], q);
    for (int g = 0; g < 16; ++g) {
      const float ds = d * static_cast<float>(in[b].scales[g]);
      for (int l = 0; l < 16; ++l) y[b * kQK_K + 16 * g + l] = ds * static_cast<float>(q[16 * g + l]);
    }
  }
}

void QuantizeActivationRowQ8_K(const float* x, int64_t n, ActivationBlockQ8_K* out) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float* xb = x + b * kQK_K;
    ActivationBlockQ8_K& o = out[b];
    float max = 0.0f, amax = 0.0f;
    for (int j = 0; j < kQK_K; ++j) {
      const float a = std::fabs(xb[j]);
      if (a > amax) {
        amax = a;
        max = xb[j];
      }
    }
    if (amax == 0.0f) {
      o.d = 0.0f;
      std::memset(o.q, 0, sizeof(o.q));
      std::memset(o.bsums, 0, sizeof(o.bsums));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQK_K; ++j) {
      const float r = iscale * xb[j];  // NaN (from a NaN or infinite input) gives 0
      o.q[j] = r == r ? static_cast<int8_t>(RoundClamp(r, -127, 127)) : 0;
    }
    for (int g = 0; g < kQK_K / 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += o.q[16 * g + l];
      o.bsums[g] = static_cast<int16_t>(sum);
    }
    o.d = 1.0f / iscale;
  }
}

void RoundToQ8_K(const float* x, int64_t n, float* out) {
  ActivationBlockQ8_K a;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    QuantizeActivationRowQ8_K(x + b * kQK_K, kQK_K, &a);
    for (int j = 0; j < kQK_K; ++j) out[b * kQK_K + j] = a.d * static_cast<float>(a.q[j]);
  }
}

namespace {

// The halving tree of DotQ4_KQ8_K's contract over n (a power of two) lanes; v is clobbered.
float LaneSum(float* v, int n) {
  for (int half = n / 2; half >= 1; half /= 2) {
    for (int i = 0; i < half; ++i) v[i] = v[i] + v[i + half];
  }
  return v[0];
}

// Lane i of the integer sums: elements 64z + 4i .. 64z + 4i + 3 for z = 0..3, times the
// scale of their sub-block (scale_of(element)).
template <class Value, class ScaleOf>
void IntegerLanes(const Value* q, const int8_t* a, ScaleOf scale_of, int32_t lanes[16]) {
  for (int i = 0; i < 16; ++i) {
    int32_t sum = 0;
    for (int z = 0; z < 4; ++z) {
      const int e = 64 * z + 4 * i;
      int32_t dot = 0;
      for (int b = 0; b < 4; ++b) dot += int32_t(q[e + b]) * a[e + b];
      sum += scale_of(e) * dot;
    }
    lanes[i] = sum;
  }
}

}  // namespace

void UnpackQ4_KScales(const uint8_t* scales, uint8_t sc[8], uint8_t m[8]) {
  uint32_t w[3];
  std::memcpy(w, scales, 12);
  // Bytes 0-3: scales 0-3 (low 6 bits) and the top bits of scales 4-7; bytes 4-7 likewise for
  // the mins; bytes 8-11: the low 4 bits of scales 4-7 (low nibble) and of mins 4-7 (high).
  const uint32_t out[4] = {w[0] & 0x3F3F3F3Fu, (w[2] & 0x0F0F0F0Fu) | ((w[0] >> 2) & 0x30303030u),
                           w[1] & 0x3F3F3F3Fu, ((w[2] >> 4) & 0x0F0F0F0Fu) | ((w[1] >> 2) & 0x30303030u)};
  std::memcpy(sc, out, 8);
  std::memcpy(m, out + 2, 8);
}

namespace {

// One Q4_K or Q5_K super-block unpacked for the products (once per tile of activation rows).
template <class Block, void (*Unpack)(const Block&, uint8_t*)>
struct ScaledMinBlock {
  uint8_t q[kQK_K], sc[8], m[8];
  float d, dmin;

  explicit ScaledMinBlock(const Block& b) : d(HalfToFloat(b.d)), dmin(HalfToFloat(b.dmin)) {
    Unpack(b, q);
    UnpackQ4_KScales(b.scales, sc, m);
  }

  void Step(const ActivationBlockQ8_K& a, float acc[16], float acc_min[8]) const {
    int32_t lanes[16];
    IntegerLanes(q, a.q, [&](int e) { return int32_t(sc[e / 32]); }, lanes);
    const float ds = a.d * d;
    const float dm = -(a.d * dmin);
    for (int i = 0; i < 16; ++i) acc[i] = std::fma(ds, static_cast<float>(lanes[i]), acc[i]);
    for (int j = 0; j < 8; ++j) {
      const int32_t mins = int32_t(m[j]) * (a.bsums[2 * j] + a.bsums[2 * j + 1]);
      acc_min[j] = std::fma(dm, static_cast<float>(mins), acc_min[j]);
    }
  }
};

// One Q6_K super-block unpacked: its stored 0..63 values, as the vector kernel multiplies them.
struct Q6_KBlock {
  uint8_t biased[kQK_K];
  int8_t sc[16];
  float d;

  explicit Q6_KBlock(const BlockQ6_K& b) : d(HalfToFloat(b.d)) {
    int8_t q[kQK_K];
    UnpackQ6_K(b, q);
    for (int e = 0; e < kQK_K; ++e) biased[e] = static_cast<uint8_t>(q[e] + 32);
    std::memcpy(sc, b.scales, sizeof(sc));
  }

  void Step(const ActivationBlockQ8_K& a, float acc[16], float acc_offset[8]) const {
    int32_t lanes[16];
    IntegerLanes(biased, a.q, [&](int e) { return int32_t(sc[e / 16]); }, lanes);
    const float ds = a.d * d;
    for (int i = 0; i < 16; ++i) acc[i] = std::fma(ds, static_cast<float>(lanes[i]), acc[i]);
    for (int j = 0; j < 8; ++j) {
      const int32_t offset = int32_t(sc[2 * j]) * a.bsums[2 * j] + int32_t(sc[2 * j + 1]) * a.bsums[2 * j + 1];
      acc_offset[j] = std::fma(-32.0f * ds, static_cast<float>(offset), acc_offset[j]);
    }
  }
};

// out[c * out_stride] for c < n: the product of the weight row w with activation row c (its
// blocks at a + c * blocks), each super-block unpacked once per 8 activation rows.
template <class Unpacked, class Block>
void DotRows(const Block* w, const ActivationBlockQ8_K* a, int64_t blocks, int64_t n, float* out,
             int64_t out_stride) {
  constexpr int64_t kTile = 8;
  for (int64_t c0 = 0; c0 < n; c0 += kTile) {
    const int64_t t = std::min(kTile, n - c0);
    float acc[kTile][16] = {}, acc_min[kTile][8] = {};
    for (int64_t s = 0; s < blocks; ++s) {
      const Unpacked u(w[s]);
      for (int64_t c = 0; c < t; ++c) u.Step(a[(c0 + c) * blocks + s], acc[c], acc_min[c]);
    }
    for (int64_t c = 0; c < t; ++c) out[(c0 + c) * out_stride] = LaneSum(acc[c], 16) + LaneSum(acc_min[c], 8);
  }
}

using Q4_KBlock = ScaledMinBlock<BlockQ4_K, UnpackQ4_K>;
using Q5_KBlock = ScaledMinBlock<BlockQ5_K, UnpackQ5_K>;

}  // namespace

void DotQ4_KQ8_KRows(const BlockQ4_K* w, const ActivationBlockQ8_K* a, int64_t blocks, int64_t n,
                     float* out, int64_t out_stride) {
  DotRows<Q4_KBlock>(w, a, blocks, n, out, out_stride);
}

void DotQ5_KQ8_KRows(const BlockQ5_K* w, const ActivationBlockQ8_K* a, int64_t blocks, int64_t n,
                     float* out, int64_t out_stride) {
  DotRows<Q5_KBlock>(w, a, blocks, n, out, out_stride);
}

void DotQ6_KQ8_KRows(const BlockQ6_K* w, const ActivationBlockQ8_K* a, int64_t blocks, int64_t n,
                     float* out, int64_t out_stride) {
  DotRows<Q6_KBlock>(w, a, blocks, n, out, out_stride);
}

float DotQ4_KQ8_K(const BlockQ4_K* w, const ActivationBlockQ8_K* a, int64_t blocks) {
  float out;
  DotQ4_KQ8_KRows(w, a, blocks, 1, &out, 1);
  return out;
}

float DotQ5_KQ8_K(const BlockQ5_K* w, const ActivationBlockQ8_K* a, int64_t blocks) {
  float out;
  DotQ5_KQ8_KRows(w, a, blocks, 1, &out, 1);
  return out;
}

float DotQ6_KQ8_K(const BlockQ6_K* w, const ActivationBlockQ8_K* a, int64_t blocks) {
  float out;
  DotQ6_KQ8_KRows(w, a, blocks, 1, &out, 1);
  return out;
}

namespace {

// Q4_K (levels 15) and Q5_K (31): per sub-block of 32, the range of its values (with 0 in it)
// over `levels` steps; the scales and mins rounded to 6 bits under F16 super-scales. Writes d,
// dmin and scales of `o`, and the values (0..levels) to q.
template <class Block>
void QuantizeScaledMin(const float* xb, int levels, Block& o, uint8_t* q) {
  float scale[8], min[8];  // per sub-block: step and (positive) offset, before rounding
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    float lo = 0.0f, hi = -INFINITY;
    for (int l = 0; l < 32; ++l) {
      lo = std::min(lo, xb[32 * j + l]);
      hi = std::max(hi, xb[32 * j + l]);
    }
    scale[j] = std::max(hi - lo, 0.0f) / static_cast<float>(levels);
    min[j] = -lo;
    max_scale = std::max(max_scale, scale[j]);
    max_min = std::max(max_min, min[j]);
  }
  o.d = FloatToHalf(max_scale / 63.0f);
  o.dmin = FloatToHalf(max_min / 63.0f);
  const float d = HalfToFloat(o.d), dmin = HalfToFloat(o.dmin);
  int sc[8], m[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = d > 0.0f ? RoundClamp(scale[j] / d, 0, 63) : 0;
    m[j] = dmin > 0.0f ? RoundClamp(min[j] / dmin, 0, 63) : 0;
  }
  std::memset(o.scales, 0, sizeof(o.scales));
  for (int j = 0; j < 4; ++j) {
    o.scales[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    o.scales[j + 4] = static_cast<uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
    o.scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
  }
  for (int j = 0; j < 8; ++j) {
    const float ds = d * static_cast<float>(sc[j]);
    const float ms = dmin * static_cast<float>(m[j]);
    for (int l = 0; l < 32; ++l) {
      q[32 * j + l] = ds > 0.0f ? static_cast<uint8_t>(RoundClamp((xb[32 * j + l] + ms) / ds, 0, levels)) : 0;
    }
  }
}

}  // namespace

void QuantizeRowQ4_K(const float* x, int64_t n, BlockQ4_K* out) {
  uint8_t q[kQK_K];
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    BlockQ4_K& o = out[b];
    QuantizeScaledMin(x + b * kQK_K, 15, o, q);
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        o.qs[32 * c + l] = static_cast<uint8_t>(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
      }
    }
  }
}

void QuantizeRowQ5_K(const float* x, int64_t n, BlockQ5_K* out) {
  uint8_t q[kQK_K];
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    BlockQ5_K& o = out[b];
    QuantizeScaledMin(x + b * kQK_K, 31, o, q);
    std::memset(o.qh, 0, sizeof(o.qh));
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        const int lo = q[64 * c + l], hi = q[64 * c + 32 + l];
        o.qs[32 * c + l] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
        o.qh[l] = static_cast<uint8_t>(o.qh[l] | ((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
      }
    }
  }
}

void QuantizeRowQ6_K(const float* x, int64_t n, BlockQ6_K* out) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float* xb = x + b * kQK_K;
    BlockQ6_K& o = out[b];
    float scale[16];
    float max_scale = 0.0f;
    for (int g = 0; g < 16; ++g) {
      float amax = 0.0f;
      for (int l = 0; l < 16; ++l) amax = std::max(amax, std::fabs(xb[16 * g + l]));
      scale[g] = amax / 31.0f;
      max_scale = std::max(max_scale, scale[g]);
    }
    o.d = FloatToHalf(max_scale / 127.0f);
    const float d = HalfToFloat(o.d);
    int8_t q[kQK_K];
    for (int g = 0; g < 16; ++g) {
      o.scales[g] = static_cast<int8_t>(d > 0.0f ? RoundClamp(scale[g] / d, -128, 127) : 0);
      const float ds = d * static_cast<float>(o.scales[g]);
      for (int l = 0; l < 16; ++l) {
        q[16 * g + l] = static_cast<int8_t>(ds > 0.0f ? RoundClamp(xb[16 * g + l] / ds, -32, 31) : 0);
      }
    }
    for (int h = 0; h < 2; ++h) {
      uint8_t* ql = o.ql + 64 * h;
      uint8_t* qh = o.qh + 32 * h;
      const int8_t* v = q + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int q0 = v[l] + 32, q1 = v[l + 32] + 32, q2 = v[l + 64] + 32, q3 = v[l + 96] + 32;
        ql[l] = static_cast<uint8_t>((q0 & 0xF) | ((q2 & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((q1 & 0xF) | ((q3 & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((q0 >> 4) | ((q1 >> 4) << 2) | ((q2 >> 4) << 4) | ((q3 >> 4) << 6));
      }
    }
  }
}

}  // namespace bmad::kernels
