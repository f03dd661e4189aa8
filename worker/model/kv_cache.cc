#include "worker/model/kv_cache.h"

namespace bmad::model {

int64_t KvCacheShape::ElementsPerBlock() const {
  return 2 * n_layers * n_kv_heads * block_size * head_dim;
}

size_t KvCacheShape::BytesPerBlock() const {
  return static_cast<size_t>(ElementsPerBlock()) * sizeof(uint16_t);
}

KvCache::KvCache(const KvCacheShape& shape, void* memory)
    : shape_(shape), base_(static_cast<uint16_t*>(memory)) {}

KvCache::KvCache(const KvCacheShape& shape)
    : shape_(shape), owned_(new uint16_t[shape.Bytes() / sizeof(uint16_t)]), base_(owned_.get()) {}

kernels::KvLayerView KvCache::Layer(int64_t layer) const {
  const int64_t per_tensor = shape_.n_kv_heads * shape_.block_size * shape_.head_dim;
  uint16_t* k = base_ + 2 * layer * per_tensor;
  return kernels::KvLayerView{k,
                              k + per_tensor,
                              shape_.num_blocks,
                              shape_.n_kv_heads,
                              shape_.block_size,
                              shape_.head_dim,
                              shape_.ElementsPerBlock()};
}

}  // namespace bmad::model
