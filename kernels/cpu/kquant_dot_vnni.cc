// Integer products of Q4_K, Q5_K and Q6_K weights with Q8_K activations on AVX-512 VNNI (built with
// VNNI flags, called only after the runtime check in simd_kernels_avx512.cc).
//
// Each weight super-block is unpacked once per tile of activation rows: its 256 values become
// four vectors of 64 unsigned bytes in element order, and each sub-block's scale is spread over
// the int32 lanes its products land in. Each lane gets the sum of four products of one
// sub-block times its scale (IntegerLanes); added over the four vectors, that is DotQ4_KQ8_K's
// 16 integer lanes,
// which go into 16 float accumulators per activation row, reduced once at the end of the row.
// The order of every float step is the portable kernels' (kernels/k_quants.h): bit for bit the
// same result.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "common/half.h"
#include "kernels/cpu/simd_kernels_vnni.h"
#include "kernels/k_quants.h"

namespace bmad::kernels::cpu {
namespace {

// Activation rows per pass over a weight row: each super-block is unpacked once per tile.
constexpr int64_t kColumnTile = 8;

// LaneSum of k_quants.cc: lane i plus lane i + n/2, halving.
float LaneSum(__m512 v) {
  const __m256 h8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  const __m128 h4 = _mm_add_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
  const __m128 h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
  return _mm_cvtss_f32(_mm_add_ss(h2, _mm_movehdup_ps(h2)));
}
float LaneSum(__m256 v) {
  const __m128 h4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
  return _mm_cvtss_f32(_mm_add_ss(h2, _mm_movehdup_ps(h2)));
}

// Sum over the four 64-value vectors of (weight byte x activation byte) x the lane's scale:
// DotQ4_KQ8_K's 16 integer lanes. vpmaddubsw gives the sums of adjacent pairs as int16 (at most
// 2 x 63 x 127, no saturation), and vpdpwssd adds pairs of those times the scale (held twice in
// each int32 lane, as int16) to the lane: two instructions per vector, all exact.
__m512i IntegerLanes(const __m512i q[4], const __m512i scale[4], const int8_t* a) {
  __m512i acc = _mm512_setzero_si512();
  for (int z = 0; z < 4; ++z) {
    acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(q[z], _mm512_loadu_si512(a + 64 * z)), scale[z]);
  }
  return acc;
}

// weights[g] * bsums[g] + weights[g + 1] * bsums[g + 1] for even g: 8 int32 lanes.
__m256i PairedBsums(const ActivationBlockQ8_K& a, __m256i weights) {
  return _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums)), weights);
}

// Scales for vector z from 16 bytes of per-sub-block values: int32 lane i gets byte index[i],
// as two equal int16 halves (the form IntegerLanes multiplies by).
__m512i SpreadScales(__m128i bytes, __m128i index, bool is_signed) {
  const __m128i picked = _mm_shuffle_epi8(bytes, index);
  const __m512i v = is_signed ? _mm512_cvtepi8_epi32(picked) : _mm512_cvtepu8_epi32(picked);
  return _mm512_or_si512(_mm512_and_si512(v, _mm512_set1_epi32(0xFFFF)), _mm512_slli_epi32(v, 16));
}

// Per activation row of a tile: the 16 scale lanes and the 8 min (or offset) lanes.
struct Accumulators {
  __m512 lanes[kColumnTile];
  __m256 mins[kColumnTile];
};

// UnpackQ4_KScales in a register: bytes 0-7 the scales, 8-15 the mins. The 16 bytes loaded run
// 4 bytes past the 12 packed ones (into qs or qh, ignored), inside the block.
__m128i ScalesAndMins(const uint8_t* scales) {
  const __m128i w = _mm_loadu_si128(reinterpret_cast<const __m128i*>(scales));  // words w0 w1 w2 .
  const __m128i a = _mm_shuffle_epi32(w, _MM_SHUFFLE(2, 1, 2, 0));                // w0 w2 w1 w2
  const __m128i top = _mm_shuffle_epi32(w, _MM_SHUFFLE(1, 1, 0, 0));              // w0 w0 w1 w1
  const __m128i low = _mm_and_si128(_mm_srlv_epi32(a, _mm_setr_epi32(0, 0, 0, 4)),
                                    _mm_setr_epi32(0x3F3F3F3F, 0x0F0F0F0F, 0x3F3F3F3F, 0x0F0F0F0F));
  const __m128i high = _mm_and_si128(_mm_srli_epi32(top, 2), _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
  return _mm_or_si128(low, high);
}

// Q4_K and Q5_K (w = d * sc * q - dmin * m): Q5_K adds a fifth bit to each value from qh.
template <class Block>
struct UnpackedScaledMin {
  static constexpr bool kFifthBit = std::is_same_v<Block, BlockQ5_K>;
  __m512i q[4];      // vector z: elements 64z .. 64z + 63 (0..15, or 0..31 with the fifth bit)
  __m512i scale[4];  // int32 lanes 0-7: sub-block 2z's scale, 8-15: 2z + 1's (SpreadScales)
  __m256i mins;      // int16, for activation sum g: sub-block g / 2's min
  float d, dmin;

  explicit UnpackedScaledMin(const Block& b) {
    const __m256i low = _mm256_set1_epi8(0x0F);
    __m512i fifth;
    if constexpr (kFifthBit) {
      fifth = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh)));
    }
    for (int z = 0; z < 4; ++z) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * z));
      const __m256i lo = _mm256_and_si256(v, low);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
      q[z] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
      if constexpr (kFifthBit) {
        // qh byte l: bit 2z is element 64z + l's fifth bit, bit 2z + 1 element 64z + 32 + l's.
        const __m512i shift = _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(2 * z)),
                                                 _mm256_set1_epi16(static_cast<int16_t>(2 * z + 1)), 1);
        const __m512i bit = _mm512_and_si512(_mm512_srlv_epi16(fifth, shift), _mm512_set1_epi8(1));
        q[z] = _mm512_or_si512(q[z], _mm512_slli_epi16(bit, 4));
      }
    }
    const __m128i bytes = ScalesAndMins(b.scales);
    for (int z = 0; z < 4; ++z) {
      const char lo = static_cast<char>(2 * z), hi = static_cast<char>(2 * z + 1);
      scale[z] = SpreadScales(bytes, _mm_setr_epi8(lo, lo, lo, lo, lo, lo, lo, lo, hi, hi, hi, hi, hi, hi, hi, hi), false);
    }
    mins = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(bytes, _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15)));
    d = HalfToFloat(b.d);
    dmin = HalfToFloat(b.dmin);
  }

  void Step(const ActivationBlockQ8_K& a, __m512& lanes, __m256& min_lanes) const {
    lanes = _mm512_fmadd_ps(_mm512_set1_ps(a.d * d), _mm512_cvtepi32_ps(IntegerLanes(q, scale, a.q)), lanes);
    min_lanes = _mm256_fmadd_ps(_mm256_set1_ps(-(a.d * dmin)), _mm256_cvtepi32_ps(PairedBsums(a, mins)), min_lanes);
  }
};

struct UnpackedQ6_K {
  __m512i q[4];      // vector z: elements 64z .. 64z + 63 (0..63 each, the +32 offset kept)
  __m512i scale[4];  // int32 lanes 4g'..4g'+3: the scale of group 4z + g' (SpreadScales)
  __m256i scales16;  // the 16 group scales, int16
  float d;

  explicit UnpackedQ6_K(const BlockQ6_K& b) {
    const __m512i low = _mm512_set1_epi8(0x0F);
    const __m512i two_bits = _mm512_set1_epi8(0x03);
    // qh byte l holds the high bits of elements l, l + 32, l + 64, l + 96 of its half (bits
    // 0-1, 2-3, 4-5, 6-7); shifting 16-bit lanes by 0 or 2 (first vector) and 4 or 6 (second)
    // brings each to the bottom of its byte.
    const __m512i shift_first = _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(2), 1);
    const __m512i shift_second = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = _mm512_loadu_si512(b.ql + 64 * h);
      const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h)));
      const __m512i hi_first = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, shift_first), two_bits), 4);
      const __m512i hi_second = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, shift_second), two_bits), 4);
      q[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, low), hi_first);
      q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low), hi_second);
    }
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    for (int z = 0; z < 4; ++z) {
      const char g = static_cast<char>(4 * z);
      const char g1 = static_cast<char>(g + 1), g2 = static_cast<char>(g + 2), g3 = static_cast<char>(g + 3);
      scale[z] = SpreadScales(sc, _mm_setr_epi8(g, g, g, g, g1, g1, g1, g1, g2, g2, g2, g2, g3, g3, g3, g3), true);
    }
    scales16 = _mm256_cvtepi8_epi16(sc);
    d = HalfToFloat(b.d);
  }

  void Step(const ActivationBlockQ8_K& a, __m512& lanes, __m256& offset_lanes) const {
    const float ds = a.d * d;
    lanes = _mm512_fmadd_ps(_mm512_set1_ps(ds), _mm512_cvtepi32_ps(IntegerLanes(q, scale, a.q)), lanes);
    offset_lanes = _mm256_fmadd_ps(_mm256_set1_ps(-32.0f * ds), _mm256_cvtepi32_ps(PairedBsums(a, scales16)), offset_lanes);
  }
};

template <class Block, class Unpacked>
void DotRows(const uint8_t* w, size_t w_stride, int64_t rows, const ActivationBlockQ8_K* xq,
             int64_t cols, int64_t k, float* y, int64_t ldy) {
  const int64_t nb = k / kQK_K;
  Accumulators acc;
  for (int64_t r = 0; r < rows; ++r) {
    const auto* row = reinterpret_cast<const Block*>(w + static_cast<size_t>(r) * w_stride);
    for (int64_t c0 = 0; c0 < cols; c0 += kColumnTile) {
      const int64_t n = std::min(kColumnTile, cols - c0);
      for (int64_t i = 0; i < n; ++i) {
        acc.lanes[i] = _mm512_setzero_ps();
        acc.mins[i] = _mm256_setzero_ps();
      }
      for (int64_t b = 0; b < nb; ++b) {
        const Unpacked u(row[b]);
        for (int64_t i = 0; i < n; ++i) u.Step(xq[(c0 + i) * nb + b], acc.lanes[i], acc.mins[i]);
      }
      for (int64_t i = 0; i < n; ++i) y[(c0 + i) * ldy + r] = LaneSum(acc.lanes[i]) + LaneSum(acc.mins[i]);
    }
  }
}

}  // namespace

void KQuantDotRowsVnni(WeightType type, const uint8_t* w, size_t w_stride, int64_t rows,
                       const ActivationBlockQ8_K* xq, int64_t cols, int64_t k, float* y,
                       int64_t ldy) {
  if (type == WeightType::kQ4_K) {
    DotRows<BlockQ4_K, UnpackedScaledMin<BlockQ4_K>>(w, w_stride, rows, xq, cols, k, y, ldy);
  } else if (type == WeightType::kQ5_K) {
    DotRows<BlockQ5_K, UnpackedScaledMin<BlockQ5_K>>(w, w_stride, rows, xq, cols, k, y, ldy);
  } else {
    DotRows<BlockQ6_K, UnpackedQ6_K>(w, w_stride, rows, xq, cols, k, y, ldy);
  }
}

}  // namespace bmad::kernels::cpu
