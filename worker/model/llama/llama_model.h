// A Llama-family decoder over a paged KV cache: one call computes one engine step for a batch
// of sequences, each with its new tokens, their positions and its block table (the interface
// the scheduler drives). Prefill, chunked prefill and decode are the same call; a step may mix
// them.
#pragma once

#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/backend.h"
#include "worker/model/gguf/gguf_file.h"
#include "worker/model/kv_cache.h"
#include "worker/memory/bump_allocator.h"
#include "worker/model/llama/llama_config.h"
#include "worker/model/llama/llama_shard.h"
#include "worker/model/llama/llama_weights.h"

namespace bmad::model {

// One sequence's share of a step.
struct SequenceStep {
  std::span<const int32_t> tokens;       // tokens computed this step (a prompt chunk, or one)
  int32_t start_pos = 0;                 // position of tokens[0]; earlier positions are cached
  std::span<const int32_t> block_table;  // the sequence's blocks, covering every position
  // Logits are returned for the last `logit_rows` tokens (0 to tokens.size()): 1 for a
  // sequence that samples after this step, its whole chunk for one whose prompt's
  // log-probabilities are wanted.
  int32_t logit_rows = 0;
};

// Which shard of the model this process computes (parallel.tp / parallel.pp in the config).
struct ModelPlacement {
  int64_t tp = 1, tp_rank = 0;
  int64_t pp = 1, stage = 0;
  std::vector<int64_t> stage_layers;  // empty: balanced by layer count
};

// The tensor-parallel group a shard sums its partial results over: one all-reduce after the
// attention output projection, one after the MLP down projection, one for the embedding.
class TensorParallelGroup {
 public:
  virtual ~TensorParallelGroup() = default;
  virtual Status AllReduceSum(float* data, size_t count) = 0;
  // Whether `data` may be device memory (NCCL). Otherwise a shard on a device backend stages
  // each all-reduce through host memory.
  virtual bool device_memory() const { return false; }
};

// A shard's inputs and outputs besides the tokens and the cache.
struct ShardIo {
  const float* input_hidden = nullptr;  // not the first stage: [tokens, n_embd] from the stage before
  float* output_hidden = nullptr;       // not the last stage: [tokens, n_embd] for the stage after
  // The last stage: [logits rows, shard.vocab_stride] (SequenceStep::logit_rows, in step
  // order), this rank's vocabulary slice; the padding past the slice is zeroed.
  float* logits = nullptr;
  // The last stage of the whole model only: return once the copy of the logits is issued
  // (Backend::CopyToHostAsync); they are in `logits` after FinishForward.
  bool finish_later = false;
  // With finish_later: instead of the logits, each row's token drawn by row_sampling
  // (Backend::SampleRows, -1 for a row the host sampler would refuse), computed where the logits
  // are; only these ids cross to the host. `logits` is then unused.
  int32_t* sampled_ids = nullptr;
  std::span<const kernels::RowSampling> row_sampling;  // one per row of logits
};

class LlamaModel {
 public:
  // Opens, validates and maps `path`, then prepares the weights for the backend. Errors name
  // the file and what is wrong.
  static Result<std::unique_ptr<LlamaModel>> Load(const std::string& path,
                                                  kernels::Backend& backend,
                                                  const ModelPlacement& placement = {});
  // The two halves of Load, for callers that size memory in between: Open maps the file (only
  // the placement's shard of it) without preparing anything; PreparedWeightBytes says what
  // PrepareWeights will take from the backend's weight memory. kInvalidArgument when the model
  // cannot be split as the placement asks.
  static Result<std::unique_ptr<LlamaModel>> Open(const std::string& path,
                                                  kernels::Backend& backend,
                                                  const ModelPlacement& placement = {});
  size_t PreparedWeightBytes() const;
  void PrepareWeights();

  // Bytes a step of `max_tokens` tokens and `max_rows` sequences and rows of logits (the larger
  // bound) takes from a workspace allocator (Forward's `workspace`).
  size_t WorkspaceBytes(int64_t max_tokens, int64_t max_rows) const;

  const LlamaConfig& config() const { return config_; }
  const LlamaShard& shard() const { return shard_; }
  const gguf::GgufFile& file() const { return *file_; }
  const LlamaWeights& weights() const { return weights_; }

  // The KV cache shape this model needs for `num_blocks` blocks of `block_size` tokens.
  KvCacheShape CacheShape(int64_t num_blocks, int64_t block_size) const;

  // Sizes the step workspace for up to `max_tokens` tokens and `max_rows` sequences and rows of
  // logits per step, so steps within those bounds allocate nothing.
  void Reserve(int64_t max_tokens, int64_t max_rows);

  // Computes one step and writes the logits rows of every sequence (SequenceStep::logit_rows),
  // in step order, to `logits` ([their sum, n_vocab]). kInvalidArgument for a malformed step (token id out of
  // range, position past the context, block table too short or naming a block outside the cache).
  // With a `workspace`, the step's activations are carved from it (the caller resets it between
  // steps); without one the model keeps its own buffers (Reserve).
  // The whole model only (kFailedPrecondition for a shard).
  //
  // Device backends (Backend::host_memory() false, i.e. CUDA): weights, the embedding table and
  // norms (PrepareWeights), the cache and the workspace are device memory, and every activation
  // stays there; `steps`, `logits` and the ShardIo buffers are host memory. A workspace is
  // required (kFailedPrecondition without one); a step ends with its output copied out, or with
  // Backend::Synchronize when there is none, so a device fault fails the step that caused it.
  // All-reduces go to the group directly when it takes device memory (NCCL), else through host
  // memory.
  Status Forward(std::span<const SequenceStep> steps, const KvCache& cache, float* logits,
                 memory::BumpAllocator* workspace = nullptr);
  // Forward in two halves, for an engine that plans the next step while this one runs.
  // LaunchForward issues the step and returns once it is issued: a device backend computes it
  // meanwhile, a host backend has computed it by then. Errors found before issuing (a malformed
  // step) come from LaunchForward; `logits` is written, and a device fault reported, once
  // FinishForward returns. `steps` may be reused at once; `logits` must stay valid until then,
  // and the backend copies into it without blocking only when it is pinned
  // (Backend::PinHostMemory).
  Status LaunchForward(std::span<const SequenceStep> steps, const KvCache& cache, float* logits,
                       memory::BumpAllocator* workspace = nullptr);
  // The same, drawing each sampling sequence's token where the logits are: `sampled_ids` gets
  // the token drawn by `row_sampling` (one per sequence with logit_rows 1, in step order;
  // ShardIo::sampled_ids) instead of its logits. Every logit_rows must be 0 or 1.
  Status LaunchSampledForward(std::span<const SequenceStep> steps, const KvCache& cache,
                              std::span<const kernels::RowSampling> row_sampling,
                              int32_t* sampled_ids, memory::BumpAllocator* workspace);
  Status FinishForward() { return backend_.Synchronize(); }
  // One step of this shard: its stage's layers over its heads and MLP slice. `group` is needed
  // when shard().tp > 1. Every rank of a replica calls this with the same steps.
  Status ForwardShard(std::span<const SequenceStep> steps, const KvCache& cache, const ShardIo& io,
                      TensorParallelGroup* group, memory::BumpAllocator* workspace = nullptr);

  // The checks every forward call makes before computing anything: token ids in the
  // vocabulary, positions within the context, block tables covering them inside `cache` (never
  // the reserved block 0), no block written by the step named twice (by its own table or by
  // another sequence's: its KV would be overwritten while read), and the cache's shape this
  // shard's. kInvalidArgument / kOutOfRange naming the sequence. The
  // answer is the same on every rank of a replica given the same steps, so ranks can refuse a
  // step together before any of them waits on another (ShardStepRunner).
  Status Validate(std::span<const SequenceStep> steps, const KvCache& cache) const;

  // Workspace growths since Load (the engine reports system allocations after warm-up).
  uint64_t workspace_allocations() const { return workspace_allocations_; }

 private:
  // LaunchForward and LaunchSampledForward: the whole model, finished by FinishForward.
  Status LaunchWhole(std::span<const SequenceStep> steps, const KvCache& cache, ShardIo io,
                     memory::BumpAllocator* workspace);
  LlamaModel(std::unique_ptr<gguf::GgufFile> file, LlamaConfig config, LlamaShard shard,
             LlamaWeights weights, kernels::Backend& backend);
  void Grow(std::vector<float>& buffer, size_t floats);
  void BindOwnBuffers();
  Status BindWorkspace(memory::BumpAllocator& workspace, int64_t n_tokens, int64_t n_rows);
  static Status BoundOrExhausted(std::initializer_list<const void*> buffers);
  Status Embed(int64_t n_tokens, TensorParallelGroup* group);
  Status AllReduce(TensorParallelGroup* group, float* data, int64_t count);
  // The embedding table as a device backend holds it: a vocabulary slice gains a zero row.
  kernels::WeightMatrix EmbeddingUpload() const;
  // Validate's last check: no block the step writes is named twice (see Validate).
  Status CheckBlocksWrittenOnce(std::span<const SequenceStep> steps, int64_t block_size, int64_t num_blocks) const;
  Status RunLayer(int64_t layer, int64_t n_tokens, const KvCache& cache, TensorParallelGroup* group);

  std::unique_ptr<gguf::GgufFile> file_;
  LlamaConfig config_;
  LlamaShard shard_;
  LlamaWeights weights_;
  kernels::Backend& backend_;
  kernels::RopeConfig rope_;

  // Step activations, [tokens, width]: pointers into the workspace or into own_* below.
  float *x_ = nullptr, *h_ = nullptr, *q_ = nullptr, *k_ = nullptr, *v_ = nullptr,
        *attn_ = nullptr, *proj_ = nullptr, *gate_ = nullptr, *up_ = nullptr, *last_ = nullptr;
  float* device_logits_ = nullptr;  // device backends: the step's logits before the copy out
  int32_t* device_ids_ = nullptr;    // device backends: the tokens drawn there
  int32_t *ids_ = nullptr, *positions_ = nullptr;
  std::vector<float> own_x_, own_h_, own_q_, own_k_, own_v_, own_attn_, own_proj_, own_gate_,
      own_up_, own_last_;
  std::vector<float> logits_rows_;  // host backends, sampled steps: logits nobody else needs
  std::vector<int32_t> own_ids_, own_positions_;
  std::vector<int32_t> embed_ids_;  // device backends, tp > 1: slice-local ids (host)
  std::vector<float> staging_;      // device backends: all-reduces over a host-memory group
  std::vector<kernels::AttentionSequence> prefill_seqs_, decode_seqs_;
  uint64_t workspace_allocations_ = 0;
  // Validate's scratch: which sequence of the step writes each block (-1: none), and the blocks
  // marked (reset before it returns). Kept across steps so that checking allocates nothing.
  mutable std::vector<int32_t> block_writer_;
  mutable std::vector<int32_t> written_blocks_;
};

}  // namespace bmad::model
