// SimdKernels::attend_rows_f16: attention of a tile of a sequence's new tokens over its paged
// cache, in spans merged by a running softmax. A token's result must be the same bit for bit
// however the call around it is cut (a prefill tile or a lone decode row; one KV head or
// several), or a token's attention would depend
// on whether it was prefilled or decoded, and recomputing a preempted or migrated sequence could
// change its greedy text. Every form must match a double-precision computation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/half.h"
#include "kernels/cpu/simd_kernels.h"

namespace bmad::kernels::cpu {
namespace {

std::vector<const SimdKernels*> AllKernels() {
  std::vector<const SimdKernels*> v = {&ScalarSimdKernels()};
  if (const SimdKernels* avx = Avx512SimdKernels()) v.push_back(avx);
  return v;
}

// A sequence of n_tokens in scattered blocks: per block, [n_kv][block_size][hd] keys, then the
// values likewise (the worker's layout for one layer).
struct PagedSequence {
  int64_t n_kv, group, hd, block_size, n_tokens;
  std::vector<int32_t> table;
  std::vector<uint16_t> cache;  // block_stride elements per block
  std::vector<float> q;         // n_tokens rows of n_kv * group * hd

  int64_t block_stride() const { return 2 * n_kv * block_size * hd; }
  int64_t row_stride() const { return n_kv * group * hd; }
  const uint16_t* k(int64_t head) const { return cache.data() + head * block_size * hd; }
  const uint16_t* v(int64_t head) const { return k(head) + n_kv * block_size * hd; }
  float Key(int64_t t, int64_t h, int64_t d) const {
    return HalfToFloat(k(h)[table[t / block_size] * block_stride() + (t % block_size) * hd + d]);
  }
  float Value(int64_t t, int64_t h, int64_t d) const {
    return HalfToFloat(v(h)[table[t / block_size] * block_stride() + (t % block_size) * hd + d]);
  }
};

PagedSequence MakeSequence(int64_t n_kv, int64_t group, int64_t hd, int64_t block_size,
                           int64_t n_tokens, uint64_t seed) {
  PagedSequence s{n_kv, group, hd, block_size, n_tokens, {}, {}, {}};
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int64_t blocks = (n_tokens + block_size - 1) / block_size;
  s.table.resize(static_cast<size_t>(blocks));
  std::iota(s.table.begin(), s.table.end(), 1);  // block 0 unused, as in the pool
  std::shuffle(s.table.begin(), s.table.end(), rng);
  s.cache.resize(static_cast<size_t>((blocks + 1) * s.block_stride()));
  for (auto& x : s.cache) x = FloatToHalf(dist(rng));
  s.q.resize(static_cast<size_t>(n_tokens * s.row_stride()));
  for (float& x : s.q) x = 2.0f * dist(rng);
  return s;
}

// Rows [row_lo, row_hi) and KV heads [h_lo, h_hi) in one call, the context taken in spans of
// `span` tokens; out is n_tokens rows. The scratch is exactly what the contract asks for.
void Attend(const SimdKernels& simd, const PagedSequence& s, int64_t row_lo, int64_t row_hi,
            int64_t h_lo, int64_t h_hi, float scale, int64_t span, std::vector<float>& out) {
  const int64_t rows = row_hi - row_lo;
  std::vector<float> scratch(
      static_cast<size_t>(AttendRowsScratchFloats(rows, (h_hi - h_lo) * s.group, span)));
  const int64_t first = row_lo * s.row_stride() + h_lo * s.group * s.hd;
  simd.attend_rows_f16(s.q.data() + first, s.row_stride(), rows, row_lo + 1, h_hi - h_lo, s.group,
                       s.k(h_lo), s.v(h_lo), s.table.data(), s.block_stride(), s.block_size, s.hd,
                       scale, span, scratch.data(), out.data() + first);
}

TEST(AttendRows, ATokensResultDoesNotDependOnHowTheCallIsCut) {
  for (const SimdKernels* simd : AllKernels()) {
    for (const int64_t block_size : {1, 3, 8, 16, 32}) {
      for (const int64_t hd : {8, 20, 64, 128, 144}) {
        const PagedSequence s = MakeSequence(3, 2, hd, block_size, 41, 11 + block_size + hd);
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        // One span for the whole context, and spans of one and two blocks (merged).
        for (const int64_t span : {2048 / block_size * block_size, block_size, 2 * block_size}) {
          const std::string what = std::string(simd->isa) + " bs " + std::to_string(block_size) +
                                   " hd " + std::to_string(hd) + " span " + std::to_string(span);
          // One call for every row and head, as a prefill of the whole sequence.
          std::vector<float> whole(s.q.size(), 0.0f);
          Attend(*simd, s, 0, s.n_tokens, 0, s.n_kv, scale, span, whole);
          // Ragged tiles of rows with one head each, as a chunked prefill.
          std::vector<float> tiles(s.q.size(), 0.0f);
          for (int64_t lo = 0, size = 1; lo < s.n_tokens; lo += size, size = size % 7 + 2) {
            for (int64_t h = 0; h < s.n_kv; ++h) {
              Attend(*simd, s, lo, std::min(s.n_tokens, lo + size), h, h + 1, scale, span, tiles);
            }
          }
          // One row at a time, every head at once, as decode steps.
          std::vector<float> decode(s.q.size(), 0.0f);
          for (int64_t r = 0; r < s.n_tokens; ++r) {
            Attend(*simd, s, r, r + 1, 0, s.n_kv, scale, span, decode);
          }
          ASSERT_EQ(whole, tiles) << what;
          ASSERT_EQ(whole, decode) << what;
        }
      }
    }
  }
}

TEST(AttendRows, MatchesDoublePrecision) {
  for (const SimdKernels* simd : AllKernels()) {
    // Head widths below, at and above one vector, odd ones, and past the register-resident 128.
    for (const int64_t hd : {8, 16, 20, 64, 100, 128, 160}) {
      // One span, and spans of one or two blocks merged by the running softmax.
      for (const auto& [block_size, span] : {std::pair<int64_t, int64_t>{8, 2048}, {16, 16},
                                            {5, 10}, {8, 8}}) {
        const PagedSequence s = MakeSequence(2, 3, hd, block_size, 37, 7 + hd);
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        std::vector<float> got(s.q.size(), 0.0f);
        Attend(*simd, s, 0, s.n_tokens, 0, s.n_kv, scale, span, got);
        for (int64_t r = 0; r < s.n_tokens; ++r) {
          for (int64_t j = 0; j < s.n_kv * s.group; ++j) {
            const int64_t h = j / s.group;
            const float* qj = s.q.data() + r * s.row_stride() + j * hd;
            std::vector<double> score(static_cast<size_t>(r + 1));
            double max = -1e300;
            for (int64_t t = 0; t <= r; ++t) {
              double dot = 0;
              for (int64_t d = 0; d < hd; ++d) dot += double(qj[d]) * s.Key(t, h, d);
              score[static_cast<size_t>(t)] = dot * scale;
              max = std::max(max, dot * scale);
            }
            double total = 0;
            for (double& x : score) total += (x = std::exp(x - max));
            for (int64_t d = 0; d < hd; ++d) {
              double want = 0;
              for (int64_t t = 0; t <= r; ++t) want += score[static_cast<size_t>(t)] * s.Value(t, h, d);
              want /= total;
              ASSERT_NEAR(got[static_cast<size_t>(r * s.row_stride() + j * hd + d)], want, 2e-6)
                  << simd->isa << " hd " << hd << " bs " << block_size << " span " << span
                  << " row " << r
                  << " head " << j << " d " << d;
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace bmad::kernels::cpu
