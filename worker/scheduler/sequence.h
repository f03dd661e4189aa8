// What the scheduler knows about one request: its tokens, how many are computed (in the KV
// cache), and what decides its turn (priority class, deadline, arrival, admission order).
#pragma once

#include <cstdint>
#include <vector>

#include "common/block_hash.h"

namespace bmad::sched {

struct SequenceRequest {
  uint64_t id = 0;
  std::vector<int32_t> prompt;
  std::vector<int32_t> generated;  // already generated elsewhere (a migrated request): context too
  int32_t priority = 1;            // class; 0 is the most urgent
  int64_t slo_ms = 0;              // deadline after arrival; 0: the scheduler's default
  int64_t arrival_ms = 0;          // on the scheduler's clock
  // Takes the place of a copy of itself that was just removed (the coordinator gave the request
  // back): admitted past max_waiting, as that copy was.
  bool replaces_copy = false;
  // The prompt's own log-probabilities are wanted: every prompt position is computed with its
  // logits (no prefix-cache reuse before them), in chunks of at most
  // scheduler.max_prompt_logprob_tokens.
  bool prompt_logprobs = false;
  // Its prompt's block chain starts here (RootBlockHash of its cache_salt): it shares cached
  // blocks only with requests of the same root.
  BlockHash prefix_root = kRootBlockHash;
};

enum class SequenceState { kWaiting, kRunning };

// The last token of a sequence whose step is launched but not yet sampled. The engine plans the
// next step over it (a decode of that position) and writes the sampled id in its place before
// that step runs, so the model never sees it.
inline constexpr int32_t kPendingToken = -1;

struct Sequence {
  uint64_t id = 0;
  std::vector<int32_t> tokens;     // every known token: prompt, then generated
  int64_t num_prompt_tokens = 0;   // the original prompt's length
  int64_t num_computed = 0;        // leading tokens whose KV is cached
  int32_t priority = 1;
  int64_t arrival_ms = 0;
  int64_t waiting_since_ms = 0;    // arrival, or its latest preemption: the max-wait guard's clock
  int64_t waited_before_ms = 0;    // time waiting before its latest admission (aging's clock,
                                   // with the current wait; time running is not waiting)
  int64_t deadline_ms = 0;
  uint64_t admitted_order = 0;     // larger = admitted more recently
  int64_t preemptions = 0;
  int64_t reused_prefix_tokens = 0;  // prefix-cache hit at the latest admission
  SequenceState state = SequenceState::kWaiting;
  bool token_pending = false;      // tokens.back() is kPendingToken
  uint64_t launched_step = 0;      // the latest step launched with a chunk of it
  bool in_static_batch = false;    // policy static: a member of the batch being run
  bool admitted_starving = false;  // its latest admission was the max-wait guard's (it had waited
                                   // past max_wait_ms): preempted only after the others
  // Its KV blocks went back to the cache when the step with its last token was launched (the
  // engine knew it would end there): planning the next step while that one runs, they are free
  // for the others. Running still, with nothing to compute, until its token is sampled.
  bool kv_released = false;
  bool prompt_logprobs = false;      // SequenceRequest's
  BlockHash prefix_root = kRootBlockHash;  // SequenceRequest's
  // Prompt positions (counted from 1: position 0 has no log-probability) whose logits a launched
  // step computed. Kept across preemptions: a recompute may reuse cached blocks below them.
  int64_t prompt_logprobs_done = 0;

  int64_t remaining() const { return static_cast<int64_t>(tokens.size()) - num_computed; }
  // Prompt positions whose logits are still to be computed.
  bool prompt_logits_pending() const { return prompt_logprobs && prompt_logprobs_done < num_prompt_tokens - 1; }
  bool decoding() const { return remaining() == 1 && num_computed > 0; }
};

}  // namespace bmad::sched
