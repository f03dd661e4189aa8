// What the CUDA backend builds on the host for its kernels from an op's host-side arguments
// (sequences, block tables) and how it maps a row-major product onto cuBLAS's column-major
// GEMM. Plain C++, shared by the backend and by the CPU-side tests that run the kernels in the
// emulator (tests/kernels/cuda_kernels_emulated_test.cc) or check the GEMM mapping.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/backend.h"

namespace bmad::cuda {

// Appends the attention metadata of kernel_launchers.h: kSeqFields ints per sequence
// {row_begin, row_count, start_pos, table_offset}, then each sequence's block table, cut to the
// blocks its positions reach this step.
void AppendAttentionMeta(std::span<const kernels::AttentionSequence> sequences, int64_t block_size,
                         std::vector<int32_t>& meta);

// Appends StoreKv's triples {activation row, block id, slot in block}, one per new token.
void AppendKvSlots(std::span<const kernels::AttentionSequence> sequences, int64_t block_size,
                   std::vector<int32_t>& slots);

// The longest context (start_pos + row_count) among the sequences; at least 1.
int64_t MaxContext(std::span<const kernels::AttentionSequence> sequences);

// Row-major y[m, rows] = x[m, cols] · Wᵀ (W rows `w_stride` elements apart) as cuBLAS's
// column-major C = op(A) · B: A = W with op T, B = x, C = y.
struct GemmArgs {
  bool transpose_a = true;  // CUBLAS_OP_T for A, CUBLAS_OP_N for B
  int m = 0, n = 0, k = 0;  // C is m × n, the inner dimension k
  int lda = 0, ldb = 0, ldc = 0;
};
GemmArgs RowMajorProduct(int64_t m, int64_t rows, int64_t cols, int64_t w_stride);

}  // namespace bmad::cuda
