#include "worker/parallel/shard_step_runner.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "worker/parallel/step_plan.h"

namespace bmad::parallel {
namespace {

constexpr int kHiddenTag = 1;
constexpr int kLogitsTag = 2;
// What bounds the rows of logits a step has.
constexpr const char* kRowSettings = "scheduler.max_seqs + scheduler.max_prompt_logprob_tokens";

int64_t CountTokens(std::span<const model::SequenceStep> steps) {
  int64_t n = 0;
  for (const model::SequenceStep& s : steps) n += static_cast<int64_t>(s.tokens.size());
  return n;
}

int64_t CountLogits(std::span<const model::SequenceStep> steps) {
  int64_t rows = 0;
  for (const model::SequenceStep& s : steps) rows += s.logit_rows;
  return rows;
}

}  // namespace

Status ShardStepRunner::CheckMessageSizes(const ShardStepContext& context) {
  const model::LlamaConfig& mc = context.model->config();
  const model::LlamaShard& shard = context.model->shard();
  // MPI counts in int: at most 2^31 - 1 units a message, bytes for the raw transfers (MPI_BYTE)
  // and floats for the all-reduces (MPI_FLOAT).
  constexpr int64_t kMaxCount = INT32_MAX;
  enum Unit : int64_t { kFloats = 1, kBytes = sizeof(float) };
  // rows x `width` floats in one message; `what` is that message.
  const auto check = [&](int64_t rows, int64_t width, Unit unit, const char* setting, const std::string& what) -> Status {
    const int64_t most = kMaxCount / unit / width;
    if (rows <= most) return Status::Ok();
    return InvalidArgument(std::string(setting) + " " + std::to_string(rows) + " makes " + what + " of up to " +
                           std::to_string(rows) + " x " + std::to_string(width) + " floats, above MPI's " +
                           "limit of 2147483647 " + (unit == kBytes ? "bytes" : "elements") +
                           " a message: lower " + setting + " to at most " + std::to_string(most));
  };
  if (shard.pp > 1) {
    BMAD_RETURN_IF_ERROR(check(context.max_tokens, mc.n_embd, kBytes, "scheduler.max_batch_tokens",
                               "a pipeline stage's hand-off"));
    BMAD_RETURN_IF_ERROR(check(context.max_logit_rows, mc.n_vocab, kBytes, kRowSettings,
                               "the last stage's logits"));
  }
  if (shard.tp > 1) {
    BMAD_RETURN_IF_ERROR(check(context.max_logit_rows, shard.vocab_stride, kBytes, kRowSettings,
                               "a tp rank's slice of the logits"));
    // The model's all-reduces of a step's hidden states go over MPI unless over the device's
    // communicator (NCCL counts in size_t).
    if (context.tp_device == nullptr) {
      BMAD_RETURN_IF_ERROR(check(context.max_tokens, mc.n_embd, kFloats, "scheduler.max_batch_tokens",
                                 "a tensor-parallel all-reduce"));
    }
  }
  return Status::Ok();
}

ShardStepRunner::ShardStepRunner(const ShardStepContext& context)
    : c_(context), shard_(context.model->shard()), tp_group_(context.tp_device ? context.tp_device : context.tp, context.tp_device != nullptr) {
  const model::LlamaConfig& mc = c_.model->config();
  const auto tokens = static_cast<size_t>(c_.max_tokens);
  const auto seqs = static_cast<size_t>(c_.max_logit_rows);
  if (!shard_.first_stage()) hidden_in_.resize(tokens * static_cast<size_t>(mc.n_embd));
  if (!shard_.last_stage()) hidden_out_.resize(tokens * static_cast<size_t>(mc.n_embd));
  if (shard_.last_stage()) {
    local_logits_.resize(seqs * static_cast<size_t>(shard_.vocab_stride));
    if (shard_.tp > 1) gathered_.resize(static_cast<size_t>(shard_.tp) * local_logits_.size());
    if (!shard_.first_stage() && shard_.tp_rank == 0) {
      assembled_.resize(seqs * static_cast<size_t>(mc.n_vocab));
    }
  }
}

Status ShardStepRunner::Run(std::span<const model::SequenceStep> steps, float* logits) {
  // Refused by every rank alike before any rank sends or waits: were stage 0 to refuse it
  // inside its forward pass, stage 1 would already be waiting for its activations and take the
  // next step's as this one's.
  BMAD_RETURN_IF_ERROR(c_.model->Validate(steps, *c_.cache));
  const int64_t vocab = c_.model->config().n_vocab;
  const int64_t parts = shard_.pp == 1 ? 1 : (c_.micro_batches > 0 ? c_.micro_batches : shard_.pp);
  float* assembled = nullptr;
  if (shard_.last_stage() && shard_.tp_rank == 0) {
    assembled = shard_.first_stage() ? logits : assembled_.data();
  }
  int64_t row = 0;
  for (const auto& [begin, end] : SplitMicroBatches(steps, parts)) {
    const auto part = steps.subspan(begin, end - begin);
    BMAD_RETURN_IF_ERROR(RunMicroBatch(part, row, assembled));
    row += CountLogits(part);
  }
  if (shard_.pp == 1 || row == 0) return Status::Ok();
  const size_t bytes = static_cast<size_t>(row * vocab) * sizeof(float);
  if (shard_.last_stage() && shard_.tp_rank == 0) {
    return c_.pp->Send(assembled_.data(), bytes, 0, kLogitsTag);
  }
  if (shard_.first_stage() && shard_.tp_rank == 0) {
    return c_.pp->Recv(logits, bytes, static_cast<int>(shard_.pp - 1), kLogitsTag);
  }
  return Status::Ok();
}

Status ShardStepRunner::RunMicroBatch(std::span<const model::SequenceStep> steps,
                                      int64_t logits_row, float* assembled) {
  const model::LlamaConfig& mc = c_.model->config();
  const int64_t n = CountTokens(steps), n_logits = CountLogits(steps);
  const size_t hidden_bytes = static_cast<size_t>(n * mc.n_embd) * sizeof(float);
  const int stage = static_cast<int>(shard_.stage);
  model::ShardIo io;
  if (!shard_.first_stage()) {
    BMAD_RETURN_IF_ERROR(c_.pp->Recv(hidden_in_.data(), hidden_bytes, stage - 1, kHiddenTag));
    io.input_hidden = hidden_in_.data();
  }
  if (!shard_.last_stage()) {
    io.output_hidden = hidden_out_.data();
  } else if (shard_.tp == 1) {
    io.logits = assembled + logits_row * mc.n_vocab;  // one rank holds the whole vocabulary
  } else {
    io.logits = local_logits_.data();
  }
  if (c_.workspace) c_.workspace->Reset();
  BMAD_RETURN_IF_ERROR(c_.model->ForwardShard(steps, *c_.cache, io,
                                              shard_.tp > 1 ? &tp_group_ : nullptr, c_.workspace));
  if (!shard_.last_stage()) return c_.pp->Send(hidden_out_.data(), hidden_bytes, stage + 1, kHiddenTag);
  if (shard_.tp == 1 || n_logits == 0) return Status::Ok();
  BMAD_RETURN_IF_ERROR(c_.tp->AllGather(
      local_logits_.data(), static_cast<size_t>(n_logits * shard_.vocab_stride) * sizeof(float),
      gathered_.data()));
  if (shard_.tp_rank == 0) Assemble(n_logits, assembled + logits_row * mc.n_vocab);
  return Status::Ok();
}

void ShardStepRunner::Assemble(int64_t rows, float* out) const {
  const int64_t vocab = c_.model->config().n_vocab, stride = shard_.vocab_stride;
  for (int64_t r = 0; r < shard_.tp; ++r) {
    const float* slice = gathered_.data() + r * rows * stride;
    const int64_t begin = r * stride;
    const int64_t width = std::max<int64_t>(0, std::min(stride, vocab - begin));
    for (int64_t i = 0; i < rows; ++i) {
      std::copy_n(slice + i * stride, width, out + i * vocab + begin);
    }
  }
}

}  // namespace bmad::parallel
