#include "tests/gpu/device_llama.h"

#include <cmath>
#include <cstring>

namespace bmad::gpu_tests {

Result<void*> HostMemory::Allocate(size_t bytes) {
  blocks_.emplace_back(new unsigned char[bytes == 0 ? 1 : bytes]);
  return static_cast<void*>(blocks_.back().get());
}

Status HostMemory::ToDevice(void* dst, const void* host_src, size_t bytes) {
  std::memcpy(dst, host_src, bytes);
  return Status::Ok();
}

Status HostMemory::ToHost(void* host_dst, const void* src, size_t bytes) {
  std::memcpy(host_dst, src, bytes);
  return Status::Ok();
}

Status HostMemory::OnDevice(void* dst, const void* src, size_t bytes) {
  std::memmove(dst, src, bytes);
  return Status::Ok();
}

Result<std::unique_ptr<DeviceLlama>> DeviceLlama::Load(const std::string& path,
                                                       kernels::Backend& backend,
                                                       DeviceMemory& memory,
                                                       const DeviceLlamaOptions& options) {
  std::unique_ptr<DeviceLlama> m(new DeviceLlama(backend, memory, options));
  BMAD_RETURN_IF_ERROR(m->Init(path));
  return m;
}

Result<float*> DeviceLlama::Floats(int64_t count) {
  BMAD_ASSIGN_OR_RETURN(void* p, memory_.Allocate(static_cast<size_t>(count) * sizeof(float)));
  return static_cast<float*>(p);
}

Status DeviceLlama::Init(const std::string& path) {
  BMAD_ASSIGN_OR_RETURN(model_, model::LlamaModel::Open(path, backend_));
  const model::LlamaConfig& c = model_->config();
  const model::LlamaWeights& w = model_->weights();
  rope_ = kernels::RopeConfig{c.rope_dim, c.rope_freq_base, c.rope_freq_scale};

  auto prepare = [&](const kernels::WeightMatrix& m) {
    kernels::PreparedWeight p = backend_.PrepareMatMulWeight(m);
    if (p.storage) prepared_.push_back(p.storage);
    weight_bytes_ += m.row_bytes * static_cast<size_t>(m.rows);
    return p.view;
  };
  auto upload = [&](const void* host, size_t bytes) -> Result<void*> {
    BMAD_ASSIGN_OR_RETURN(void* d, memory_.Allocate(bytes));
    BMAD_RETURN_IF_ERROR(memory_.ToDevice(d, host, bytes));
    return d;
  };
  const size_t norm_bytes = static_cast<size_t>(c.n_embd) * sizeof(float);
  // The embedding table stays in its file layout (row lookups), as LlamaModel keeps it.
  token_embd_ = w.token_embd;
  BMAD_ASSIGN_OR_RETURN(
      void* table,
      upload(w.token_embd.data, w.token_embd.row_bytes * static_cast<size_t>(w.token_embd.rows)));
  token_embd_.data = table;
  output_ = prepare(w.output);
  BMAD_ASSIGN_OR_RETURN(void* out_norm, upload(w.output_norm, norm_bytes));
  output_norm_ = static_cast<const float*>(out_norm);
  for (const model::LlamaLayerWeights& l : w.layers) {
    Layer d;
    d.wq = prepare(l.wq);
    d.wk = prepare(l.wk);
    d.wv = prepare(l.wv);
    d.wo = prepare(l.wo);
    d.w_gate = prepare(l.w_gate);
    d.w_up = prepare(l.w_up);
    d.w_down = prepare(l.w_down);
    BMAD_ASSIGN_OR_RETURN(void* an, upload(l.attn_norm, norm_bytes));
    BMAD_ASSIGN_OR_RETURN(void* fn, upload(l.ffn_norm, norm_bytes));
    d.attn_norm = static_cast<const float*>(an);
    d.ffn_norm = static_cast<const float*>(fn);
    layers_.push_back(d);
  }

  const model::KvCacheShape shape = model_->CacheShape(options_.num_blocks, options_.block_size);
  BMAD_ASSIGN_OR_RETURN(void* kv, memory_.Allocate(shape.Bytes()));
  cache_ = std::make_unique<model::KvCache>(shape, kv);

  const int64_t t = options_.max_tokens, d = c.n_embd;
  BMAD_ASSIGN_OR_RETURN(x_, Floats(t * d));
  BMAD_ASSIGN_OR_RETURN(h_, Floats(t * d));
  BMAD_ASSIGN_OR_RETURN(q_, Floats(t * c.q_dim()));
  BMAD_ASSIGN_OR_RETURN(k_, Floats(t * c.kv_dim()));
  BMAD_ASSIGN_OR_RETURN(v_, Floats(t * c.kv_dim()));
  BMAD_ASSIGN_OR_RETURN(attn_, Floats(t * c.q_dim()));
  BMAD_ASSIGN_OR_RETURN(proj_, Floats(t * d));
  BMAD_ASSIGN_OR_RETURN(gate_, Floats(t * c.n_ff));
  BMAD_ASSIGN_OR_RETURN(up_, Floats(t * c.n_ff));
  BMAD_ASSIGN_OR_RETURN(last_, Floats(options_.max_seqs * d));
  BMAD_ASSIGN_OR_RETURN(logits_, Floats(options_.max_seqs * c.n_vocab));
  BMAD_ASSIGN_OR_RETURN(void* next, memory_.Allocate(static_cast<size_t>(options_.max_seqs) * 4));
  next_ = static_cast<int32_t*>(next);
  return Status::Ok();
}

// LlamaModel::RunLayer's ops, in its order, on this runner's buffers.
void DeviceLlama::RunLayer(int64_t layer, int64_t n, std::span<const int32_t> positions) {
  const model::LlamaConfig& c = model_->config();
  const Layer& w = layers_[static_cast<size_t>(layer)];
  kernels::Backend& b = backend_;
  b.RmsNorm(x_, w.attn_norm, n, c.n_embd, c.rms_eps, h_);
  b.MatMul(h_, n, w.wq, q_);
  b.MatMul(h_, n, w.wk, k_);
  b.MatMul(h_, n, w.wv, v_);
  b.Rope(q_, positions, c.n_head, c.head_dim, rope_);
  b.Rope(k_, positions, c.n_head_kv, c.head_dim, rope_);
  const kernels::KvLayerView kv = cache_->Layer(layer);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  b.StoreKv(kv, k_, v_, prefill_);
  b.StoreKv(kv, k_, v_, decode_);
  if (!prefill_.empty()) b.AttentionPrefill(kv, q_, prefill_, c.n_head, scale, attn_);
  if (!decode_.empty()) b.AttentionDecode(kv, q_, decode_, c.n_head, scale, attn_);
  b.MatMul(attn_, n, w.wo, proj_);
  b.Add(x_, proj_, n * c.n_embd);
  b.RmsNorm(x_, w.ffn_norm, n, c.n_embd, c.rms_eps, h_);
  b.MatMul(h_, n, w.w_gate, gate_);
  b.MatMul(h_, n, w.w_up, up_);
  b.SwiGlu(gate_, up_, n * c.n_ff, gate_);
  b.MatMul(gate_, n, w.w_down, proj_);
  b.Add(x_, proj_, n * c.n_embd);
}

Status DeviceLlama::Forward(std::span<const model::SequenceStep> steps, int64_t* n_logits) {
  const model::LlamaConfig& c = model_->config();
  ids_.clear();
  positions_.clear();
  prefill_.clear();
  decode_.clear();
  int64_t row = 0;
  for (const model::SequenceStep& s : steps) {
    const auto count = static_cast<int64_t>(s.tokens.size());
    for (int64_t i = 0; i < count; ++i) {
      ids_.push_back(s.tokens[static_cast<size_t>(i)]);
      positions_.push_back(s.start_pos + static_cast<int32_t>(i));
    }
    (count == 1 ? decode_ : prefill_).push_back({row, count, s.start_pos, s.block_table});
    row += count;
  }
  if (row > options_.max_tokens || static_cast<int64_t>(steps.size()) > options_.max_seqs) {
    return InvalidArgument("step of " + std::to_string(row) + " tokens and " +
                           std::to_string(steps.size()) + " sequences exceeds the runner's sizes");
  }
  backend_.Embedding(token_embd_, ids_, x_);
  for (int64_t l = 0; l < c.n_layer; ++l) RunLayer(l, row, positions_);

  int64_t n = 0;
  row = 0;
  const size_t row_bytes = static_cast<size_t>(c.n_embd) * sizeof(float);
  for (const model::SequenceStep& s : steps) {
    row += static_cast<int64_t>(s.tokens.size());
    if (!s.want_logits) continue;
    BMAD_RETURN_IF_ERROR(
        memory_.OnDevice(last_ + n * c.n_embd, x_ + (row - 1) * c.n_embd, row_bytes));
    ++n;
  }
  if (n > 0) {
    backend_.RmsNorm(last_, output_norm_, n, c.n_embd, c.rms_eps, last_);
    backend_.MatMul(last_, n, output_, logits_);
  }
  *n_logits = n;
  return Status::Ok();
}

Result<std::vector<float>> DeviceLlama::LogitsToHost(int64_t n_logits) {
  std::vector<float> host(static_cast<size_t>(n_logits * config().n_vocab));
  BMAD_RETURN_IF_ERROR(memory_.ToHost(host.data(), logits_, host.size() * sizeof(float)));
  return host;
}

Result<std::vector<int32_t>> DeviceLlama::Greedy(int64_t n_logits) {
  backend_.Argmax(logits_, n_logits, config().n_vocab, next_);
  std::vector<int32_t> host(static_cast<size_t>(n_logits));
  BMAD_RETURN_IF_ERROR(memory_.ToHost(host.data(), next_, host.size() * sizeof(int32_t)));
  return host;
}

}  // namespace bmad::gpu_tests
