// Q8_0 weights times Q8_0 activations with AVX-512 VNNI. Compiled with -mavx512vnni (and the
// AVX-512 flags); like simd_kernels_avx512.cc it defines nothing inline outside an anonymous
// namespace, so no AVX-512 copy of a shared inline function can leak to other files.
//
// Per 32-input block, for 16 weight rows (one panel) and one activation row:
//   acc_int = offset + sum over 8 groups of vpdpbusd(weight bytes q_w + 128, 4 activation bytes)
//           = sum q_w * q_x                      (exact: offset = -128 * sum q_x)
//   acc    += float(acc_int) * (scale_w * scale_x)   (one FMA; the scale product is exact, as
//                                                     both scales are F16 values)
// Q4_1 and Q5_1 panels (w = scale_w * q + min_w, q unsigned) then add the min's share:
//   acc    += min_w * (scale_x * sum q_x)            (one FMA; the product in brackets is exact:
//                                                     11 bits times at most 12)
// Blocks are taken in order, so each output is the same whatever else is in the batch.
#include "kernels/cpu/simd_kernels_vnni.h"

#include <immintrin.h>

#include <cstring>

namespace bmad::kernels::cpu {
namespace {

// packed_weights.h: scales, then 8 x 64 bytes; with mins, scales, mins, then 8 x 64 bytes.
template <bool kMins>
constexpr int64_t kHeaderBytes = kMins ? 2 * 16 * 4 : 16 * 4;
template <bool kMins>
constexpr int64_t kBlockBytes = kHeaderBytes<kMins> + 32 * 16;

inline int64_t MinI64(int64_t a, int64_t b) { return a < b ? a : b; }

// One activation row's record (simd_kernels.h, Q8ActivationRowBytes).
struct Q8Row {
  const float* scale;
  const int32_t* offset;
  const int8_t* q;
};

inline Q8Row RowAt(const uint8_t* xq, int64_t nb, int64_t c) {
  const uint8_t* base = xq + static_cast<size_t>(c * nb * 40);
  return {reinterpret_cast<const float*>(base), reinterpret_cast<const int32_t*>(base + nb * 4),
          reinterpret_cast<const int8_t*>(base + nb * 8)};
}

inline int32_t Load4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// NP panels (16 NP outputs) x RN activation rows.
template <bool kMins, int NP, int RN>
inline void Q8Tile(const uint8_t* panels, size_t stride, int64_t rows, const uint8_t* xq,
                   int64_t c0, int64_t nb, float* y, int64_t ldy) {
  Q8Row x[RN];
  for (int c = 0; c < RN; ++c) x[c] = RowAt(xq, nb, c0 + c);
  __m512 acc[NP][RN];
  for (int p = 0; p < NP; ++p)
    for (int c = 0; c < RN; ++c) acc[p][c] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m512i sum[NP][RN];
    for (int c = 0; c < RN; ++c) {
      const __m512i offset = _mm512_set1_epi32(x[c].offset[b]);
      for (int p = 0; p < NP; ++p) sum[p][c] = offset;
    }
    const uint8_t* block[NP];
    for (int p = 0; p < NP; ++p) block[p] = panels + p * stride + b * kBlockBytes<kMins>;
    for (int g = 0; g < 8; ++g) {
      __m512i w[NP];
      for (int p = 0; p < NP; ++p) w[p] = _mm512_loadu_si512(block[p] + kHeaderBytes<kMins> + g * 64);
      for (int c = 0; c < RN; ++c) {
        const __m512i xb = _mm512_set1_epi32(Load4(x[c].q + b * 32 + g * 4));
        for (int p = 0; p < NP; ++p) sum[p][c] = _mm512_dpbusd_epi32(sum[p][c], w[p], xb);
      }
    }
    // With mins: each activation row's block sum, once for all NP panels.
    __m512 sum_x[kMins ? RN : 1];
    if constexpr (kMins) {
      for (int c = 0; c < RN; ++c) {
        sum_x[c] = _mm512_set1_ps(x[c].scale[b] * static_cast<float>(x[c].offset[b] / -128));
      }
    }
    for (int p = 0; p < NP; ++p) {
      const __m512 scale_w = _mm512_loadu_ps(reinterpret_cast<const float*>(block[p]));
      for (int c = 0; c < RN; ++c) {
        const __m512 scale = _mm512_mul_ps(scale_w, _mm512_set1_ps(x[c].scale[b]));
        acc[p][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[p][c]), scale, acc[p][c]);
      }
      if constexpr (kMins) {
        const __m512 min_w = _mm512_loadu_ps(reinterpret_cast<const float*>(block[p] + 64));
        for (int c = 0; c < RN; ++c) acc[p][c] = _mm512_fmadd_ps(min_w, sum_x[c], acc[p][c]);
      }
    }
  }
  for (int p = 0; p < NP; ++p) {
    const int64_t valid = rows - p * 16;
    if (valid <= 0) break;
    const __mmask16 m =
        valid >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << valid) - 1u);
    for (int c = 0; c < RN; ++c) _mm512_mask_storeu_ps(y + c * ldy + p * 16, m, acc[p][c]);
  }
}

// Every activation row for NP panels, in chunks of 12 / NP rows (24 accumulators at most:
// NP x RN float sums and as many integer ones, plus NP weight vectors).
template <bool kMins, int NP>
inline void Q8Columns(const uint8_t* panels, size_t stride, int64_t rows, const uint8_t* xq,
                      int64_t cols, int64_t nb, float* y, int64_t ldy) {
  constexpr int kChunk = 12 / NP;
  int64_t c = 0;
  for (; c + kChunk <= cols; c += kChunk) {
    Q8Tile<kMins, NP, kChunk>(panels, stride, rows, xq, c, nb, y + c * ldy, ldy);
  }
  switch (cols - c) {
#define BMAD_Q8_CASE(n) \
  case n: if constexpr (n < kChunk) Q8Tile<kMins, NP, n>(panels, stride, rows, xq, c, nb, y + c * ldy, ldy); break;
    BMAD_Q8_CASE(1) BMAD_Q8_CASE(2) BMAD_Q8_CASE(3) BMAD_Q8_CASE(4) BMAD_Q8_CASE(5)
    BMAD_Q8_CASE(6) BMAD_Q8_CASE(7) BMAD_Q8_CASE(8) BMAD_Q8_CASE(9) BMAD_Q8_CASE(10)
    BMAD_Q8_CASE(11)
#undef BMAD_Q8_CASE
    default: break;
  }
}

// x * 127 / max rounded to nearest even (as std::nearbyint in kernels/q8_0.h), clamped to
// [-127, 127], NaN to 0: what QuantizeActivationBlockQ8_0 does for every input.
inline __m512i RoundToQ(__m512 r) {
  const __mmask16 is_number = _mm512_cmp_ps_mask(r, r, _CMP_ORD_Q);
  // Constants first: min/max return the second operand on NaN, so NaN stays NaN until masked.
  r = _mm512_min_ps(_mm512_set1_ps(127.0f), _mm512_max_ps(_mm512_set1_ps(-127.0f), r));
  return _mm512_maskz_cvt_roundps_epi32(is_number, r, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

}  // namespace

void QuantizeQ8RowsVnni(const float* x, int64_t m, int64_t k, uint8_t* out) {
  const int64_t nb = k / 32;
  const __m512 sign_off = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  for (int64_t r = 0; r < m; ++r) {
    const float* xr = x + r * k;
    uint8_t* base = out + static_cast<size_t>(r * nb * 40);
    auto* scale = reinterpret_cast<float*>(base);
    auto* offset = reinterpret_cast<int32_t*>(base + nb * 4);
    int8_t* q = reinterpret_cast<int8_t*>(base + nb * 8);
    for (int64_t b = 0; b < nb; ++b) {
      const __m512 v0 = _mm512_loadu_ps(xr + b * 32);
      const __m512 v1 = _mm512_loadu_ps(xr + b * 32 + 16);
      // max_ps returns its second operand when either is NaN: with the running max second, NaN
      // inputs are skipped, as std::fmax does in kernels/q8_0.h.
      const __m512 abs_max = _mm512_max_ps(_mm512_and_ps(v1, sign_off),
                                           _mm512_max_ps(_mm512_and_ps(v0, sign_off), _mm512_setzero_ps()));
      const float amax = _mm512_reduce_max_ps(abs_max);
      const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
      scale[b] = _cvtsh_ss(_cvtss_sh(amax / 127.0f, _MM_FROUND_TO_NEAREST_INT));
      const __m512i q0 = RoundToQ(_mm512_mul_ps(v0, _mm512_set1_ps(id)));
      const __m512i q1 = RoundToQ(_mm512_mul_ps(v1, _mm512_set1_ps(id)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * 32), _mm512_cvtepi32_epi8(q0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * 32 + 16), _mm512_cvtepi32_epi8(q1));
      offset[b] = -128 * _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
    }
  }
}

namespace {

template <bool kMins>
void PanelGemmQ8Typed(const uint8_t* panels, size_t stride, int64_t rows, const uint8_t* xq,
                      int64_t cols, int64_t k, float* y, int64_t ldy) {
  const int64_t nb = k / 32;
  const int64_t n_panels = (rows + 15) / 16;
  // Few activation rows: more panels at once, so each broadcast activation word feeds more
  // vpdpbusd and there are enough independent sums.
  const int np = cols == 1 ? 6 : (cols <= 3 ? 4 : 3);
  int64_t p = 0;
  for (; p + np <= n_panels; p += np) {
    const int64_t r = MinI64(rows - p * 16, np * 16);
    const uint8_t* base = panels + p * stride;
    float* yp = y + p * 16;
    switch (np) {
      case 6: Q8Columns<kMins, 6>(base, stride, r, xq, cols, nb, yp, ldy); break;
      case 4: Q8Columns<kMins, 4>(base, stride, r, xq, cols, nb, yp, ldy); break;
      default: Q8Columns<kMins, 3>(base, stride, r, xq, cols, nb, yp, ldy); break;
    }
  }
  for (; p < n_panels; ++p) {
    const int64_t r = MinI64(rows - p * 16, 16);
    Q8Columns<kMins, 1>(panels + p * stride, stride, r, xq, cols, nb, y + p * 16, ldy);
  }
}

}  // namespace

void PanelGemmQ8Vnni(WeightType type, const uint8_t* panels, size_t stride, int64_t rows,
                     const uint8_t* xq, int64_t cols, int64_t k, float* y, int64_t ldy) {
  // (Not HasBlockMins: this file must not instantiate inline functions other files share.)
  if (type == WeightType::kQ4_1 || type == WeightType::kQ5_1) {
    PanelGemmQ8Typed<true>(panels, stride, rows, xq, cols, k, y, ldy);
  } else {
    PanelGemmQ8Typed<false>(panels, stride, rows, xq, cols, k, y, ldy);
  }
}

}  // namespace bmad::kernels::cpu
