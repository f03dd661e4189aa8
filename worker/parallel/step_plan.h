// What a replica's leader tells its other ranks before each step, as a delta: a sequence's block
// table is sent in full the first time the sequence appears (or when its table was rebuilt, after
// a preemption), afterwards only the blocks appended since; each step carries just the tokens
// computed in it; sequences that finished are named once so the ranks forget them. The ranks
// rebuild the step (tokens, positions, block tables) from their mirror of these deltas.
//
// Plans also keep an idle replica's ranks alive (keepalive) and stop them (shutdown).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"
#include "worker/model/llama/llama_model.h"

namespace bmad::parallel {

struct PlanSequence {
  uint64_t seq_id = 0;
  int32_t start_pos = 0;
  int32_t logit_rows = 0;            // model::SequenceStep::logit_rows
  bool reset_table = false;          // new_blocks is the whole table, not an addition
  std::vector<int32_t> tokens;       // computed this step
  std::vector<int32_t> new_blocks;   // appended to the ranks' copy of the block table
};

struct StepPlan {
  enum class Kind : uint8_t { kStep = 1, kKeepalive = 2, kShutdown = 3 };
  Kind kind = Kind::kStep;
  uint64_t step_id = 0;
  std::vector<uint64_t> released;  // sequences the ranks forget (before this step's sequences)
  std::vector<PlanSequence> sequences;
  std::string reason;              // why, for kShutdown
};

std::string EncodeStepPlan(const StepPlan& plan);
// kInvalidArgument for bytes that are not a well-formed plan (truncated, bad kind, counts past
// the end).
Result<StepPlan> DecodeStepPlan(std::string_view bytes);

// The leader's side: remembers what the ranks hold, to send only what changed.
class StepPlanBuilder {
 public:
  // The plan for a step over `steps` (ids[i] names steps[i]'s sequence).
  StepPlan Build(std::span<const model::SequenceStep> steps, std::span<const uint64_t> ids);
  // The next plan tells the ranks to forget `id` (finished, cancelled, or preempted).
  void Release(uint64_t id);
  size_t known_sequences() const { return sent_.size(); }

 private:
  uint64_t next_step_ = 1;
  std::unordered_map<uint64_t, std::vector<int32_t>> sent_;  // block table as the ranks hold it
  std::vector<uint64_t> released_;
};

// A rank's side: applies plans and rebuilds each step.
class StepPlanMirror {
 public:
  // Applies `plan` and fills `steps` (spans into the mirror and into `plan`, valid until the
  // next Apply or until `plan` goes away). kInvalidArgument for a plan that does not fit what
  // the mirror holds (a delta for an unknown sequence): a protocol bug, never silently skipped.
  Status Apply(const StepPlan& plan, std::vector<model::SequenceStep>* steps);
  size_t known_sequences() const { return tables_.size(); }

 private:
  std::unordered_map<uint64_t, std::vector<int32_t>> tables_;
};

// Splits a step into up to `parts` micro-batches of whole sequences, balanced by token count;
// returns [begin, end) index ranges over `steps`. Every rank computes the same split.
std::vector<std::pair<size_t, size_t>> SplitMicroBatches(std::span<const model::SequenceStep> steps,
                                                         int64_t parts);

}  // namespace bmad::parallel
