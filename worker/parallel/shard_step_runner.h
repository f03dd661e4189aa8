// One rank's part of a step of a replica split tp × pp ways.
//
// The step's sequences are cut into micro-batches (up to parallel.micro_batches, default pp).
// Each stage takes them in order: receive the micro-batch's hidden state from the stage before
// (stage 0 embeds the tokens), run its layers (all-reducing over its tp group twice a layer),
// and send the result to the stage after, then go on to the next micro-batch while that stage
// works on this one. So with pp stages and pp micro-batches, stages overlap instead of idling.
// The last stage gathers its tp ranks' vocabulary slices of the logits; its tp rank 0 assembles
// [sampling sequences, n_vocab] and, after the step's last micro-batch, sends them to the leader.
// Data only flows forward until that last send, which the leader waits for after its own
// micro-batches: no cycle of sends, so no deadlock.
#pragma once

#include <span>
#include <vector>

#include "common/status.h"
#include "worker/memory/bump_allocator.h"
#include "worker/model/kv_cache.h"
#include "worker/model/llama/llama_model.h"
#include "worker/parallel/communicator.h"

namespace bmad::parallel {

struct ShardStepContext {
  model::LlamaModel* model = nullptr;   // this rank's shard
  const model::KvCache* cache = nullptr;  // this rank's KV (its layers, its KV heads)
  memory::BumpAllocator* workspace = nullptr;  // optional; reset before each micro-batch
  Communicator* tp = nullptr;  // this stage's tp ranks (needed when tp > 1)
  // The same ranks over device memory (NCCL), for the model's all-reduces on a device backend;
  // null: they go over `tp` (through host memory on a device backend).
  Communicator* tp_device = nullptr;
  Communicator* pp = nullptr;  // this tp rank's line through the stages (needed when pp > 1)
  int64_t micro_batches = 0;   // 0: pp
  int64_t max_tokens = 0;      // per step (scheduler.max_batch_tokens)
  // Rows of logits per step: scheduler.max_seqs + scheduler.max_prompt_logprob_tokens
  // (SchedulerConfig::max_logit_rows).
  int64_t max_logit_rows = 0;
};

class ShardStepRunner {
 public:
  explicit ShardStepRunner(const ShardStepContext& context);

  // Whether the largest messages a step can need (a pipeline hand-off of max_tokens hidden
  // states, max_logit_rows rows of logits, a tp rank's vocabulary slice of them, a host
  // all-reduce of max_tokens hidden states) fit one MPI message (MPI counts in int: at most
  // 2^31 - 1 bytes, or floats for an all-reduce). kInvalidArgument naming the setting to lower
  // otherwise: checked at start-up, so that no step fails for its size later.
  static Status CheckMessageSizes(const ShardStepContext& context);

  // Runs this rank's part of the step. On the leader `logits` receives [sampling sequences,
  // n_vocab]; the other ranks pass nullptr. Communicator failures come back as they are
  // (kDeadlineExceeded, kUnavailable, ...); a malformed step as the model's kInvalidArgument.
  Status Run(std::span<const model::SequenceStep> steps, float* logits);

 private:
  class TpGroup : public model::TensorParallelGroup {
   public:
    TpGroup(Communicator* comm, bool device_memory) : comm_(comm), device_memory_(device_memory) {}
    Status AllReduceSum(float* data, size_t count) override { return comm_->AllReduceSum(data, count); }
    bool device_memory() const override { return device_memory_; }

   private:
    Communicator* comm_;
    bool device_memory_;
  };

  Status RunMicroBatch(std::span<const model::SequenceStep> steps, int64_t logits_row, float* assembled);
  // Copies each tp rank's slice of `rows` logit rows from gathered_ into `out` rows.
  void Assemble(int64_t rows, float* out) const;

  ShardStepContext c_;
  const model::LlamaShard& shard_;
  TpGroup tp_group_;
  std::vector<float> hidden_in_, hidden_out_, local_logits_, gathered_, assembled_;
};

}  // namespace bmad::parallel
