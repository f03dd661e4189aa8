#include "kernels/cuda/op_metadata.h"

#include <algorithm>

#include "kernels/cuda/launch_params.h"

namespace bmad::cuda {
namespace {

int64_t BlocksReached(const kernels::AttentionSequence& s, int64_t block_size) {
  return (s.start_pos + s.row_count + block_size - 1) / block_size;
}

}  // namespace

void AppendAttentionMeta(std::span<const kernels::AttentionSequence> sequences, int64_t block_size,
                         std::vector<int32_t>& meta) {
  static_assert(kSeqFields == 4, "the four fields below");
  int32_t table_offset = 0;
  for (const kernels::AttentionSequence& s : sequences) {
    meta.push_back(static_cast<int32_t>(s.row_begin));
    meta.push_back(static_cast<int32_t>(s.row_count));
    meta.push_back(s.start_pos);
    meta.push_back(table_offset);
    table_offset += static_cast<int32_t>(BlocksReached(s, block_size));
  }
  for (const kernels::AttentionSequence& s : sequences) {
    const auto blocks = static_cast<size_t>(BlocksReached(s, block_size));
    meta.insert(meta.end(), s.block_table.begin(), s.block_table.begin() + blocks);
  }
}

void AppendKvSlots(std::span<const kernels::AttentionSequence> sequences, int64_t block_size,
                   std::vector<int32_t>& slots) {
  for (const kernels::AttentionSequence& s : sequences) {
    for (int64_t t = 0; t < s.row_count; ++t) {
      const int64_t pos = s.start_pos + t;
      slots.push_back(static_cast<int32_t>(s.row_begin + t));
      slots.push_back(s.block_table[static_cast<size_t>(pos / block_size)]);
      slots.push_back(static_cast<int32_t>(pos % block_size));
    }
  }
}

int64_t MaxContext(std::span<const kernels::AttentionSequence> sequences) {
  int64_t longest = 1;
  for (const kernels::AttentionSequence& s : sequences) {
    longest = std::max<int64_t>(longest, s.start_pos + s.row_count);
  }
  return longest;
}

GemmArgs RowMajorProduct(int64_t m, int64_t rows, int64_t cols, int64_t w_stride) {
  GemmArgs g;
  g.transpose_a = true;
  g.m = static_cast<int>(rows);
  g.n = static_cast<int>(m);
  g.k = static_cast<int>(cols);
  g.lda = static_cast<int>(w_stride);
  g.ldb = static_cast<int>(cols);
  g.ldc = static_cast<int>(rows);
  return g;
}

}  // namespace bmad::cuda
