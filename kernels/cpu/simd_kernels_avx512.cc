// AVX-512 inner loops. This file is compiled with -mavx512f/bw/vl/dq -mf16c -mfma, so it must
// not define or instantiate inline functions shared with other files (the linker could keep
// this file's AVX-512 copy for everyone): it includes only intrinsics and fixed-width types and
// keeps everything in an anonymous namespace.
#include <cpuid.h>
#include <immintrin.h>

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

void HalfToFloatAvx512(const uint16_t* in, int64_t n, float* out) {
  DequantRowAvx512(WeightType::kF16, reinterpret_cast<const uint8_t*>(in), n, out);
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

// exp(x) for x <= 0 (scores minus their running max): x = n ln2 + r, |r| <= ln2 / 2, and
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

// 16 elements (masked) of a K or V row, as F32.
inline __m512 LoadKv(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512 LoadKv(const uint16_t* p, __mmask16 m) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

// NC = ceil(hd / 16) vectors per row: the query and the accumulator stay in registers.
template <int NC, typename Src>
void AttendBlockVec(const float* q, const Src* k, const Src* v, int64_t n, int64_t hd,
                    float scale, float* scores, float* run_max, float* run_sum, float* acc) {
  __mmask16 mask[NC];
  for (int c = 0; c < NC; ++c) {
    const int64_t left = hd - c * 16;
    mask[c] = left >= 16 ? static_cast<__mmask16>(0xffff) : TailMask(left);
  }
  __m512 qv[NC];
  for (int c = 0; c < NC; ++c) qv[c] = _mm512_maskz_loadu_ps(mask[c], q + c * 16);
  float block_max = -__builtin_inff();
  for (int64_t t = 0; t < n; ++t) {
    __m512 s = _mm512_setzero_ps();
    for (int c = 0; c < NC; ++c) s = _mm512_fmadd_ps(qv[c], LoadKv(k + t * hd + c * 16, mask[c]), s);
    scores[t] = _mm512_reduce_add_ps(s) * scale;
    block_max = block_max > scores[t] ? block_max : scores[t];
  }
  const float new_max = *run_max > block_max ? *run_max : block_max;
  const float correction = _mm512_cvtss_f32(ExpNonPositive(_mm512_set1_ps(*run_max - new_max)));
  __m512 a[NC];
  for (int c = 0; c < NC; ++c) {
    a[c] = _mm512_maskz_loadu_ps(mask[c], acc + c * 16);
    if (correction != 1.0f) a[c] = _mm512_mul_ps(a[c], _mm512_set1_ps(correction));
  }
  float sum = *run_sum * correction;
  for (int64_t t0 = 0; t0 < n; t0 += 16) {
    const int64_t count = MinI64(16, n - t0);
    const __mmask16 m = count == 16 ? static_cast<__mmask16>(0xffff) : TailMask(count);
    const __m512 p = _mm512_maskz_mov_ps(
        m, ExpNonPositive(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, scores + t0), _mm512_set1_ps(new_max))));
    sum += _mm512_reduce_add_ps(p);
    _mm512_mask_storeu_ps(scores + t0, m, p);
    for (int64_t t = t0; t < t0 + count; ++t) {
      const __m512 pb = _mm512_set1_ps(scores[t]);
      for (int c = 0; c < NC; ++c) a[c] = _mm512_fmadd_ps(pb, LoadKv(v + t * hd + c * 16, mask[c]), a[c]);
    }
  }
  for (int c = 0; c < NC; ++c) _mm512_mask_storeu_ps(acc + c * 16, mask[c], a[c]);
  *run_sum = sum;
  *run_max = new_max;
}

template <typename Src>
void AttendBlockAvx512(const float* q, const Src* k, const Src* v, int64_t n, int64_t hd,
                       float scale, float* scores, float* run_max, float* run_sum, float* acc) {
  switch ((hd + 15) / 16) {
#define BMAD_ATTEND_CASE(nc) \
  case nc: AttendBlockVec<nc, Src>(q, k, v, n, hd, scale, scores, run_max, run_sum, acc); return;
    BMAD_ATTEND_CASE(1) BMAD_ATTEND_CASE(2) BMAD_ATTEND_CASE(3) BMAD_ATTEND_CASE(4)
    BMAD_ATTEND_CASE(5) BMAD_ATTEND_CASE(6) BMAD_ATTEND_CASE(7) BMAD_ATTEND_CASE(8)
#undef BMAD_ATTEND_CASE
    default: break;
  }
  // Heads wider than 128: the accumulator lives in memory.
  float block_max = -__builtin_inff();
  for (int64_t t = 0; t < n; ++t) {
    __m512 s = _mm512_setzero_ps();
    for (int64_t d = 0; d < hd; d += 16) {
      const __mmask16 m = hd - d >= 16 ? static_cast<__mmask16>(0xffff) : TailMask(hd - d);
      s = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + d), LoadKv(k + t * hd + d, m), s);
    }
    scores[t] = _mm512_reduce_add_ps(s) * scale;
    block_max = block_max > scores[t] ? block_max : scores[t];
  }
  const float new_max = *run_max > block_max ? *run_max : block_max;
  const float correction = _mm512_cvtss_f32(ExpNonPositive(_mm512_set1_ps(*run_max - new_max)));
  float sum = *run_sum * correction;
  for (int64_t t = 0; t < n; ++t) {
    const float p = _mm512_cvtss_f32(ExpNonPositive(_mm512_set1_ps(scores[t] - new_max)));
    sum += p;
    for (int64_t d = 0; d < hd; d += 16) {
      const __mmask16 m = hd - d >= 16 ? static_cast<__mmask16>(0xffff) : TailMask(hd - d);
      __m512 a = _mm512_maskz_loadu_ps(m, acc + d);
      if (correction != 1.0f && t == 0) a = _mm512_mul_ps(a, _mm512_set1_ps(correction));
      _mm512_mask_storeu_ps(acc + d, m, _mm512_fmadd_ps(_mm512_set1_ps(p), LoadKv(v + t * hd + d, m), a));
    }
  }
  *run_sum = sum;
  *run_max = new_max;
}

const SimdKernels kAvx512Kernels{"avx512",        DotRowsAvx512,     PanelGemmAvx512,
                                 DequantRowAvx512,
                                 RoundHalfAvx512, HalfToFloatAvx512, FloatToHalfAvx512,
                                 DotAvx512,       AttendBlockAvx512<float>,
                                 AttendBlockAvx512<uint16_t>};
const SimdKernels kAvx512VnniKernels{"avx512-vnni",   DotRowsAvx512,     PanelGemmAvx512,
                                     DequantRowAvx512,
                                     RoundHalfAvx512, HalfToFloatAvx512, FloatToHalfAvx512,
                                     DotAvx512,       AttendBlockAvx512<float>,
                                     AttendBlockAvx512<uint16_t>,        QuantizeQ8RowsVnni,
                                     PanelGemmQ8Vnni};

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
