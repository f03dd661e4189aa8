#include "tests/gpu/device_model.h"

#include <algorithm>

namespace bmad::gpu_tests {

DeviceModel::~DeviceModel() {
  if (memory_) memory_->workspace().Reset();  // overflow chunks go back to the live backend
  cache_.reset();
  model_.reset();
  backend_.reset();  // returns its scratch to memory_
}

Result<std::unique_ptr<DeviceModel>> DeviceModel::Load(const std::string& path,
                                                       std::unique_ptr<kernels::Backend> backend,
                                                       const DeviceModelOptions& o) {
  std::unique_ptr<DeviceModel> m(new DeviceModel());
  m->backend_ = std::move(backend);
  kernels::Backend& b = *m->backend_;
  BMAD_ASSIGN_OR_RETURN(m->model_, model::LlamaModel::Open(path, b));
  const model::LlamaWeights& w = m->model_->weights();
  m->weight_bytes_ = w.output.row_bytes * static_cast<size_t>(w.output.rows);
  for (const model::LlamaLayerWeights& l : w.layers) {
    for (const kernels::WeightMatrix* x : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      m->weight_bytes_ += x->row_bytes * static_cast<size_t>(x->rows);
    }
  }
  worker::ReplicaMemorySizes sizes =
      worker::SizeReplicaMemory(*m->model_, o.max_tokens, o.max_seqs, o.block_size);
  sizes.kv_blocks = o.num_blocks;
  BMAD_ASSIGN_OR_RETURN(m->memory_, worker::ReplicaMemory::Create(
                                        sizes, 0, b.host_memory() ? nullptr : &b));
  b.SetMemoryHooks(m->memory_->BackendHooks());
  m->model_->PrepareWeights();
  BMAD_RETURN_IF_ERROR(b.Synchronize().WithContext("preparing the weights"));
  m->cache_ = std::make_unique<model::KvCache>(m->model_->CacheShape(o.num_blocks, o.block_size),
                                               m->memory_->KvMemory());
  m->logits_.resize(static_cast<size_t>(o.max_seqs * m->model_->config().n_vocab));
  return m;
}

Result<std::span<const float>> DeviceModel::Forward(std::span<const model::SequenceStep> steps) {
  memory_->workspace().Reset();
  BMAD_RETURN_IF_ERROR(model_->Forward(steps, *cache_, logits_.data(), &memory_->workspace()));
  n_logits_ = 0;
  for (const model::SequenceStep& s : steps) n_logits_ += s.logit_rows;
  return std::span<const float>(logits_.data(),
                                static_cast<size_t>(n_logits_ * config().n_vocab));
}

std::vector<int32_t> DeviceModel::Greedy() const {
  const int64_t vocab = config().n_vocab;
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n_logits_; ++i) {
    const float* row = logits_.data() + i * vocab;
    ids.push_back(static_cast<int32_t>(std::max_element(row, row + vocab) - row));
  }
  return ids;
}

}  // namespace bmad::gpu_tests
