#include "worker/model/llama/llama_model.h"

#include <algorithm>
#include <cmath>

namespace bmad::model {

Result<std::unique_ptr<LlamaModel>> LlamaModel::Load(const std::string& path,
                                                     kernels::Backend& backend) {
  BMAD_ASSIGN_OR_RETURN(std::unique_ptr<gguf::GgufFile> file, gguf::GgufFile::Open(path));
  BMAD_ASSIGN_OR_RETURN(LlamaConfig config, ReadLlamaConfig(*file));
  BMAD_ASSIGN_OR_RETURN(LlamaWeights weights, MapLlamaWeights(*file, config));
  PrepareForBackend(weights, backend);
  return std::unique_ptr<LlamaModel>(
      new LlamaModel(std::move(file), std::move(config), std::move(weights), backend));
}

LlamaModel::LlamaModel(std::unique_ptr<gguf::GgufFile> file, LlamaConfig config,
                       LlamaWeights weights, kernels::Backend& backend)
    : file_(std::move(file)),
      config_(std::move(config)),
      weights_(std::move(weights)),
      backend_(backend),
      rope_{config_.rope_dim, config_.rope_freq_base, config_.rope_freq_scale} {}

KvCacheShape LlamaModel::CacheShape(int64_t num_blocks, int64_t block_size) const {
  return KvCacheShape{config_.n_layer, num_blocks, block_size, config_.n_head_kv,
                      config_.head_dim};
}

void LlamaModel::Grow(std::vector<float>& buffer, size_t floats) {
  if (buffer.size() < floats) {
    buffer.resize(floats);
    ++workspace_allocations_;
  }
}

void LlamaModel::Reserve(int64_t max_tokens, int64_t max_seqs) {
  const auto t = static_cast<size_t>(max_tokens);
  const LlamaConfig& c = config_;
  Grow(x_, t * c.n_embd);
  Grow(h_, t * c.n_embd);
  Grow(q_, t * c.q_dim());
  Grow(k_, t * c.kv_dim());
  Grow(v_, t * c.kv_dim());
  Grow(attn_, t * c.q_dim());
  Grow(proj_, t * c.n_embd);
  Grow(gate_, t * c.n_ff);
  Grow(up_, t * c.n_ff);
  Grow(last_, static_cast<size_t>(max_seqs) * c.n_embd);
  if (ids_.size() < t) {
    ids_.resize(t);
    positions_.resize(t);
    ++workspace_allocations_;
  }
  if (prefill_seqs_.capacity() < static_cast<size_t>(max_seqs)) {
    prefill_seqs_.reserve(static_cast<size_t>(max_seqs));
    decode_seqs_.reserve(static_cast<size_t>(max_seqs));
    ++workspace_allocations_;
  }
}

Status LlamaModel::Validate(std::span<const SequenceStep> steps, const KvCache& cache) const {
  const KvCacheShape& shape = cache.shape();
  if (shape.n_layers != config_.n_layer || shape.n_kv_heads != config_.n_head_kv ||
      shape.head_dim != config_.head_dim) {
    return InvalidArgument("KV cache shape does not match the model");
  }
  for (size_t s = 0; s < steps.size(); ++s) {
    const SequenceStep& st = steps[s];
    const std::string which = "step sequence " + std::to_string(s);
    if (st.tokens.empty()) return InvalidArgument(which + " has no tokens");
    if (st.start_pos < 0) return InvalidArgument(which + " has a negative position");
    const int64_t end = int64_t{st.start_pos} + static_cast<int64_t>(st.tokens.size());
    if (end > config_.n_ctx_train) {
      return OutOfRange(which + " reaches position " + std::to_string(end) +
                        ", past the model's context length " + std::to_string(config_.n_ctx_train));
    }
    for (int32_t id : st.tokens) {
      if (id < 0 || id >= config_.n_vocab) {
        return InvalidArgument(which + " has token id " + std::to_string(id) +
                               " outside the vocabulary (0.." + std::to_string(config_.n_vocab - 1) +
                               ")");
      }
    }
    const int64_t blocks_needed = (end + shape.block_size - 1) / shape.block_size;
    if (static_cast<int64_t>(st.block_table.size()) < blocks_needed) {
      return InvalidArgument(which + " needs " + std::to_string(blocks_needed) +
                             " blocks but its block table has " +
                             std::to_string(st.block_table.size()));
    }
    for (int64_t b = 0; b < blocks_needed; ++b) {
      const int32_t id = st.block_table[static_cast<size_t>(b)];
      if (id < 0 || id >= shape.num_blocks) {
        return InvalidArgument(which + " names block " + std::to_string(id) +
                               " outside the cache (" + std::to_string(shape.num_blocks) +
                               " blocks)");
      }
    }
  }
  return Status::Ok();
}

void LlamaModel::RunLayer(int64_t layer, int64_t n, const KvCache& cache) {
  const LlamaConfig& c = config_;
  const LlamaLayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
  kernels::Backend& b = backend_;
  const std::span<const int32_t> positions(positions_.data(), static_cast<size_t>(n));

  // Attention block.
  b.RmsNorm(x_.data(), w.attn_norm, n, c.n_embd, c.rms_eps, h_.data());
  b.MatMul(h_.data(), n, w.wq, q_.data());
  b.MatMul(h_.data(), n, w.wk, k_.data());
  b.MatMul(h_.data(), n, w.wv, v_.data());
  b.Rope(q_.data(), positions, c.n_head, c.head_dim, rope_);
  b.Rope(k_.data(), positions, c.n_head_kv, c.head_dim, rope_);
  const kernels::KvLayerView kv = cache.Layer(layer);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  b.StoreKv(kv, k_.data(), v_.data(), prefill_seqs_);
  b.StoreKv(kv, k_.data(), v_.data(), decode_seqs_);
  if (!prefill_seqs_.empty()) {
    b.AttentionPrefill(kv, q_.data(), prefill_seqs_, c.n_head, scale, attn_.data());
  }
  if (!decode_seqs_.empty()) {
    b.AttentionDecode(kv, q_.data(), decode_seqs_, c.n_head, scale, attn_.data());
  }
  b.MatMul(attn_.data(), n, w.wo, proj_.data());
  b.Add(x_.data(), proj_.data(), n * c.n_embd);

  // MLP block.
  b.RmsNorm(x_.data(), w.ffn_norm, n, c.n_embd, c.rms_eps, h_.data());
  b.MatMul(h_.data(), n, w.w_gate, gate_.data());
  b.MatMul(h_.data(), n, w.w_up, up_.data());
  b.SwiGlu(gate_.data(), up_.data(), n * c.n_ff, gate_.data());
  b.MatMul(gate_.data(), n, w.w_down, proj_.data());
  b.Add(x_.data(), proj_.data(), n * c.n_embd);
}

Status LlamaModel::Forward(std::span<const SequenceStep> steps, const KvCache& cache,
                           float* logits) {
  BMAD_RETURN_IF_ERROR(Validate(steps, cache));
  int64_t n = 0;
  for (const SequenceStep& s : steps) n += static_cast<int64_t>(s.tokens.size());
  Reserve(n, static_cast<int64_t>(steps.size()));

  prefill_seqs_.clear();
  decode_seqs_.clear();
  int64_t row = 0;
  for (const SequenceStep& s : steps) {
    const auto count = static_cast<int64_t>(s.tokens.size());
    for (int64_t i = 0; i < count; ++i) {
      ids_[static_cast<size_t>(row + i)] = s.tokens[static_cast<size_t>(i)];
      positions_[static_cast<size_t>(row + i)] = s.start_pos + static_cast<int32_t>(i);
    }
    const kernels::AttentionSequence seq{row, count, s.start_pos, s.block_table};
    (count == 1 ? decode_seqs_ : prefill_seqs_).push_back(seq);
    row += count;
  }

  const LlamaConfig& c = config_;
  backend_.Embedding(weights_.token_embd, std::span<const int32_t>(ids_.data(), static_cast<size_t>(n)),
                     x_.data());
  for (int64_t l = 0; l < c.n_layer; ++l) RunLayer(l, n, cache);

  // Logits only for the last token of the sequences that sample this step.
  int64_t n_logits = 0;
  row = 0;
  for (const SequenceStep& s : steps) {
    row += static_cast<int64_t>(s.tokens.size());
    if (!s.want_logits) continue;
    std::copy_n(x_.data() + (row - 1) * c.n_embd, c.n_embd, last_.data() + n_logits * c.n_embd);
    ++n_logits;
  }
  if (n_logits == 0) return Status::Ok();
  backend_.RmsNorm(last_.data(), weights_.output_norm, n_logits, c.n_embd, c.rms_eps,
                   last_.data());
  backend_.MatMul(last_.data(), n_logits, weights_.output, logits);
  return Status::Ok();
}

}  // namespace bmad::model
