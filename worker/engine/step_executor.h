// Where an engine step's forward pass runs. By default in this process, over the whole model
// (Engine's own path); a replica split over ranks gives its leader's engine an executor that
// sends the step to every rank and computes the leader's shard (parallel::LeaderExecutor).
#pragma once

#include <cstdint>
#include <span>

#include "common/status.h"
#include "worker/model/llama/llama_model.h"

namespace bmad::engine {

class StepExecutor {
 public:
  virtual ~StepExecutor() = default;
  // Computes one step; writes each sequence's logit_rows rows of logits, in step order, to
  // `logits` ([their sum, n_vocab]). ids[i] names steps[i]'s sequence. kInvalidArgument or
  // kOutOfRange: the step is malformed (its requests fail; the replica goes on). Any other
  // error: the replica can compute no more (a rank failed) and must stop.
  virtual Status Execute(std::span<const model::SequenceStep> steps,
                         std::span<const uint64_t> ids, float* logits) = 0;
  // The sequence's KV state is gone (finished, cancelled, preempted): its blocks may be reused
  // by any sequence from the next step on.
  virtual void Release(uint64_t id) = 0;
};

}  // namespace bmad::engine
