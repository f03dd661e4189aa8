// The KV cache's memory: `num_blocks` blocks of `block_size` tokens, stored as F16. A block is
// one contiguous unit holding every layer's keys and values for its tokens,
//   [layer][K, V][n_kv_heads][block_size][head_dim],
// so the memory pool hands out whole blocks; kernels::KvLayerView is one layer's view of it.
// Which block belongs to which sequence is the KV block manager's business (worker/kv).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/backend.h"

namespace bmad::model {

struct KvCacheShape {
  int64_t n_layers = 0;
  int64_t num_blocks = 0;   // block 0 is reserved by the block manager, so usable = num_blocks - 1
  int64_t block_size = 16;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;

  size_t BytesPerBlock() const;  // all layers, K and V
  int64_t ElementsPerBlock() const;
  size_t Bytes() const { return BytesPerBlock() * static_cast<size_t>(num_blocks); }
};

class KvCache {
 public:
  // Uses `memory` (Bytes() long, 64-byte aligned, owned by the caller, e.g. the arena).
  KvCache(const KvCacheShape& shape, void* memory);
  // Allocates its own memory.
  explicit KvCache(const KvCacheShape& shape);

  const KvCacheShape& shape() const { return shape_; }
  kernels::KvLayerView Layer(int64_t layer) const;

 private:
  KvCacheShape shape_;
  std::unique_ptr<uint16_t[]> owned_;
  uint16_t* base_ = nullptr;
};

}  // namespace bmad::model
