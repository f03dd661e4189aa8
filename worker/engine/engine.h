// The serving engine of one replica: requests in, token chunks out, one step at a time.
//
// A step reads as its stages:
//   Plan      the scheduler picks this step's chunks (decodes first, then prefill chunks)
//   Prepare   each chunk becomes a model::SequenceStep (tokens, positions, block table)
//   Launch    the forward pass over the whole batch is issued
//   Wait      ... and its logits come back
//   Score     prompt positions computed with their logits get their log-probabilities (a
//             request's prompt_logprobs)
//   Sample    each sequence that reached its last known token samples its next one
//   Update    the scheduler records the new tokens; finished ones release their blocks
//   Emit      detokenized text (stop strings held back) goes out as RequestOutputs
//
// Overlap. On a device backend the forward pass runs while the host goes on, so the engine
// plans step n+1 between launching step n and waiting for it: the scheduler counts step n's
// chunks as computed at launch and gives each sampling sequence a pending last token, which
// step n+1 decodes. Once step n's tokens are sampled they replace the pending ones; sequences
// that finished (or were cancelled) meanwhile are dropped from step n+1, which is then launched
// and runs while step n's outputs are emitted. The tokens are the same as without overlap.
// On the CPU backend the engine's thread is one of the compute threads and the launch
// computes the step, so there is nothing to overlap and the stages run back to back.
//
// Sampling on the device. On a device backend a step whose sampling sequences need nothing but
// the draw (no penalty, no logprobs: greedy, or temperature with top-k, top-p and min-p) has its
// tokens drawn where the logits are (Backend::SampleRows, the host sampler's definition, with
// the uniform each sequence's own generator gives), and only the ids come back instead of every
// logit; other steps copy the logits out and sample on the host.
// Nothing is allocated per step once warm. Single-threaded: one thread owns the engine (the
// worker's event loop).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/proto/messages.h"
#include "common/status.h"
#include "kernels/backend.h"
#include "worker/engine/engine_metrics.h"
#include "worker/engine/output_processor.h"
#include "worker/engine/step_executor.h"
#include "worker/kv/kv_block_manager.h"
#include "worker/memory/bump_allocator.h"
#include "worker/model/kv_cache.h"
#include "worker/model/llama/llama_model.h"
#include "worker/model/tokenizer/tokenizer.h"
#include "worker/sampling/prompt_logprob.h"
#include "worker/sampling/sampler.h"
#include "worker/scheduler/scheduler.h"

namespace bmad::engine {

struct EngineRequest {
  uint64_t id = 0;
  std::vector<int32_t> prompt;
  std::vector<int32_t> generated;  // streamed by another replica before a migration
  proto::SamplingParams sampling;
  int32_t priority = 1;
  int64_t slo_ms = 0;
  // Takes the place of a copy of itself the engine ran until just now (the coordinator took the
  // replica for dead and gave the request back): admitted while draining and past
  // scheduler.max_waiting, as that copy was, instead of losing the copy's work to a refusal.
  bool replaces_copy = false;
  // When the worker took the request (the engine's clock), for a request it ends before adding
  // it (CancelUnadded); 0: now.
  int64_t received_ns = 0;
};

// One request's new output since the last step (becomes a proto::TokenChunk).
struct RequestOutput {
  uint64_t id = 0;
  std::vector<int32_t> token_ids;
  std::vector<float> logprobs;
  // With top_logprobs: each token's alternatives, token after token (proto::TokenChunk's layout).
  std::vector<int32_t> top_token_ids;
  std::vector<float> top_logprobs;
  std::string text;
  bool finished = false;
  proto::FinishReason reason = proto::FinishReason::kNone;
  std::string error;  // when reason is kError
  // Its code for the client: kInvalidArgument when the request's own parameters left no token
  // to draw (its bans and constraint together), else kInternal.
  StatusCode error_code = StatusCode::kInternal;
  std::string stop_string;   // a kStop finish by a stop string: that string
  int64_t stop_token_id = -1;  // a kStop finish by a stop_token_ids entry: that id
  int64_t token_offset = 0;  // index in the whole output of token_ids[0]
  proto::Usage usage;        // on the last output
  // With sampling.prompt_logprobs: the prompt positions computed since the last output, from
  // prompt_logprob_offset on (proto::TokenChunk's layout). An output may carry only these.
  int64_t prompt_logprob_offset = 0;
  std::vector<float> prompt_logprobs;
  std::vector<uint32_t> prompt_ranks;
  std::vector<int32_t> prompt_top_token_ids;
  std::vector<float> prompt_top_logprobs;
};

// Where the engine's steps spent their time since it was made (non-empty steps only): the
// forward pass (Execute) against everything around it on the host (schedule, prepare, sample,
// update, emit). Of the host stages, only planning (schedule, prepare) could overlap the step
// before while sampling happens on the host: step n+1's inputs are step n's sampled tokens.
// With overlap, planning step n+1 happens while step n runs: plan_nanos then counts time the
// device was busy, and overlapped_steps the steps whose successor was planned during them.
struct StepTiming {
  uint64_t steps = 0;
  uint64_t overlapped_steps = 0;
  uint64_t device_sampled_steps = 0;  // whose tokens were drawn on the device
  int64_t plan_nanos = 0;     // schedule and prepare: what does not need the step before's tokens
  int64_t execute_nanos = 0;  // launching the forward pass and waiting for it
  int64_t total_nanos = 0;
  int64_t host_nanos() const { return total_nanos - execute_nanos; }
};

struct EngineOptions {
  SchedulerConfig scheduler;  // overlap_steps: see the top of this file
  int64_t block_size = 16;
  int64_t num_blocks = 0;       // KV blocks (block 0 reserved)
  bool prefix_caching = true;
  int64_t context_length = 0;   // 0: the model's
  // Per-step activations come from here when set (reset at the start of every step).
  memory::BumpAllocator* workspace = nullptr;
  // Runs each step's forward pass when set (a replica split over ranks); otherwise the engine
  // calls the model itself. Not owned.
  StepExecutor* executor = nullptr;
};

class Engine {
 public:
  // `metrics` may be null (tests, benchmarks).
  Engine(const EngineOptions& options, model::LlamaModel& model, model::KvCache& cache,
         const tokenizer::Tokenizer& tokenizer, kernels::Backend& backend, const Clock& clock,
         EngineMetrics* metrics);
  ~Engine();

  // Validates and queues a request. kInvalidArgument naming the problem (sampling parameters,
  // token ids outside the vocabulary, empty prompt), kOutOfRange (prompt longer than the context),
  // kResourceExhausted (queue full), kFailedPrecondition (draining).
  Status Add(EngineRequest request);
  // Drops a request at once (its KV blocks are freed); returns its final output, or false when
  // the request is unknown.
  bool Cancel(uint64_t id, RequestOutput* final_output);
  // Drops a request that a newer assignment of the same id replaces (its blocks are freed):
  // not a finish, so no output and nothing counted as finished; the replacement, when it ends,
  // is the request's one finish. False when the request is unknown.
  bool DropReplaced(uint64_t id);
  // Ends a request that was never added (a replacement waiting for the step in flight to end):
  // its final output, counted as a cancelled finish as Cancel counts one (its end-to-end latency
  // from request.received_ns).
  RequestOutput CancelUnadded(const EngineRequest& request);
  // Runs one step; appends new outputs (empty when there was nothing to do). An error means the
  // replica cannot compute any more (its executor failed); a malformed step only fails its
  // requests.
  Status Step(std::vector<RequestOutput>* outputs);

  bool HasWork() const { return scheduler_.HasWork() || batches_[current_].in_flight; }
  bool overlaps_steps() const { return overlap_; }
  void StartDraining() { draining_ = true; }
  bool draining() const { return draining_; }
  std::vector<uint64_t> ActiveRequestIds() const;
  proto::LoadStats Load() const;
  // Allocations from the OS/malloc by the engine's memory since start: the memory subsystem's
  // fallbacks, backend scratch growth and model workspace growth. Flat once warm.
  uint64_t SystemAllocations() const;
  const kv::KvBlockManager& kv() const { return kv_; }
  const sched::Scheduler& scheduler() const { return scheduler_; }
  int64_t context_length() const { return context_length_; }
  const StepTiming& step_timing() const { return timing_; }

 private:
  struct RequestState;
  // One planned step and the buffers it runs from; two alternate when steps overlap.
  struct StepBatch {
    sched::SchedulerOutput plan;
    std::vector<model::SequenceStep> steps;
    std::vector<uint64_t> ids;
    std::vector<const sched::ScheduledChunk*> sampling;  // into plan.chunks
    std::vector<int64_t> sample_rows;  // per entry of `sampling`: its row of the logits
    // Chunks computing prompt positions with their logits (ScheduledChunk::prompt_logits), and
    // the row of their first token.
    std::vector<std::pair<const sched::ScheduledChunk*, int64_t>> prompt_chunks;
    bool sampled_on_device = false;  // every sequence that samples is drawn on the device
                                     // (row_sampling): only the ids come back
    std::vector<kernels::RowSampling> row_sampling;  // one per entry of `sampling`
    Status launched;
    bool in_flight = false;
  };

  bool Plan(StepBatch& batch);
  void PrepareBatch(StepBatch& batch);
  void Launch(StepBatch& batch);
  Status Wait(StepBatch& batch);
  void FailBatch(const StepBatch& batch, const Status& why, std::vector<RequestOutput>* outputs);
  void DropGoneChunks(StepBatch& batch);
  void Forget(uint64_t id);
  void Sample(const StepBatch& batch, std::vector<RequestOutput>* outputs);
  void ScorePrompts(const StepBatch& batch, std::vector<RequestOutput>* outputs);
  void UpdateGauges();
  float Utilization(int64_t now) const;
  void FinishMetrics(const RequestState& r, proto::FinishReason reason);
  void FinishMetrics(proto::FinishReason reason, int64_t arrival_ns, size_t prompt_tokens, size_t generated_tokens);

  EngineOptions options_;
  model::LlamaModel& model_;
  model::KvCache& cache_;
  const tokenizer::Tokenizer& tokenizer_;
  // Every token's text, built for the first response_format json_object request.
  std::shared_ptr<const sampling::TokenTexts> token_texts_;
  kernels::Backend& backend_;
  const Clock& clock_;
  EngineMetrics* metrics_;
  int64_t context_length_;
  kv::KvBlockManager kv_;
  sched::Scheduler scheduler_;
  std::unordered_map<uint64_t, std::unique_ptr<RequestState>> requests_;
  // What a copy dropped for a replacement had counted (until its replacement is added or
  // cancelled): the replacement does not count it again.
  struct CountedMetrics {
    bool admission = false;
    bool first_token = false;
  };
  std::unordered_map<uint64_t, CountedMetrics> replaced_counts_;
  bool draining_ = false;
  uint64_t default_seed_;

  // Step buffers, reused. One step is in flight at most, so one logits buffer serves both
  // batches: step n's logits are sampled before step n+1 is launched. Page-aligned so that a
  // device backend can pin it and copy into it without blocking.
  bool overlap_ = false;
  StepBatch batches_[2];
  int current_ = 0;  // the batch launched first
  std::vector<sched::SampledToken> sampled_;
  std::vector<RequestState*> sampling_rows_;                  // Sample(): each row's request
  std::vector<Result<sampling::SampleResult>> host_draws_;    // Sample(): each row's host draw
  // ScorePrompts(): each prompt position to score, and each request's run of them.
  struct ScoreJob {
    RequestState* request;
    int64_t row;       // of the logits
    int64_t position;  // in the prompt
  };
  struct ScoredChunk {
    RequestState* request;
    int64_t first, last;  // prompt positions scored
    size_t job;           // the first one's entry in score_jobs_
  };
  std::vector<ScoreJob> score_jobs_;
  std::vector<ScoredChunk> scored_chunks_;
  std::vector<Result<sampling::PromptTokenLogprob>> score_results_;
  std::vector<uint64_t> last_samples_;  // sequences whose sample in the launched step is their last
  StepTiming call_timing_;              // this Step() call's, kept if a step completes in it
  int64_t returned_in_flight_at_ = 0;   // when Step() last returned with a step on the device
  std::unique_ptr<float, void (*)(void*)> logits_{nullptr, &std::free};
  size_t logits_bytes_ = 0;
  bool logits_pinned_ = false;
  // Device backends: steps whose sequences all need nothing but the draw get their tokens drawn
  // on the device, and only the ids are copied back (pinned like the logits).
  bool sample_on_device_ = false;
  std::unique_ptr<int32_t, void (*)(void*)> device_tokens_{nullptr, &std::free};
  size_t device_tokens_bytes_ = 0;
  bool device_tokens_pinned_ = false;
  uint64_t buffer_growths_ = 0;
  uint64_t generated_total_ = 0;
  int64_t busy_nanos_ = 0;       // recent compute time, for utilization
  int64_t window_start_nanos_ = 0;
  int64_t last_busy_end_nanos_ = 0;  // when the last Step call returned
  float utilization_ = 0;
  StepTiming timing_;
};

}  // namespace bmad::engine
