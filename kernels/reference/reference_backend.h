// The reference backend: every op as the plainest possible loop, single-threaded, accumulating
// in double. It is the oracle the optimized backends are tested against, not something to serve
// with.
#pragma once

#include "kernels/backend.h"

namespace bmad::kernels {

class ReferenceBackend : public Backend {
 public:
  std::string_view name() const override { return "reference"; }
  PreparedWeight PrepareMatMulWeight(const WeightMatrix& w) override { return {w, nullptr}; }
  void Embedding(const WeightMatrix& table, std::span<const int32_t> ids, float* out) override;
  void RmsNorm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps,
               float* out) override;
  void Rope(float* x, std::span<const int32_t> positions, int64_t n_heads, int64_t head_dim,
            const RopeConfig& rope) override;
  void MatMul(const float* x, int64_t m, const WeightMatrix& w, float* y) override;
  void SwiGlu(const float* gate, const float* up, int64_t n, float* out) override;
  void Add(float* x, const float* y, int64_t n) override;
  void Softmax(float* x, int64_t rows, int64_t n) override;
  void Argmax(const float* x, int64_t rows, int64_t n, int32_t* out) override;
  void SampleRows(const float* x, int64_t rows, int64_t n, std::span<const RowSampling> params,
                  int32_t* out) override;
  void StoreKv(const KvLayerView& cache, const float* k, const float* v,
               std::span<const AttentionSequence> sequences) override;
  void AttentionPrefill(const KvLayerView& cache, const float* q,
                        std::span<const AttentionSequence> sequences, int64_t n_heads, float scale,
                        float* out) override;
  void AttentionDecode(const KvLayerView& cache, const float* q,
                       std::span<const AttentionSequence> sequences, int64_t n_heads, float scale,
                       float* out) override;
};

// Row r of a weight matrix as F32 (dequantized), in either layout.
void DequantizeRow(const WeightMatrix& w, int64_t r, float* out);

// Index of element (position, head, dim) of a layer's K or V cache.
inline int64_t KvIndex(const KvLayerView& c, std::span<const int32_t> block_table, int64_t pos,
                       int64_t head, int64_t dim) {
  const int64_t block = block_table[static_cast<size_t>(pos / c.block_size)];
  return c.Offset(block, head, pos % c.block_size) + dim;
}

}  // namespace bmad::kernels
