// AVX-512 inner loops. This file is compiled with -mavx512f/bw/vl/dq -mf16c -mfma, so it must
// not define or instantiate inline functions shared with other files (the linker could keep
// this file's AVX-512 copy for everyone): it includes only intrinsics and fixed-width types and
// keeps everything in an anonymous namespace.
#include <cpuid.h>
#include <immintrin.h>

#include <cstring>

#include <cstdint>

#include "kernels/cpu/simd_kernels.h"
#include "kernels/cpu/simd_kernels_vnni.h"

namespace bmad::kernels::cpu {
namespace {

struct Q8Block {  // ggml block_q8_0 (see kernels/q8_0.h)
  uint16_t scale;
  int8_t q[32];
};
static_assert(sizeof(Q8Block) == 34, "Q8_0 block layout");

inline int64_t MinI64(int64_t a, int64_t b) { return a < b ? a : b; }

inline __mmask16 TailMask(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }

// Loads 16 consecutive weights starting at element i of a row, as F32.
struct LoadF32 {
  static __m512 Load(const uint8_t* row, int64_t i) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + i);
  }
  static __m512 LoadTail(const uint8_t* row, int64_t i, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + i);
  }
};
struct LoadF16 {
  static __m512 Load(const uint8_t* row, int64_t i) {
    return _mm512_cvtph_ps(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(row) + i)));
  }
  static __m512 LoadTail(const uint8_t* row, int64_t i, __mmask16 m) {
    return _mm512_cvtph_ps(
        _mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(row) + i));
  }
};
struct LoadBF16 {  // BF16 is the top half of an F32: widen to 32 bits, shift into place
  static __m512 Load(const uint8_t* row, int64_t i) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(row) + i));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static __m512 LoadTail(const uint8_t* row, int64_t i, __mmask16 m) {
    const __m256i h = _mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(row) + i);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
};
struct LoadQ8 {  // k is always a multiple of 32 for Q8_0, so there is no tail
  static __m512 Load(const uint8_t* row, int64_t i) {
    const Q8Block* b = reinterpret_cast<const Q8Block*>(row) + (i >> 5);
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->q + (i & 31)));
    const __m512 f = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q));
    return _mm512_mul_ps(f, _mm512_set1_ps(_cvtsh_ss(b->scale)));
  }
  static __m512 LoadTail(const uint8_t* row, int64_t i, __mmask16) { return Load(row, i); }
};

// RM weight rows x RN activation rows, dot products over k.
template <int RM, int RN, typename Loader>
inline void DotTile(const uint8_t* w, size_t w_stride, const float* x, int64_t ldx, int64_t k,
                    float* y, int64_t ldy) {
  __m512 acc[RM][RN];
  for (int r = 0; r < RM; ++r)
    for (int c = 0; c < RN; ++c) acc[r][c] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    __m512 wv[RM];
    for (int r = 0; r < RM; ++r) wv[r] = Loader::Load(w + r * w_stride, i);
    for (int c = 0; c < RN; ++c) {
      const __m512 xv = _mm512_loadu_ps(x + c * ldx + i);
      for (int r = 0; r < RM; ++r) acc[r][c] = _mm512_fmadd_ps(wv[r], xv, acc[r][c]);
    }
  }
  if (i < k) {
    const __mmask16 m = TailMask(k - i);
    __m512 wv[RM];
    for (int r = 0; r < RM; ++r) wv[r] = Loader::LoadTail(w + r * w_stride, i, m);
    for (int c = 0; c < RN; ++c) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, x + c * ldx + i);
      for (int r = 0; r < RM; ++r) acc[r][c] = _mm512_fmadd_ps(wv[r], xv, acc[r][c]);
    }
  }
  for (int r = 0; r < RM; ++r)
    for (int c = 0; c < RN; ++c) y[c * ldy + r] = _mm512_reduce_add_ps(acc[r][c]);
}

// Covers `cols` activation rows in chunks of up to RN for a block of RM weight rows.
template <int RM, typename Loader>
inline void DotRowBlock(const uint8_t* w, size_t w_stride, const float* x, int64_t ldx,
                        int64_t cols, int64_t k, float* y, int64_t ldy) {
  int64_t c = 0;
  for (; c + 4 <= cols; c += 4) DotTile<RM, 4, Loader>(w, w_stride, x + c * ldx, ldx, k, y + c * ldy, ldy);
  switch (cols - c) {
    case 3: DotTile<RM, 3, Loader>(w, w_stride, x + c * ldx, ldx, k, y + c * ldy, ldy); break;
    case 2: DotTile<RM, 2, Loader>(w, w_stride, x + c * ldx, ldx, k, y + c * ldy, ldy); break;
    case 1: DotTile<RM, 1, Loader>(w, w_stride, x + c * ldx, ldx, k, y + c * ldy, ldy); break;
    default: break;
  }
}

template <typename Loader>
void DotRowsTyped(const uint8_t* w, size_t w_stride, int64_t rows, const float* x, int64_t ldx,
                  int64_t cols, int64_t k, float* y, int64_t ldy) {
  int64_t r = 0;
  if (cols == 1) {
    // Matrix-vector: memory-bound, so stream 8 rows at once.
    for (; r + 8 <= rows; r += 8) DotTile<8, 1, Loader>(w + r * w_stride, w_stride, x, ldx, k, y + r, ldy);
  }
  for (; r + 4 <= rows; r += 4) DotRowBlock<4, Loader>(w + r * w_stride, w_stride, x, ldx, cols, k, y + r, ldy);
  for (; r < rows; ++r) DotRowBlock<1, Loader>(w + r * w_stride, w_stride, x, ldx, cols, k, y + r, ldy);
}

void DotRowsAvx512(WeightType type, const uint8_t* w, size_t w_stride, int64_t rows,
                   const float* x, int64_t ldx, int64_t cols, int64_t k, float* y, int64_t ldy) {
  switch (type) {
    case WeightType::kF32: DotRowsTyped<LoadF32>(w, w_stride, rows, x, ldx, cols, k, y, ldy); break;
    case WeightType::kF16: DotRowsTyped<LoadF16>(w, w_stride, rows, x, ldx, cols, k, y, ldy); break;
    case WeightType::kQ8_0: DotRowsTyped<LoadQ8>(w, w_stride, rows, x, ldx, cols, k, y, ldy); break;
    case WeightType::kBF16: DotRowsTyped<LoadBF16>(w, w_stride, rows, x, ldx, cols, k, y, ldy); break;
    case WeightType::kQ4_0:
    case WeightType::kQ5_0:
    case WeightType::kQ4_1:
    case WeightType::kQ5_1:
    case WeightType::kQ4_K:
    case WeightType::kQ5_K:
    case WeightType::kQ6_K:
      // Products with these take packed panels (the 32-weight types) or the integer path
      // (kquant_dot_rows); this float one is for tests.
      ScalarSimdKernels().dot_rows(type, w, w_stride, rows, x, ldx, cols, k, y, ldy);
      break;
  }
}

// ---- packed panels (see packed_weights.h) ----

// Loads input feature i of the 16 rows of one panel, as F32.
struct PanelF32 {
  static __m512 Load(const uint8_t* panel, int64_t i) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(panel) + i * 16);
  }
};
struct PanelF16 {
  static __m512 Load(const uint8_t* panel, int64_t i) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(panel) + i * 16)));
  }
};
struct PanelBF16 {
  static __m512 Load(const uint8_t* panel, int64_t i) {
    return LoadBF16::Load(panel, i * 16);
  }
};
struct PanelQ8Min {  // Q4_1 and Q5_1 panels (w = scale * q + min), the float path
  static constexpr int64_t kBlockBytes = 2 * 16 * 4 + 32 * 16;
  static __m512 Load(const uint8_t* panel, int64_t i) {
    const uint8_t* block = panel + (i >> 5) * kBlockBytes;
    const __m512 scale = _mm512_loadu_ps(reinterpret_cast<const float*>(block));
    const __m512 min = _mm512_loadu_ps(reinterpret_cast<const float*>(block + 64));
    // As PanelQ8 below, with the bytes after the mins.
    const __m512i group = _mm512_xor_si512(
        _mm512_loadu_si512(block + 128 + ((i & 31) >> 2) * 64), _mm512_set1_epi8(static_cast<char>(0x80)));
    const __m512i q = _mm512_srai_epi32(
        _mm512_sllv_epi32(group, _mm512_set1_epi32(static_cast<int>(24 - 8 * (i & 3)))), 24);
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(q), scale, min);
  }
};
struct PanelQ8 {  // the float path, for CPUs without VNNI (simd_kernels_vnni.cc is the fast one)
  static constexpr int64_t kBlockBytes = 16 * 4 + 32 * 16;
  static __m512 Load(const uint8_t* panel, int64_t i) {
    const uint8_t* block = panel + (i >> 5) * kBlockBytes;
    const __m512 scale = _mm512_loadu_ps(reinterpret_cast<const float*>(block));
    // Each 32-bit lane holds 4 consecutive inputs of one row as q + 128: flip the top bits to
    // get q, then move byte i % 4 to the top of the lane and shift it down with its sign.
    const __m512i group = _mm512_xor_si512(
        _mm512_loadu_si512(block + 64 + ((i & 31) >> 2) * 64), _mm512_set1_epi8(static_cast<char>(0x80)));
    const __m512i q = _mm512_srai_epi32(
        _mm512_sllv_epi32(group, _mm512_set1_epi32(static_cast<int>(24 - 8 * (i & 3)))), 24);
    return _mm512_mul_ps(_mm512_cvtepi32_ps(q), scale);
  }
};

// NP panels (16 NP outputs) x RN activation rows: one accumulator per (panel, row), each a
// single FMA chain over the inputs in order.
template <int NP, int RN, typename Loader>
inline void PanelTile(const uint8_t* panels, size_t stride, int64_t rows, const float* x,
                      int64_t ldx, int64_t k, float* y, int64_t ldy) {
  __m512 acc[NP][RN];
  for (int p = 0; p < NP; ++p)
    for (int c = 0; c < RN; ++c) acc[p][c] = _mm512_setzero_ps();
  for (int64_t i = 0; i < k; ++i) {
    __m512 w[NP];
    for (int p = 0; p < NP; ++p) w[p] = Loader::Load(panels + p * stride, i);
    for (int c = 0; c < RN; ++c) {
      const __m512 xb = _mm512_set1_ps(x[c * ldx + i]);
      for (int p = 0; p < NP; ++p) acc[p][c] = _mm512_fmadd_ps(w[p], xb, acc[p][c]);
    }
  }
  for (int p = 0; p < NP; ++p) {
    const int64_t valid = rows - p * 16;
    if (valid <= 0) break;
    const __mmask16 m = valid >= 16 ? static_cast<__mmask16>(0xffff) : TailMask(valid);
    for (int c = 0; c < RN; ++c) _mm512_mask_storeu_ps(y + c * ldy + p * 16, m, acc[p][c]);
  }
}

// All activation rows for NP panels: chunks of up to min(12, 24 / NP) rows.
template <int NP, typename Loader>
inline void PanelColumns(const uint8_t* panels, size_t stride, int64_t rows, const float* x,
                         int64_t ldx, int64_t cols, int64_t k, float* y, int64_t ldy) {
  constexpr int kChunk = 24 / NP < 12 ? 24 / NP : 12;
  int64_t c = 0;
  for (; c + kChunk <= cols; c += kChunk) {
    PanelTile<NP, kChunk, Loader>(panels, stride, rows, x + c * ldx, ldx, k, y + c * ldy, ldy);
  }
  const int64_t left = cols - c;
  x += c * ldx;
  y += c * ldy;
  switch (left) {
#define BMAD_PANEL_CASE(n) \
  case n: if constexpr (n < kChunk) PanelTile<NP, n, Loader>(panels, stride, rows, x, ldx, k, y, ldy); break;
    BMAD_PANEL_CASE(1) BMAD_PANEL_CASE(2) BMAD_PANEL_CASE(3) BMAD_PANEL_CASE(4)
    BMAD_PANEL_CASE(5) BMAD_PANEL_CASE(6) BMAD_PANEL_CASE(7) BMAD_PANEL_CASE(8)
    BMAD_PANEL_CASE(9) BMAD_PANEL_CASE(10) BMAD_PANEL_CASE(11)
#undef BMAD_PANEL_CASE
    default: break;
  }
}

template <typename Loader>
void PanelGemmTyped(const uint8_t* panels, size_t stride, int64_t rows, const float* x,
                    int64_t ldx, int64_t cols, int64_t k, float* y, int64_t ldy) {
  const int64_t n_panels = (rows + 15) / 16;
  // As many panels at once as keep NP x RN <= 24 accumulators: few activation rows get more
  // panels, so there are enough independent FMA chains and each converted weight vector feeds
  // more FMAs. Many rows go 8 at a time over 3 panels rather than 12 over 2: each FMA then
  // needs a third of a broadcast activation load instead of half, which is what limits the
  // loop (8-10% faster on Zen 4).
  const int64_t rn = cols < 12 ? cols : 12;
  const int np = rn == 1 ? 12 : (rn <= 3 ? 6 : (rn <= 6 ? 4 : 3));
  int64_t p = 0;
  for (; p + np <= n_panels; p += np) {
    const int64_t r = MinI64(rows - p * 16, np * 16);
    const uint8_t* base = panels + p * stride;
    float* yp = y + p * 16;
    switch (np) {
      case 12: PanelColumns<12, Loader>(base, stride, r, x, ldx, cols, k, yp, ldy); break;
      case 6: PanelColumns<6, Loader>(base, stride, r, x, ldx, cols, k, yp, ldy); break;
      case 4: PanelColumns<4, Loader>(base, stride, r, x, ldx, cols, k, yp, ldy); break;
      default: PanelColumns<3, Loader>(base, stride, r, x, ldx, cols, k, yp, ldy); break;
    }
  }
  for (; p < n_panels; ++p) {
    const int64_t r = MinI64(rows - p * 16, 16);
    PanelColumns<1, Loader>(panels + p * stride, stride, r, x, ldx, cols, k, y + p * 16, ldy);
  }
}

void PanelGemmAvx512(WeightType type, const uint8_t* panels, size_t stride, int64_t rows,
                     const float* x, int64_t ldx, int64_t cols, int64_t k, float* y, int64_t ldy) {
  switch (type) {
    case WeightType::kF32: PanelGemmTyped<PanelF32>(panels, stride, rows, x, ldx, cols, k, y, ldy); break;
    case WeightType::kF16: PanelGemmTyped<PanelF16>(panels, stride, rows, x, ldx, cols, k, y, ldy); break;
    case WeightType::kQ8_0: PanelGemmTyped<PanelQ8>(panels, stride, rows, x, ldx, cols, k, y, ldy); break;
    case WeightType::kBF16: PanelGemmTyped<PanelBF16>(panels, stride, rows, x, ldx, cols, k, y, ldy); break;
    case WeightType::kQ4_1:
    case WeightType::kQ5_1: PanelGemmTyped<PanelQ8Min>(panels, stride, rows, x, ldx, cols, k, y, ldy); break;
    case WeightType::kQ4_0:
    case WeightType::kQ5_0:  // packed as Q8_0 (PackedType)
    case WeightType::kQ4_K:
    case WeightType::kQ5_K:
    case WeightType::kQ6_K: break;  // never packed (PackWeights keeps them in rows)
  }
}

void DequantRowAvx512(WeightType type, const uint8_t* row, int64_t n, float* out) {
  int64_t i = 0;
  switch (type) {
    case WeightType::kF32:
      for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, LoadF32::Load(row, i));
      if (i < n) _mm512_mask_storeu_ps(out + i, TailMask(n - i), LoadF32::LoadTail(row, i, TailMask(n - i)));
      break;
    case WeightType::kF16:
      for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, LoadF16::Load(row, i));
      if (i < n) _mm512_mask_storeu_ps(out + i, TailMask(n - i), LoadF16::LoadTail(row, i, TailMask(n - i)));
      break;
    case WeightType::kQ8_0:
      for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, LoadQ8::Load(row, i));
      break;
    case WeightType::kBF16:
      for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, LoadBF16::Load(row, i));
      if (i < n) _mm512_mask_storeu_ps(out + i, TailMask(n - i), LoadBF16::LoadTail(row, i, TailMask(n - i)));
      break;
    case WeightType::kQ4_0:
    case WeightType::kQ5_0:
    case WeightType::kQ4_1:
    case WeightType::kQ5_1:
    case WeightType::kQ4_K:
    case WeightType::kQ5_K:
    case WeightType::kQ6_K:
      // Only embedding rows are dequantized (products take packed panels or kquant_dot_rows).
      ScalarSimdKernels().dequant_row(type, row, n, out);
      break;
  }
}

// RoundToBf16 (common/bfloat16.h), 16 values at a time: round to nearest even by adding
// 0x7fff plus the kept part's lowest bit, then clear the low half; NaNs keep their top half
// with the quiet bit set.
__m512 RoundBf16Vector(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
  const __m512i top = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  const __m512i quiet = _mm512_or_si512(_mm512_and_si512(u, top), _mm512_set1_epi32(0x00400000));
  return _mm512_castsi512_ps(_mm512_mask_blend_epi32(nan, _mm512_and_si512(rounded, top), quiet));
}

void RoundBf16Avx512(const float* x, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, RoundBf16Vector(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = TailMask(n - i);
    _mm512_mask_storeu_ps(out + i, m, RoundBf16Vector(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

// QuantizeActivationRowQ8_K, 16 values at a time (see simd_kernels.h).
void QuantizeQ8KRowsAvx512(const float* x, int64_t m, int64_t k, ActivationBlockQ8_K* out) {
  const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
  for (int64_t b = 0; b < m * k / kQK_K; ++b) {
    const float* xb = x + b * kQK_K;
    ActivationBlockQ8_K& o = out[b];
    // The largest magnitude (NaN skipped: max_ps returns its second operand when one is NaN),
    // then the first value of that magnitude, whose sign sets the scale's.
    __m512 amax_v = _mm512_setzero_ps();
    for (int j = 0; j < kQK_K; j += 16) amax_v = _mm512_max_ps(_mm512_and_ps(_mm512_loadu_ps(xb + j), abs_mask), amax_v);
    const float amax = _mm512_reduce_max_ps(amax_v);
    if (amax == 0.0f) {
      std::memset(&o, 0, sizeof(o));
      continue;
    }
    float max = 0.0f;
    for (int j = 0; j < kQK_K; j += 16) {
      const __m512 v = _mm512_loadu_ps(xb + j);
      const __mmask16 hit = _mm512_cmp_ps_mask(_mm512_and_ps(v, abs_mask), _mm512_set1_ps(amax), _CMP_EQ_OQ);
      if (hit != 0) {
        max = xb[j + __builtin_ctz(hit)];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m512 scale = _mm512_set1_ps(iscale);
    for (int j = 0; j < kQK_K; j += 16) {
      const __m512 r = _mm512_mul_ps(scale, _mm512_loadu_ps(xb + j));
      const __mmask16 ordered = _mm512_cmp_ps_mask(r, r, _CMP_ORD_Q);
      const __m512 clamped = _mm512_min_ps(_mm512_max_ps(r, _mm512_set1_ps(-127.0f)), _mm512_set1_ps(127.0f));
      const __m512i q = _mm512_maskz_cvtps_epi32(ordered, _mm512_roundscale_ps(clamped, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(o.q + j), _mm512_cvtsepi32_epi8(q));
      o.bsums[j / 16] = static_cast<int16_t>(_mm512_reduce_add_epi32(q));
    }
    o.d = 1.0f / iscale;
  }
}

void RoundHalfAvx512(const float* x, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm512_storeu_ps(out + i, _mm512_cvtph_ps(h));
  }
  if (i < n) {
    const __mmask16 m = TailMask(n - i);
    const __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm512_mask_storeu_ps(out + i, m, _mm512_cvtph_ps(h));
  }
}

void FloatToHalfAvx512(const float* in, int64_t n, uint16_t* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
  }
  if (i < n) {
    const __mmask16 m = TailMask(n - i);
    _mm256_mask_storeu_epi16(out + i, m,
                             _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, in + i), _MM_FROUND_TO_NEAREST_INT));
  }
}

float DotAvx512(const float* a, const float* b, int64_t n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : TailMask(n - i);
    acc0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

// exp(x) for x <= 0 (scores minus their max): x = n ln2 + r, |r| <= ln2 / 2, and
// exp(r) by Cephes' expf polynomial (about 1 ulp); 2^n by scalef. Below -87 (where exp
// underflows) the result stays a tiny positive number instead of 0. NaN stays NaN.
inline __m512 ExpNonPositive(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-87.0f), x);  // max_ps returns x when x is NaN
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

// exp(x) in double: x = n ln2 + r with |r| <= ln2 / 2 (ln2 in two parts, so n ln2 is exact
// enough), exp(r) by its Taylor series to r^11 / 11! (relative error below 1e-14), 2^n by
// scalef. Arguments are clamped to +-1000 first, where the result is already 0 or infinite in
// float; NaN stays NaN (max and min return their second operand when either is NaN).
inline __m512d ExpDouble(__m512d x) {
  x = _mm512_min_pd(_mm512_set1_pd(1000.0), _mm512_max_pd(_mm512_set1_pd(-1000.0), x));
  const __m512d n = _mm512_roundscale_pd(_mm512_mul_pd(x, _mm512_set1_pd(1.4426950408889634)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512d r = _mm512_fnmadd_pd(n, _mm512_set1_pd(0.6931471803691238), x);
  r = _mm512_fnmadd_pd(n, _mm512_set1_pd(1.9082149292705877e-10), r);
  constexpr double kInverseFactorials[] = {1.0 / 3628800, 1.0 / 362880, 1.0 / 40320,
                                           1.0 / 5040,    1.0 / 720,    1.0 / 120,
                                           1.0 / 24,      1.0 / 6,      1.0 / 2,
                                           1.0,           1.0};
  __m512d p = _mm512_set1_pd(1.0 / 39916800);
  for (double c : kInverseFactorials) p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(c));
  return _mm512_scalef_pd(p, n);
}

// exp of 16 floats, each rounded once from ExpDouble's result.
inline __m512 ExpFloat(__m512 x) {
  const __m256 lo = _mm512_castps512_ps256(x);
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1));
  const __m256 e_lo = _mm512_cvtpd_ps(ExpDouble(_mm512_cvtps_pd(lo)));
  const __m256 e_hi = _mm512_cvtpd_ps(ExpDouble(_mm512_cvtps_pd(hi)));
  return _mm512_insertf32x8(_mm512_castps256_ps512(e_lo), e_hi, 1);
}

void SwiGluAvx512(const float* gate, const float* up, int64_t n, float* out) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : TailMask(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 e = ExpFloat(_mm512_sub_ps(_mm512_setzero_ps(), g));
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, e));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(m, up + i)));
  }
}

// 16 elements (masked) of a K or V row (F16), as F32.
inline __m512 LoadKv(const uint16_t* p, __mmask16 m) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

// Sums of 8 vectors at once: lane t of the result is the sum of the lanes of token t's vector,
// added in the order _mm512_reduce_add_ps adds them (upper half to lower, then 4, 2, 1 apart).
// The adds pair two vectors per shuffle, so 8 sums cost 8 adds instead of 8 horizontal
// reductions. `part[s]` holds token kTokenOfSlot[s]; the last permute puts token t in lane t.
constexpr int kTokenOfSlot[8] = {0, 2, 4, 6, 1, 3, 5, 7};
inline __m512 SumLanes8(const __m512 part[8]) {
  __m512 half[4];  // 8 partial sums of two vectors each
  for (int i = 0; i < 4; ++i) {
    half[i] = _mm512_add_ps(_mm512_shuffle_f32x4(part[2 * i], part[2 * i + 1], 0x44),
                            _mm512_shuffle_f32x4(part[2 * i], part[2 * i + 1], 0xEE));
  }
  __m512 quarter[2];  // 4 partial sums of four vectors each
  for (int i = 0; i < 2; ++i) {
    quarter[i] = _mm512_add_ps(_mm512_shuffle_f32x4(half[2 * i], half[2 * i + 1], 0x88),
                               _mm512_shuffle_f32x4(half[2 * i], half[2 * i + 1], 0xDD));
  }
  const __m512 pairs = _mm512_add_ps(_mm512_shuffle_ps(quarter[0], quarter[1], 0x44),
                                     _mm512_shuffle_ps(quarter[0], quarter[1], 0xEE));
  const __m512 sums = _mm512_add_ps(_mm512_shuffle_ps(pairs, pairs, 0x88),
                                    _mm512_shuffle_ps(pairs, pairs, 0xDD));
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 1, 4, 5, 8, 9, 12, 13, 0, 0, 0, 0, 0, 0, 0, 0),
                               sums);
}

// dot(q, k_t) * scale for tokens [0, count) of `k` (count <= 8) in lanes 0..count-1.
template <int NC>
inline __m512 ScoreTokens8(const __m512 (&qv)[NC], const __mmask16 (&mask)[NC], const uint16_t* k,
                           int64_t count, int64_t hd, float scale) {
  __m512 part[8];
  for (int s = 0; s < 8; ++s) {
    const int t = kTokenOfSlot[s];
    part[s] = _mm512_setzero_ps();
    if (t >= count) continue;
    for (int c = 0; c < NC; ++c) {
      part[s] = _mm512_fmadd_ps(qv[c], LoadKv(k + t * hd + c * 16, mask[c]), part[s]);
    }
  }
  return _mm512_mul_ps(SumLanes8(part), _mm512_set1_ps(scale));
}

// Asks for `bytes` of block blocks[b] of `base` (nothing past the last block) in L2. The
// prefetch is an asm statement: GCC 12 deletes calls to a function that does nothing but
// __builtin_prefetch, which its IPA passes deem free of side effects.
inline void PrefetchBlock(const uint16_t* base, const int32_t* blocks, int64_t b,
                          int64_t n_blocks, int64_t block_stride, int64_t bytes) {
  if (b < 0 || b >= n_blocks) return;
  const char* p = reinterpret_cast<const char*>(base + blocks[b] * block_stride);
  for (int64_t byte = 0; byte < bytes; byte += 64) asm volatile("prefetcht1 %0" : : "m"(p[byte]));
}

// Part `part` of `parts` of what PrefetchBlock asks for. A block's prefetches go out a part per
// query head, between the heads' arithmetic. A burst of all of a block's lines at once (192 at
// 12 heads of 64 dims and 8 tokens; likely more than the core's miss queue holds) hid almost
// none of the memory's latency: decode read the cache at about half the rate it does with the
// requests spread (bmad-attention-bench, 16 sequences of 192 tokens, one thread of Zen 4: 11
// against 21 GB/s; two threads: 20 against 28).
inline void PrefetchBlockPart(const uint16_t* base, const int32_t* blocks, int64_t b,
                              int64_t n_blocks, int64_t block_stride, int64_t bytes, int64_t part,
                              int64_t parts) {
  if (b < 0 || b >= n_blocks) return;
  const char* p = reinterpret_cast<const char*>(base + blocks[b] * block_stride);
  const int64_t lines = (bytes + 63) / 64;
  for (int64_t l = lines * part / parts; l < lines * (part + 1) / parts; ++l) {
    asm volatile("prefetcht1 %0" : : "m"(p[l * 64]));
  }
}

// One span's weights for one query, merged into its running softmax: p = exp(s - max) in place,
// with max the largest score so far; when that rises, the sum so far and the query's
// accumulated values `o` are scaled down to the new max. Max and sum are taken 16 lanes at a
// time from the span's first token.
template <int NC>
inline void SpanWeights(float* s, int64_t n, const __mmask16 (&mask)[NC], float* run_max,
                        float* run_sum, float* o) {
  __m512 vmax = _mm512_set1_ps(-__builtin_inff());
  for (int64_t t = 0; t < n; t += 16) {
    const __mmask16 m = n - t >= 16 ? static_cast<__mmask16>(0xffff) : TailMask(n - t);
    vmax = _mm512_mask_max_ps(vmax, m, vmax, _mm512_maskz_loadu_ps(m, s + t));
  }
  const float span_max = _mm512_reduce_max_ps(vmax);
  const float new_max = *run_max > span_max ? *run_max : span_max;
  if (*run_max != -__builtin_inff() && *run_max != new_max) {
    const float correction = _mm512_cvtss_f32(ExpNonPositive(_mm512_set1_ps(*run_max - new_max)));
    *run_sum *= correction;
    for (int c = 0; c < NC; ++c) {
      _mm512_mask_storeu_ps(o + c * 16, mask[c],
                            _mm512_mul_ps(_mm512_maskz_loadu_ps(mask[c], o + c * 16),
                                          _mm512_set1_ps(correction)));
    }
  }
  const __m512 max = _mm512_set1_ps(new_max);
  __m512 vsum = _mm512_setzero_ps();
  for (int64_t t = 0; t < n; t += 16) {
    const __mmask16 m = n - t >= 16 ? static_cast<__mmask16>(0xffff) : TailMask(n - t);
    const __m512 p =
        _mm512_maskz_mov_ps(m, ExpNonPositive(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + t), max)));
    vsum = _mm512_add_ps(vsum, p);
    _mm512_mask_storeu_ps(s + t, m, p);
  }
  *run_sum += _mm512_reduce_add_ps(vsum);
  *run_max = new_max;
}

// The KV head of query j (no division without GQA).
inline int64_t HeadOf(int64_t j, int64_t group) { return group == 1 ? j : j / group; }

// AttendRowsF16Fn for heads of NC * 16 or fewer dims. Both passes of a span walk its blocks in
// order, each block's heads front to back (every row and query head of the task use a block
// while it is in L1), and ask for the blocks a few ahead, since a sequence's blocks are anywhere
// in the pool. Every (row, query head) pair does the same operations in the same order whatever
// the other pairs are, which is what makes a token's result independent of its task.
template <int NC>
void AttendRowsVec(const float* q, int64_t row_stride, int64_t n_rows, int64_t first_n,
                   int64_t n_kv, int64_t group, const uint16_t* k, const uint16_t* v,
                   const int32_t* blocks, int64_t block_stride, int64_t block_size, int64_t hd,
                   float scale, int64_t span_tokens, float* scratch, float* out) {
  constexpr int64_t kBlocksAhead = 2;
  __mmask16 mask[NC];
  for (int c = 0; c < NC; ++c) {
    const int64_t left = hd - c * 16;
    mask[c] = left >= 16 ? static_cast<__mmask16>(0xffff) : TailMask(left);
  }
  const int64_t n_q = n_kv * group;
  const int64_t head_stride = block_size * hd;  // elements between a block's heads
  const int64_t last_n = first_n + n_rows - 1;
  const int64_t stride = AttendRowsScoreStride(span_tokens);
  float* const scores = scratch;  // [row][query][span token]
  float* const run_max = scores + n_rows * n_q * stride;
  float* const run_sum = run_max + n_rows * n_q;
  const int64_t n_blocks = (last_n + block_size - 1) / block_size;
  const int64_t fetch_bytes = n_kv * head_stride * static_cast<int64_t>(sizeof(uint16_t));
  for (int64_t i = 0; i < n_rows * n_q; ++i) {
    run_max[i] = -__builtin_inff();
    run_sum[i] = 0.0f;
  }
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t j = 0; j < n_q; ++j) {
      float* o = out + r * row_stride + j * hd;
      for (int c = 0; c < NC; ++c) _mm512_mask_storeu_ps(o + c * 16, mask[c], _mm512_setzero_ps());
    }
  }
  for (int64_t b = 0; b < kBlocksAhead; ++b) {
    PrefetchBlock(k, blocks, b, n_blocks, block_stride, fetch_bytes);
  }

  for (int64_t c0 = 0; c0 < last_n; c0 += span_tokens) {
    const int64_t c1 = MinI64(c0 + span_tokens, last_n);
    const int64_t b0 = c0 / block_size, b1 = (c1 + block_size - 1) / block_size;
    // Pass 1: the span's scores, eight tokens at a time.
    for (int64_t b = b0; b < b1; ++b) {
      bool first_row = true;  // which issues the block's prefetches, a part per query head
      for (int64_t r = 0; r < n_rows; ++r) {
        const int64_t count = MinI64(block_size, first_n + r - b * block_size);
        if (count <= 0) continue;  // causal: this row ends before the block
        for (int64_t j = 0; j < n_q; ++j) {
          if (first_row) {
            PrefetchBlockPart(k, blocks, b + kBlocksAhead, b1, block_stride, fetch_bytes, j, n_q);
            // The span's first value blocks, as its keys run out.
            if (b + kBlocksAhead >= b1) {
              PrefetchBlockPart(v, blocks, b0 + b + kBlocksAhead - b1, b1, block_stride,
                                fetch_bytes, j, n_q);
            }
          }
          const uint16_t* kb = k + blocks[b] * block_stride + HeadOf(j, group) * head_stride;
          const float* qj = q + r * row_stride + j * hd;
          __m512 qv[NC];
          for (int c = 0; c < NC; ++c) qv[c] = _mm512_maskz_loadu_ps(mask[c], qj + c * 16);
          float* s = scores + (r * n_q + j) * stride + (b * block_size - c0);
          for (int64_t t0 = 0; t0 < count; t0 += 8) {
            const int64_t chunk = MinI64(8, count - t0);
            _mm512_mask_storeu_ps(s + t0, TailMask(chunk),
                                  ScoreTokens8<NC>(qv, mask, kb + t0 * hd, chunk, hd, scale));
          }
        }
        first_row = false;
      }
    }
    // Pass 2: each query's weights for the span.
    for (int64_t r = 0; r < n_rows; ++r) {
      const int64_t len = MinI64(first_n + r, c1) - c0;
      if (len <= 0) continue;
      for (int64_t j = 0; j < n_q; ++j) {
        const int64_t i = r * n_q + j;
        SpanWeights<NC>(scores + i * stride, len, mask, &run_max[i], &run_sum[i],
                        out + r * row_stride + j * hd);
      }
    }
    // Pass 3: the weighted values, added into `out` block by block; two accumulators (even and
    // odd tokens) halve the chain of dependent FMAs.
    for (int64_t b = b0; b < b1; ++b) {
      bool first_row = true;
      for (int64_t r = 0; r < n_rows; ++r) {
        const int64_t count = MinI64(block_size, first_n + r - b * block_size);
        if (count <= 0) continue;
        for (int64_t j = 0; j < n_q; ++j) {
          if (first_row) {
            PrefetchBlockPart(v, blocks, b + kBlocksAhead, b1, block_stride, fetch_bytes, j, n_q);
            if (b + kBlocksAhead >= b1) {  // the next span's first key blocks
              PrefetchBlockPart(k, blocks, b + kBlocksAhead, n_blocks, block_stride, fetch_bytes,
                                j, n_q);
            }
          }
          const uint16_t* vb = v + blocks[b] * block_stride + HeadOf(j, group) * head_stride;
          const float* w = scores + (r * n_q + j) * stride + (b * block_size - c0);
          float* o = out + r * row_stride + j * hd;
          __m512 even[NC], odd[NC];
          for (int c = 0; c < NC; ++c) {
            even[c] = _mm512_maskz_loadu_ps(mask[c], o + c * 16);
            odd[c] = _mm512_setzero_ps();
          }
          int64_t t = 0;
          for (; t + 2 <= count; t += 2) {
            const __m512 w0 = _mm512_set1_ps(w[t]);
            const __m512 w1 = _mm512_set1_ps(w[t + 1]);
            for (int c = 0; c < NC; ++c) {
              even[c] = _mm512_fmadd_ps(w0, LoadKv(vb + t * hd + c * 16, mask[c]), even[c]);
              odd[c] = _mm512_fmadd_ps(w1, LoadKv(vb + (t + 1) * hd + c * 16, mask[c]), odd[c]);
            }
          }
          if (t < count) {
            const __m512 w0 = _mm512_set1_ps(w[t]);
            for (int c = 0; c < NC; ++c) {
              even[c] = _mm512_fmadd_ps(w0, LoadKv(vb + t * hd + c * 16, mask[c]), even[c]);
            }
          }
          for (int c = 0; c < NC; ++c) {
            _mm512_mask_storeu_ps(o + c * 16, mask[c], _mm512_add_ps(even[c], odd[c]));
          }
        }
        first_row = false;
      }
    }
  }
  // Divide by the sums.
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t j = 0; j < n_q; ++j) {
      float* o = out + r * row_stride + j * hd;
      const __m512 sum = _mm512_set1_ps(run_sum[r * n_q + j]);
      for (int c = 0; c < NC; ++c) {
        _mm512_mask_storeu_ps(o + c * 16, mask[c],
                              _mm512_div_ps(_mm512_maskz_loadu_ps(mask[c], o + c * 16), sum));
      }
    }
  }
}

void AttendRowsAvx512(const float* q, int64_t row_stride, int64_t n_rows, int64_t first_n,
                      int64_t n_kv, int64_t group, const uint16_t* k, const uint16_t* v,
                      const int32_t* blocks, int64_t block_stride, int64_t block_size, int64_t hd,
                      float scale, int64_t span_tokens, float* scratch, float* out) {
  switch ((hd + 15) / 16) {
#define BMAD_ROWS_CASE(nc)                                                                     \
  case nc:                                                                                     \
    AttendRowsVec<nc>(q, row_stride, n_rows, first_n, n_kv, group, k, v, blocks, block_stride, \
                      block_size, hd, scale, span_tokens, scratch, out);                       \
    return;
    BMAD_ROWS_CASE(1) BMAD_ROWS_CASE(2) BMAD_ROWS_CASE(3) BMAD_ROWS_CASE(4)
    BMAD_ROWS_CASE(5) BMAD_ROWS_CASE(6) BMAD_ROWS_CASE(7) BMAD_ROWS_CASE(8)
#undef BMAD_ROWS_CASE
    default:
      // Heads wider than 128 dims (none in the Llama family) take the portable loops.
      ScalarSimdKernels().attend_rows_f16(q, row_stride, n_rows, first_n, n_kv, group, k, v,
                                          blocks, block_stride, block_size, hd, scale,
                                          span_tokens, scratch, out);
  }
}

const SimdKernels kAvx512Kernels{"avx512",        DotRowsAvx512,     PanelGemmAvx512,
                                 DequantRowAvx512,
                                 RoundHalfAvx512, FloatToHalfAvx512,
                                 DotAvx512,       AttendRowsAvx512,
                                 SwiGluAvx512,    nullptr,
                                 nullptr,         KQuantDotRowsScalar,
                                 QuantizeQ8KRowsAvx512, RoundBf16Avx512};
const SimdKernels kAvx512VnniKernels{"avx512-vnni",   DotRowsAvx512,     PanelGemmAvx512,
                                     DequantRowAvx512,
                                     RoundHalfAvx512, FloatToHalfAvx512,
                                     DotAvx512,       AttendRowsAvx512,  SwiGluAvx512,
                                     QuantizeQ8RowsVnni,
                                     PanelGemmQ8Vnni,     KQuantDotRowsVnni,
                                     QuantizeQ8KRowsAvx512, RoundBf16Avx512};

}  // namespace

static bool HasF16c() {
  // clang 14's __builtin_cpu_supports does not know "f16c": ask CPUID leaf 1 (ECX bit 29).
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
}

const SimdKernels* Avx512SimdKernels(bool allow_vnni) {
  __builtin_cpu_init();
  const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                  __builtin_cpu_supports("fma") && HasF16c();
  if (!ok) return nullptr;
  return allow_vnni && __builtin_cpu_supports("avx512vnni") ? &kAvx512VnniKernels : &kAvx512Kernels;
}

}  // namespace bmad::kernels::cpu
