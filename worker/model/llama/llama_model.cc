#include "worker/model/llama/llama_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "worker/kv/kv_types.h"

namespace bmad::model {

Result<std::unique_ptr<LlamaModel>> LlamaModel::Open(const std::string& path,
                                                     kernels::Backend& backend,
                                                     const ModelPlacement& placement) {
  BMAD_ASSIGN_OR_RETURN(std::unique_ptr<gguf::GgufFile> file, gguf::GgufFile::Open(path));
  BMAD_ASSIGN_OR_RETURN(LlamaConfig config, ReadLlamaConfig(*file));
  BMAD_RETURN_IF_ERROR(CheckBackendWeightTypes(*file, backend));
  LlamaShard shard = WholeModel(config);
  if (placement.tp != 1 || placement.pp != 1 || !placement.stage_layers.empty()) {
    Result<LlamaShard> made = MakeLlamaShard(config, placement.tp, placement.tp_rank, placement.pp,
                                             placement.stage, placement.stage_layers);
    if (!made.ok()) return made.status().WithContext(path);
    shard = *made;
  }
  BMAD_ASSIGN_OR_RETURN(LlamaWeights weights, MapLlamaWeights(*file, config, shard));
  return std::unique_ptr<LlamaModel>(new LlamaModel(std::move(file), std::move(config), shard,
                                                    std::move(weights), backend));
}

Result<std::unique_ptr<LlamaModel>> LlamaModel::Load(const std::string& path,
                                                     kernels::Backend& backend,
                                                     const ModelPlacement& placement) {
  BMAD_ASSIGN_OR_RETURN(std::unique_ptr<LlamaModel> model, Open(path, backend, placement));
  model->PrepareWeights();
  return model;
}

namespace {

size_t Align64(size_t n) { return (n + 63) / 64 * 64; }

// A norm vector as the 1 x n matrix UploadRows takes.
kernels::WeightMatrix NormMatrix(const float* norm, int64_t n) {
  return kernels::MakeWeightMatrix(kernels::WeightType::kF32, norm, 1, n);
}

}  // namespace

size_t LlamaModel::PreparedWeightBytes() const {
  size_t bytes = Align64(backend_.PreparedBytes(weights_.output));
  for (const LlamaLayerWeights& l : weights_.layers) {
    for (const kernels::WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      bytes += Align64(backend_.PreparedBytes(*m));
    }
  }
  // What a device backend uploads besides: the embedding table (with a zero row for the tokens
  // outside a vocabulary slice) and the norm vectors.
  if (weights_.token_embd.data != nullptr) bytes += Align64(backend_.UploadedBytes(EmbeddingUpload()));
  const kernels::WeightMatrix norm = NormMatrix(nullptr, config_.n_embd);
  const size_t norms = 2 * weights_.layers.size() + (weights_.output_norm != nullptr ? 1 : 0);
  bytes += norms * Align64(backend_.UploadedBytes(norm));
  return bytes + 64;
}

void LlamaModel::PrepareWeights() {
  PrepareForBackend(weights_, backend_);
  if (backend_.host_memory()) return;  // the table and norms are read where they are mapped
  auto upload = [&](const kernels::WeightMatrix& m) {
    kernels::PreparedWeight p = backend_.UploadRows(m);
    if (p.storage) weights_.prepared.push_back(std::move(p.storage));
    return p.view;
  };
  auto upload_norm = [&](const float*& norm) {
    if (norm != nullptr) norm = static_cast<const float*>(upload(NormMatrix(norm, config_.n_embd)).data);
  };
  if (weights_.token_embd.data != nullptr) {
    kernels::WeightMatrix table = EmbeddingUpload();
    std::vector<uint8_t> padded;
    if (table.rows != weights_.token_embd.rows) {
      // The slice's rows, then one zero row (zero bytes are 0.0 in every weight type).
      padded.assign(static_cast<size_t>(table.rows) * table.row_bytes, 0);
      std::memcpy(padded.data(), weights_.token_embd.data,
                  static_cast<size_t>(weights_.token_embd.rows) * table.row_bytes);
      table.data = padded.data();
    }
    weights_.token_embd = upload(table);
    // The upload may read `padded` after returning (an asynchronous copy): wait before freeing.
    (void)backend_.Synchronize();  // a failure is reported by the caller's Synchronize
  }
  upload_norm(weights_.output_norm);
  for (LlamaLayerWeights& l : weights_.layers) {
    upload_norm(l.attn_norm);
    upload_norm(l.ffn_norm);
  }
}

kernels::WeightMatrix LlamaModel::EmbeddingUpload() const {
  kernels::WeightMatrix t = weights_.token_embd;
  if (shard_.tp > 1) t.rows += 1;
  return t;
}

size_t LlamaModel::WorkspaceBytes(int64_t max_tokens, int64_t max_rows) const {
  const LlamaConfig& c = config_;
  const int64_t q = shard_.n_head * c.head_dim, kv = shard_.n_kv_head * c.head_dim;
  const auto t = static_cast<size_t>(max_tokens);
  const size_t floats = t * static_cast<size_t>(4 * c.n_embd + 2 * q + 2 * kv + 2 * shard_.n_ff) +
                        static_cast<size_t>(max_rows * c.n_embd);
  // A device backend's logits are computed on the device, then copied to the caller.
  const size_t device_logits =
      backend_.host_memory() ? 0 : static_cast<size_t>(max_rows * shard_.vocab_stride);
  // ... and their argmax for greedy steps.
  const size_t device_ids = backend_.host_memory() ? 0 : static_cast<size_t>(max_rows);
  // Each of the 14 buffers is 64-byte aligned.
  return (floats + device_logits) * sizeof(float) + (2 * t + device_ids) * sizeof(int32_t) + 14 * 64;
}

LlamaModel::LlamaModel(std::unique_ptr<gguf::GgufFile> file, LlamaConfig config,
                       LlamaShard shard, LlamaWeights weights, kernels::Backend& backend)
    : file_(std::move(file)),
      config_(std::move(config)),
      shard_(shard),
      weights_(std::move(weights)),
      backend_(backend),
      rope_{config_.rope_dim, config_.rope_freq_base, config_.rope_freq_scale,
            weights_.rope_freq_factors != nullptr
                ? std::span<const float>(weights_.rope_freq_factors, static_cast<size_t>(config_.rope_dim / 2))
                : std::span<const float>()} {}

KvCacheShape LlamaModel::CacheShape(int64_t num_blocks, int64_t block_size) const {
  return KvCacheShape{shard_.n_layers(), num_blocks, block_size, shard_.n_kv_head,
                      config_.head_dim};
}

void LlamaModel::Grow(std::vector<float>& buffer, size_t floats) {
  if (buffer.size() < floats) {
    buffer.resize(floats);
    ++workspace_allocations_;
  }
}

void LlamaModel::Reserve(int64_t max_tokens, int64_t max_rows) {
  const auto t = static_cast<size_t>(max_tokens);
  const LlamaConfig& c = config_;
  const auto q = static_cast<size_t>(shard_.n_head * c.head_dim);
  const auto kv = static_cast<size_t>(shard_.n_kv_head * c.head_dim);
  Grow(own_x_, t * c.n_embd);
  Grow(own_h_, t * c.n_embd);
  Grow(own_q_, t * q);
  Grow(own_k_, t * kv);
  Grow(own_v_, t * kv);
  Grow(own_attn_, t * q);
  Grow(own_proj_, t * c.n_embd);
  Grow(own_gate_, t * static_cast<size_t>(shard_.n_ff));
  Grow(own_up_, t * static_cast<size_t>(shard_.n_ff));
  Grow(own_last_, static_cast<size_t>(max_rows) * c.n_embd);
  if (own_ids_.size() < t) {
    own_ids_.resize(t);
    own_positions_.resize(t);
    ++workspace_allocations_;
  }
  if (prefill_seqs_.capacity() < static_cast<size_t>(max_rows)) {
    prefill_seqs_.reserve(static_cast<size_t>(max_rows));
    decode_seqs_.reserve(static_cast<size_t>(max_rows));
    ++workspace_allocations_;
  }
}

void LlamaModel::BindOwnBuffers() {
  device_logits_ = nullptr;
  device_ids_ = nullptr;
  x_ = own_x_.data();
  h_ = own_h_.data();
  q_ = own_q_.data();
  k_ = own_k_.data();
  v_ = own_v_.data();
  attn_ = own_attn_.data();
  proj_ = own_proj_.data();
  gate_ = own_gate_.data();
  up_ = own_up_.data();
  last_ = own_last_.data();
  ids_ = own_ids_.data();
  positions_ = own_positions_.data();
}

Status LlamaModel::BindWorkspace(memory::BumpAllocator& ws, int64_t n, int64_t n_rows) {
  const LlamaConfig& c = config_;
  auto floats = [&](int64_t count) {
    return static_cast<float*>(ws.Allocate(static_cast<size_t>(count) * sizeof(float)));
  };
  const int64_t q = shard_.n_head * c.head_dim, kv = shard_.n_kv_head * c.head_dim;
  x_ = floats(n * c.n_embd);
  h_ = floats(n * c.n_embd);
  q_ = floats(n * q);
  k_ = floats(n * kv);
  v_ = floats(n * kv);
  attn_ = floats(n * q);
  proj_ = floats(n * c.n_embd);
  gate_ = floats(n * shard_.n_ff);
  up_ = floats(n * shard_.n_ff);
  last_ = floats(n_rows * c.n_embd);
  if (backend_.host_memory()) {
    ids_ = static_cast<int32_t*>(ws.Allocate(static_cast<size_t>(n) * sizeof(int32_t)));
    positions_ = static_cast<int32_t*>(ws.Allocate(static_cast<size_t>(n) * sizeof(int32_t)));
    device_logits_ = nullptr;
    device_ids_ = nullptr;
    return BoundOrExhausted({x_, h_, q_, k_, v_, attn_, proj_, gate_, up_, last_, ids_, positions_});
  }
  // Ops take token ids and positions as host spans (backend.h) and upload them themselves.
  if (own_ids_.size() < static_cast<size_t>(n)) {
    own_ids_.resize(static_cast<size_t>(n));
    own_positions_.resize(static_cast<size_t>(n));
    ++workspace_allocations_;
  }
  ids_ = own_ids_.data();
  positions_ = own_positions_.data();
  device_logits_ = floats(n_rows * shard_.vocab_stride);
  device_ids_ = static_cast<int32_t*>(ws.Allocate(static_cast<size_t>(n_rows) * sizeof(int32_t)));
  return BoundOrExhausted({x_, h_, q_, k_, v_, attn_, proj_, gate_, up_, last_, device_logits_, device_ids_});
}

Status LlamaModel::BoundOrExhausted(std::initializer_list<const void*> buffers) {
  for (const void* b : buffers) {
    if (b == nullptr) {
      return ResourceExhausted("the step's activations overflow the workspace and no memory was "
                               "left to serve them");
    }
  }
  return Status::Ok();
}

Status LlamaModel::Validate(std::span<const SequenceStep> steps, const KvCache& cache) const {
  const KvCacheShape& shape = cache.shape();
  if (shape.n_layers != shard_.n_layers() || shape.n_kv_heads != shard_.n_kv_head ||
      shape.head_dim != config_.head_dim) {
    return InvalidArgument("KV cache shape does not match the model shard");
  }
  for (size_t s = 0; s < steps.size(); ++s) {
    const SequenceStep& st = steps[s];
    const std::string which = "step sequence " + std::to_string(s);
    if (st.tokens.empty()) return InvalidArgument(which + " has no tokens");
    if (st.start_pos < 0) return InvalidArgument(which + " has a negative position");
    if (st.logit_rows < 0 || static_cast<size_t>(st.logit_rows) > st.tokens.size()) {
      return InvalidArgument(which + " asks for " + std::to_string(st.logit_rows) + " rows of logits from " +
                             std::to_string(st.tokens.size()) + " tokens");
    }
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
      if (id <= kv::kNullBlockId || id >= shape.num_blocks) {
        return InvalidArgument(which + " names block " + std::to_string(id) +
                               (id == kv::kNullBlockId ? ", the reserved null block"
                                                       : " outside the cache (" + std::to_string(shape.num_blocks) +
                                                             " blocks)"));
      }
    }
  }
  return CheckBlocksWrittenOnce(steps, shape.block_size, shape.num_blocks);
}

Status LlamaModel::CheckBlocksWrittenOnce(std::span<const SequenceStep> steps, int64_t block_size,
                                         int64_t num_blocks) const {
  // Each sequence writes the blocks covering [start_pos, end): marked with its index. A block
  // marked twice, or found among the blocks another sequence (or the same one) only reads, is
  // named twice. Full prefix blocks shared by several sequences are only read: allowed.
  if (static_cast<int64_t>(block_writer_.size()) < num_blocks) block_writer_.assign(static_cast<size_t>(num_blocks), -1);
  written_blocks_.clear();
  const auto unmark = [&] {
    for (int32_t id : written_blocks_) block_writer_[static_cast<size_t>(id)] = -1;
    written_blocks_.clear();
  };
  const auto first_written = [&](const SequenceStep& st) { return st.start_pos / block_size; };
  const auto end_block = [&](const SequenceStep& st) {
    return (int64_t{st.start_pos} + static_cast<int64_t>(st.tokens.size()) + block_size - 1) / block_size;
  };
  const auto twice = [&](size_t s, int32_t id, int32_t writer) {
    unmark();
    return InvalidArgument("step sequence " + std::to_string(s) + " names block " + std::to_string(id) +
                           ", which step sequence " + std::to_string(writer) + " writes in the same step");
  };
  for (size_t s = 0; s < steps.size(); ++s) {
    for (int64_t b = first_written(steps[s]); b < end_block(steps[s]); ++b) {
      const int32_t id = steps[s].block_table[static_cast<size_t>(b)];
      int32_t& writer = block_writer_[static_cast<size_t>(id)];
      if (writer != -1) return twice(s, id, writer);
      writer = static_cast<int32_t>(s);
      written_blocks_.push_back(id);
    }
  }
  for (size_t s = 0; s < steps.size(); ++s) {
    for (int64_t b = 0; b < first_written(steps[s]); ++b) {
      const int32_t id = steps[s].block_table[static_cast<size_t>(b)];
      if (const int32_t writer = block_writer_[static_cast<size_t>(id)]; writer != -1) return twice(s, id, writer);
    }
  }
  unmark();
  return Status::Ok();
}

Status LlamaModel::Embed(int64_t n, TensorParallelGroup* group) {
  const std::span<const int32_t> ids(ids_, static_cast<size_t>(n));
  if (shard_.tp == 1) {
    backend_.Embedding(weights_.token_embd, ids, x_);
    return Status::Ok();
  }
  // Each rank holds a slice of the vocabulary: it fills the rows of its tokens, zeroes the rest,
  // and the sum over the group assembles every row.
  const int64_t d = config_.n_embd;
  if (!backend_.host_memory()) {
    // One lookup on the device: tokens outside the slice read the zero row past its end.
    if (embed_ids_.size() < static_cast<size_t>(n)) {
      embed_ids_.resize(static_cast<size_t>(n));
      ++workspace_allocations_;
    }
    for (int64_t i = 0; i < n; ++i) {
      const int32_t local = ids[static_cast<size_t>(i)] - static_cast<int32_t>(shard_.vocab_begin);
      embed_ids_[static_cast<size_t>(i)] =
          local >= 0 && local < shard_.n_vocab ? local : static_cast<int32_t>(shard_.n_vocab);
    }
    backend_.Embedding(weights_.token_embd,
                       std::span<const int32_t>(embed_ids_.data(), static_cast<size_t>(n)), x_);
    return AllReduce(group, x_, n * d);
  }
  for (int64_t i = 0; i < n; ++i) {
    const int32_t local = ids[static_cast<size_t>(i)] - static_cast<int32_t>(shard_.vocab_begin);
    float* row = x_ + i * d;
    if (local >= 0 && local < shard_.n_vocab) {
      backend_.Embedding(weights_.token_embd, std::span<const int32_t>(&local, 1), row);
    } else {
      std::fill_n(row, d, 0.0f);
    }
  }
  return AllReduce(group, x_, n * d);
}

Status LlamaModel::AllReduce(TensorParallelGroup* group, float* data, int64_t count) {
  if (backend_.host_memory() || group->device_memory()) {
    return group->AllReduceSum(data, static_cast<size_t>(count));
  }
  // The group sums host buffers (MPI): a device shard goes through host memory.
  if (staging_.size() < static_cast<size_t>(count)) {
    staging_.resize(static_cast<size_t>(count));
    ++workspace_allocations_;
  }
  const size_t bytes = static_cast<size_t>(count) * sizeof(float);
  BMAD_RETURN_IF_ERROR(backend_.CopyToHost(staging_.data(), data, bytes));
  BMAD_RETURN_IF_ERROR(group->AllReduceSum(staging_.data(), static_cast<size_t>(count)));
  return backend_.CopyToDevice(data, staging_.data(), bytes);
}

Status LlamaModel::RunLayer(int64_t layer, int64_t n, const KvCache& cache,
                            TensorParallelGroup* group) {
  const LlamaConfig& c = config_;
  const LlamaLayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
  kernels::Backend& b = backend_;
  const std::span<const int32_t> positions(positions_, static_cast<size_t>(n));
  const int64_t n_head = shard_.n_head;

  // Attention block, over this rank's heads.
  b.RmsNorm(x_, w.attn_norm, n, c.n_embd, c.rms_eps, h_);
  const kernels::WeightMatrix* qkv[] = {&w.wq, &w.wk, &w.wv};
  float* qkv_out[] = {q_, k_, v_};
  b.MatMuls(h_, n, qkv, qkv_out);
  b.Rope(q_, positions, n_head, c.head_dim, rope_);
  b.Rope(k_, positions, shard_.n_kv_head, c.head_dim, rope_);
  const kernels::KvLayerView kv = cache.Layer(layer);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  b.StoreKv(kv, k_, v_, prefill_seqs_);
  b.StoreKv(kv, k_, v_, decode_seqs_);
  if (!prefill_seqs_.empty()) {
    b.AttentionPrefill(kv, q_, prefill_seqs_, n_head, scale, attn_);
  }
  if (!decode_seqs_.empty()) {
    b.AttentionDecode(kv, q_, decode_seqs_, n_head, scale, attn_);
  }
  b.MatMul(attn_, n, w.wo, proj_);
  if (shard_.tp > 1) BMAD_RETURN_IF_ERROR(AllReduce(group, proj_, n * c.n_embd));
  b.Add(x_, proj_, n * c.n_embd);

  // MLP block, over this rank's slice of the width.
  b.RmsNorm(x_, w.ffn_norm, n, c.n_embd, c.rms_eps, h_);
  const kernels::WeightMatrix* gate_up[] = {&w.w_gate, &w.w_up};
  float* gate_up_out[] = {gate_, up_};
  b.MatMuls(h_, n, gate_up, gate_up_out);
  b.SwiGlu(gate_, up_, n * shard_.n_ff, gate_);
  b.MatMul(gate_, n, w.w_down, proj_);
  if (shard_.tp > 1) BMAD_RETURN_IF_ERROR(AllReduce(group, proj_, n * c.n_embd));
  b.Add(x_, proj_, n * c.n_embd);
  return Status::Ok();
}

Status LlamaModel::Forward(std::span<const SequenceStep> steps, const KvCache& cache,
                           float* logits, memory::BumpAllocator* workspace) {
  if (!shard_.whole()) {
    return FailedPrecondition("Forward computes the whole model; this is " + shard_.Describe());
  }
  ShardIo io;
  io.logits = logits;
  return ForwardShard(steps, cache, io, nullptr, workspace);
}

Status LlamaModel::LaunchForward(std::span<const SequenceStep> steps, const KvCache& cache,
                                 float* logits, memory::BumpAllocator* workspace) {
  ShardIo io;
  io.logits = logits;
  return LaunchWhole(steps, cache, io, workspace);
}

Status LlamaModel::LaunchSampledForward(std::span<const SequenceStep> steps, const KvCache& cache,
                                        std::span<const kernels::RowSampling> row_sampling,
                                        int32_t* sampled_ids, memory::BumpAllocator* workspace) {
  if (sampled_ids == nullptr) return InvalidArgument("LaunchSampledForward needs somewhere for the ids");
  size_t sampling = 0;
  for (const SequenceStep& s : steps) {
    if (s.logit_rows > 1) return InvalidArgument("LaunchSampledForward draws one token per sequence, not " +
                                                 std::to_string(s.logit_rows) + " rows");
    sampling += static_cast<size_t>(s.logit_rows);
  }
  if (row_sampling.size() != sampling) {
    return InvalidArgument("LaunchSampledForward: " + std::to_string(row_sampling.size()) +
                           " rows of sampling parameters for " + std::to_string(sampling) +
                           " sequences that sample");
  }
  ShardIo io;
  io.sampled_ids = sampled_ids;
  io.row_sampling = row_sampling;
  return LaunchWhole(steps, cache, io, workspace);
}

Status LlamaModel::LaunchWhole(std::span<const SequenceStep> steps, const KvCache& cache, ShardIo io,
                               memory::BumpAllocator* workspace) {
  if (!shard_.whole()) {
    return FailedPrecondition("a launched step computes the whole model; this is " + shard_.Describe());
  }
  io.finish_later = true;
  return ForwardShard(steps, cache, io, nullptr, workspace);
}

Status LlamaModel::ForwardShard(std::span<const SequenceStep> steps, const KvCache& cache,
                                const ShardIo& io, TensorParallelGroup* group,
                                memory::BumpAllocator* workspace) {
  BMAD_RETURN_IF_ERROR(Validate(steps, cache));
  if (shard_.tp > 1 && group == nullptr) {
    return FailedPrecondition("a tensor-parallel shard needs its group (" + shard_.Describe() + ")");
  }
  int64_t n = 0, logit_rows = 0;
  for (const SequenceStep& s : steps) {
    n += static_cast<int64_t>(s.tokens.size());
    logit_rows += s.logit_rows;
  }
  // Sized for the step's sequences too (its attention lists), and never empty.
  const int64_t n_rows = std::max<int64_t>(logit_rows, static_cast<int64_t>(steps.size()));
  if (!backend_.host_memory() && workspace == nullptr) {
    return FailedPrecondition("the " + std::string(backend_.name()) +
                              " backend computes in device memory: a step needs a workspace "
                              "carved from the device arena");
  }
  if (workspace) {
    BMAD_RETURN_IF_ERROR(BindWorkspace(*workspace, n, n_rows));
  } else {
    Reserve(n, n_rows);
    BindOwnBuffers();
  }

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
  const size_t row_bytes = static_cast<size_t>(c.n_embd) * sizeof(float);
  if (shard_.first_stage()) {
    BMAD_RETURN_IF_ERROR(Embed(n, group));
  } else {
    BMAD_RETURN_IF_ERROR(backend_.CopyToDevice(x_, io.input_hidden, row_bytes * static_cast<size_t>(n)));
  }
  for (int64_t l = 0; l < shard_.n_layers(); ++l) BMAD_RETURN_IF_ERROR(RunLayer(l, n, cache, group));
  if (!shard_.last_stage()) {
    return backend_.CopyToHost(io.output_hidden, x_, row_bytes * static_cast<size_t>(n));
  }

  // Logits only for each sequence's last logit_rows tokens.
  int64_t n_logits = 0;
  row = 0;
  for (const SequenceStep& s : steps) {
    row += static_cast<int64_t>(s.tokens.size());
    if (s.logit_rows == 0) continue;
    BMAD_RETURN_IF_ERROR(backend_.CopyOnDevice(last_ + n_logits * c.n_embd, x_ + (row - s.logit_rows) * c.n_embd,
                                               row_bytes * static_cast<size_t>(s.logit_rows)));
    n_logits += s.logit_rows;
  }
  if (n_logits == 0) return io.finish_later ? Status::Ok() : backend_.Synchronize();
  backend_.RmsNorm(last_, weights_.output_norm, n_logits, c.n_embd, c.rms_eps, last_);
  // A device backend computes its rows on the device and copies them out before the padding.
  if (io.sampled_ids != nullptr) {
    if (!io.finish_later || !shard_.whole()) return InvalidArgument("sampled ids are for LaunchSampledForward");
    // The whole vocabulary: the rows live in the step's own buffers, only the drawn ids leave.
    float* rows = device_logits_;
    if (rows == nullptr) {
      Grow(logits_rows_, static_cast<size_t>(n_logits * shard_.n_vocab));
      rows = logits_rows_.data();
    }
    backend_.MatMul(last_, n_logits, weights_.output, rows);
    if (device_ids_ == nullptr) {
      backend_.SampleRows(rows, n_logits, shard_.n_vocab, io.row_sampling, io.sampled_ids);
      return Status::Ok();
    }
    backend_.SampleRows(rows, n_logits, shard_.n_vocab, io.row_sampling, device_ids_);
    return backend_.CopyToHostAsync(io.sampled_ids, device_ids_,
                                    static_cast<size_t>(n_logits) * sizeof(int32_t));
  }
  float* rows = device_logits_ != nullptr ? device_logits_ : io.logits;
  if (shard_.n_vocab > 0) backend_.MatMul(last_, n_logits, weights_.output, rows);
  if (device_logits_ != nullptr) {
    const size_t bytes = static_cast<size_t>(n_logits * shard_.n_vocab) * sizeof(float);
    // Finishing later is for the whole model, whose rows need no padding after the copy.
    if (io.finish_later) return backend_.CopyToHostAsync(io.logits, device_logits_, bytes);
    BMAD_RETURN_IF_ERROR(backend_.CopyToHost(io.logits, device_logits_, bytes));
  }
  // MatMul wrote rows of n_vocab; spread them to the padded stride (last row first, so no row
  // overwrites one not yet moved) and zero the padding.
  const int64_t local = shard_.n_vocab, stride = shard_.vocab_stride;
  if (local != stride) {
    for (int64_t i = n_logits - 1; i >= 0; --i) {
      if (i > 0) std::copy_backward(io.logits + i * local, io.logits + (i + 1) * local,
                         io.logits + i * stride + local);
      std::fill(io.logits + i * stride + local, io.logits + (i + 1) * stride, 0.0f);
    }
  }
  return Status::Ok();
}

}  // namespace bmad::model
