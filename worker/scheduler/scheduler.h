// Iteration-level continuous batching: every step has a token budget (max_batch_tokens) and a
// sequence cap (max_seqs). Running sequences are served first — decodes, then the next chunk of
// prompts already being prefilled — and the rest of the budget admits waiting sequences by
// effective priority, their prompts prefilled in chunks so a long prompt never stalls decodes.
// There are no prefill and decode phases: each sequence's num_computed chases its token count.
//
// Priority (policy `continuous`): a request's effective priority grows with its class (0 most
// urgent), with its waiting time (priority_decay per second) and as its deadline nears; a
// request that has waited longer than max_wait_ms goes before every other (oldest first), so
// nothing starves. `fcfs` admits in arrival order. `static` forms a batch (the first max_seqs
// waiting, in arrival order) only when none is running, admits its members as the token budget
// allows (prompts longer than one step's budget take several), and admits nobody else until the
// whole batch has finished: the FCFS static-batching baseline, whose batch is not capped by one
// step's token budget.
//
// Out of KV blocks: a running sequence is preempted, the lowest class, then the latest deadline,
// then the most recently admitted (by what does not drift while it runs; even one already
// planned into this step, which then loses its chunk): its blocks are freed
// and it waits again, to be recomputed from its tokens later (its prefix may still be cached).
// A sequence the max-wait guard admitted is the victim only when every candidate was so
// admitted: otherwise a low-priority request would be let in by the guard and thrown out by the
// next urgent one, again and again, and starve after all.
// Admission never preempts, and a step that preempted admits nothing (as in vLLM): memory is
// short, and a sequence admitted into the victim's blocks would be the next victim.
//
// Shared prefixes in flight: a waiting sequence whose prompt starts with full blocks that a
// running sequence has yet to compute (the n choices of one request, a burst of requests with
// one system prompt) is not admitted until they are computed, whatever its turn: admitted at the
// same time, each would compute the same blocks; a step later it reuses them from the prefix
// cache. Sequences behind it are admitted meanwhile. The wait ends when the running sequence
// has passed the shared blocks (it computes its prompt in order), finishes or is preempted.
//
// Pure logic over the KV block manager and a clock; single-threaded (the engine's thread).
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/config/config.h"
#include "common/status.h"
#include "worker/kv/kv_block_manager.h"
#include "worker/scheduler/sequence.h"

namespace bmad::sched {

// One sequence's share of a step.
struct ScheduledChunk {
  uint64_t seq_id = 0;
  int64_t start = 0;       // position of the first token computed
  int64_t num_tokens = 0;
  bool samples = false;    // reaches the last known token: a new token is sampled after it
  // Rows of logits the step returns for it, from its last token back: 1 when it samples; its
  // whole chunk when it computes prompt positions whose log-probabilities are wanted
  // (prompt_logits; the last row then also samples, if it does).
  int64_t logit_rows = 0;
  bool prompt_logits = false;
};

struct SchedulerOutput {
  uint64_t step = 0;
  std::vector<ScheduledChunk> chunks;
  std::vector<uint64_t> preempted;  // moved back to waiting (KV freed) while planning this step
  int64_t num_tokens = 0;
  bool empty() const { return chunks.empty(); }
};

// What executing a chunk that samples produced.
struct SampledToken {
  uint64_t seq_id = 0;
  int32_t token = -1;
  bool finished = false;  // the engine's stop conditions say the sequence is done
};

struct SchedulerStats {
  int64_t running = 0;
  int64_t waiting = 0;
  uint64_t preemptions_total = 0;
  uint64_t steps_total = 0;
  // Admissions put off for a step because a running sequence was computing their prefix.
  uint64_t shared_prefix_waits_total = 0;
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, kv::KvBlockManager& kv, const Clock& clock);

  // Queues a request. kInvalidArgument (empty prompt, duplicate id), kResourceExhausted (more
  // than max_waiting requests waiting).
  Status Add(SequenceRequest request);

  // Plans the next step (empty when there is nothing to run or nothing fits).
  SchedulerOutput Schedule();

  // Records what the step computed: every chunk's tokens are now cached; chunks that sampled
  // append their token (or release the sequence when finished). `sampled` holds one entry per
  // chunk with samples == true, in any order. The same as OnStepLaunched then OnTokensSampled.
  void OnStepDone(const SchedulerOutput& output, std::span<const SampledToken> sampled);

  // The two halves of OnStepDone, for an engine that plans step n+1 while step n runs.
  // OnStepLaunched: step n is on its way; its chunks count as computed (their KV is written
  // before any later step reads it, the backend runs steps in order) and each chunk that samples
  // appends kPendingToken, so the next Schedule() plans a decode over it. OnTokensSampled: the
  // tokens came back; each replaces its sequence's pending token, or releases the sequence
  // when finished. Sequences removed or preempted in between are handled.
  // `last_samples`: sequences whose token sampled in this step is certainly their last (their
  // length limit): they get no pending token, so the next step plans nothing for them, and their
  // KV blocks go back to the cache at once (Sequence::kv_released), so the next step's plan can
  // use them instead of preempting another sequence for want of them.
  void OnStepLaunched(const SchedulerOutput& output, std::span<const uint64_t> last_samples = {});
  void OnTokensSampled(std::span<const SampledToken> sampled);

  // Releases a sequence at once, waiting or running (cancel, error). False when unknown.
  bool Remove(uint64_t id);

  const Sequence* Find(uint64_t id) const;
  std::span<const kv::BlockId> BlockTable(uint64_t id) const { return kv_.BlockTable(id); }
  SchedulerStats stats() const;
  bool HasWork() const { return !running_.empty() || !waiting_.empty(); }
  const SchedulerConfig& config() const { return config_; }

  // The order key of a waiting sequence (exposed for tests): higher goes first.
  double EffectivePriority(const Sequence& seq, int64_t now_ms) const;

 private:
  bool Starving(const Sequence& seq, int64_t now_ms) const;
  void SortWaiting(int64_t now_ms);
  // The sequence to preempt: a guard-admitted one last, then the lowest class, the latest
  // deadline, the most recently admitted.
  Sequence* PickVictim(std::span<Sequence* const> candidates) const;
  // Back to the waiting queue to compute its context again; its KV blocks are given back already.
  void Requeue(Sequence* seq, int64_t now_ms);
  void Preempt(Sequence* seq, SchedulerOutput* out, int64_t now_ms);
  // Takes back the chunk `id` was given in the step being planned, if any.
  void Unplan(uint64_t id, SchedulerOutput* out, int64_t* budget, int64_t* slots);
  // The chunk `seq` gets from `start` with up to `n` tokens (n > 0), within the step's budget of
  // prompt log-probability rows (prompt_rows_left_); nullopt when that budget is spent.
  std::optional<ScheduledChunk> ChunkFor(const Sequence& seq, int64_t n) const;
  // Takes a planned chunk's share of the step's budgets.
  void Plan(const ScheduledChunk& chunk, SchedulerOutput* out, int64_t* budget, int64_t* slots);
  void ScheduleRunning(SchedulerOutput* out, int64_t* budget, int64_t* slots, int64_t now_ms);
  void AdmitWaiting(SchedulerOutput* out, int64_t* budget, int64_t* slots, int64_t now_ms);
  // Whether a running sequence will compute, in this step or a later one, full blocks that
  // `seq` could reuse (see "Shared prefixes in flight" above).
  bool WaitsForSharedPrefix(const Sequence& seq) const;
  void Release(Sequence* seq);

  SchedulerConfig config_;
  kv::KvBlockManager& kv_;
  const Clock& clock_;
  std::unordered_map<uint64_t, std::unique_ptr<Sequence>> sequences_;
  std::vector<Sequence*> running_;  // admission order
  std::vector<Sequence*> waiting_;
  uint64_t next_admission_ = 1;
  // Policy static: members of the current batch (Sequence::in_static_batch), running or
  // waiting (a preempted member waits to rejoin); the next batch forms when none is left.
  int64_t static_batch_members_ = 0;
  uint64_t step_ = 0;
  uint64_t preemptions_total_ = 0;
  uint64_t shared_prefix_waits_total_ = 0;
  int64_t prompt_rows_left_ = 0;  // in the step being planned (scheduler.max_prompt_logprob_tokens)
};

}  // namespace bmad::sched
