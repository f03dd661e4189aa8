#include "worker/scheduler/scheduler.h"

#include <algorithm>
#include <cstdint>

#include "common/effective_priority.h"

namespace bmad::sched {

namespace {

// The tokens a sequence may find cached blocks for: all of them, except while its prompt's
// log-probabilities are pending, when only blocks before the first position whose logits are
// still needed may be reused (StartSequence reuses blocks of all but the span's last token).
std::span<const int32_t> ReusableSpan(const Sequence& seq) {
  const std::span<const int32_t> all(seq.tokens);
  if (!seq.prompt_logits_pending()) return all;
  return all.first(static_cast<size_t>(std::min<int64_t>(seq.prompt_logprobs_done + 1, seq.tokens.size())));
}

}  // namespace

Scheduler::Scheduler(const SchedulerConfig& config, kv::KvBlockManager& kv, const Clock& clock)
    : config_(config), kv_(kv), clock_(clock) {}

Status Scheduler::Add(SequenceRequest r) {
  if (r.prompt.empty()) return InvalidArgument("request " + std::to_string(r.id) + " has an empty prompt");
  if (r.prompt_logprobs && config_.max_prompt_logprob_tokens == 0) {
    return InvalidArgument("request " + std::to_string(r.id) + " asks for its prompt's log-probabilities, which "
                           "scheduler.max_prompt_logprob_tokens 0 turns off");
  }
  if (sequences_.count(r.id)) {
    return InvalidArgument("request " + std::to_string(r.id) + " is already scheduled");
  }
  if (!r.replaces_copy && static_cast<int64_t>(waiting_.size()) >= config_.max_waiting) {
    return ResourceExhausted("replica queue is full (" + std::to_string(waiting_.size()) +
                             " requests waiting)");
  }
  auto seq = std::make_unique<Sequence>();
  seq->id = r.id;
  seq->num_prompt_tokens = static_cast<int64_t>(r.prompt.size());
  seq->tokens = std::move(r.prompt);
  seq->tokens.insert(seq->tokens.end(), r.generated.begin(), r.generated.end());
  seq->priority = r.priority;
  seq->prompt_logprobs = r.prompt_logprobs;
  seq->prefix_root = r.prefix_root;
  seq->arrival_ms = r.arrival_ms;
  seq->waiting_since_ms = r.arrival_ms;
  seq->deadline_ms = r.arrival_ms + (r.slo_ms > 0 ? r.slo_ms : config_.default_slo_ms);
  seq->state = SequenceState::kWaiting;
  waiting_.push_back(seq.get());
  sequences_.emplace(r.id, std::move(seq));
  return Status::Ok();
}

bool Scheduler::Starving(const Sequence& seq, int64_t now_ms) const {
  // Time waiting, not time since arrival: a sequence preempted after running for longer than
  // max_wait_ms has not starved, and taking it for starving would let it jump every queue and
  // shield it from preemption by more urgent ones.
  return now_ms - seq.waiting_since_ms >= config_.max_wait_ms;
}

double Scheduler::EffectivePriority(const Sequence& seq, int64_t now_ms) const {
  // Ranks the waiting (PickVictim ranks the running by what does not drift), by the rule the
  // coordinator's queue follows too (common/effective_priority.h).
  int64_t waited_ms = seq.waited_before_ms;
  if (seq.state == SequenceState::kWaiting) waited_ms += now_ms - seq.waiting_since_ms;
  return bmad::EffectivePriority({seq.priority, waited_ms, seq.arrival_ms, seq.deadline_ms}, now_ms,
                                 config_.priority_decay);
}

void Scheduler::SortWaiting(int64_t now_ms) {
  if (config_.policy != SchedulerPolicy::kContinuous) {
    std::stable_sort(waiting_.begin(), waiting_.end(), [](const Sequence* a, const Sequence* b) {
      return a->arrival_ms < b->arrival_ms;
    });
    return;
  }
  std::stable_sort(waiting_.begin(), waiting_.end(), [&](const Sequence* a, const Sequence* b) {
    const bool sa = Starving(*a, now_ms), sb = Starving(*b, now_ms);
    if (sa != sb) return sa;                                  // starving first
    if (sa) return a->waiting_since_ms < b->waiting_since_ms;  // longest waiting first
    const double pa = EffectivePriority(*a, now_ms), pb = EffectivePriority(*b, now_ms);
    if (pa != pb) return pa > pb;
    return a->arrival_ms < b->arrival_ms;
  });
}

Sequence* Scheduler::PickVictim(std::span<Sequence* const> candidates) const {
  Sequence* victim = nullptr;
  for (Sequence* s : candidates) {
    if (!victim) {
      victim = s;
      continue;
    }
    if (config_.policy == SchedulerPolicy::kContinuous) {
      if (s->admitted_starving != victim->admitted_starving) {
        if (victim->admitted_starving) victim = s;  // the guard's admissions go last
        continue;
      }
      // By what does not drift while a sequence runs: its class, then its deadline (the most
      // slack goes first). Aging and deadline pressure rank the waiting; here they would grow
      // with running time and make a low class that has run for seconds outrank a new urgent
      // request, which would then be preempted again and again.
      if (s->priority != victim->priority) {
        if (s->priority > victim->priority) victim = s;
        continue;
      }
      if (s->deadline_ms != victim->deadline_ms) {
        if (s->deadline_ms > victim->deadline_ms) victim = s;
        continue;
      }
    }
    if (s->admitted_order > victim->admitted_order) victim = s;  // most recently admitted
  }
  return victim;
}

void Scheduler::Requeue(Sequence* seq, int64_t now_ms) {
  seq->num_computed = 0;
  seq->state = SequenceState::kWaiting;
  seq->waiting_since_ms = now_ms;
  ++seq->preemptions;
  running_.erase(std::find(running_.begin(), running_.end(), seq));
  waiting_.push_back(seq);
}

void Scheduler::Preempt(Sequence* seq, SchedulerOutput* out, int64_t now_ms) {
  kv_.Free(seq->id);
  Requeue(seq, now_ms);
  ++preemptions_total_;
  out->preempted.push_back(seq->id);
}

void Scheduler::Unplan(uint64_t id, SchedulerOutput* out, int64_t* budget, int64_t* slots) {
  auto chunk = std::find_if(out->chunks.begin(), out->chunks.end(),
                            [&](const ScheduledChunk& c) { return c.seq_id == id; });
  if (chunk == out->chunks.end()) return;
  *budget += chunk->num_tokens;
  *slots += 1;
  if (chunk->prompt_logits) prompt_rows_left_ += chunk->num_tokens;
  out->chunks.erase(chunk);
}

std::optional<ScheduledChunk> Scheduler::ChunkFor(const Sequence& seq, int64_t n) const {
  ScheduledChunk c{seq.id, seq.num_computed, n, false};
  if (seq.prompt_logits_pending()) {
    if (prompt_rows_left_ <= 0) return std::nullopt;
    c.num_tokens = std::min(n, prompt_rows_left_);
    c.prompt_logits = true;
  }
  c.samples = c.start + c.num_tokens == static_cast<int64_t>(seq.tokens.size());
  c.logit_rows = c.prompt_logits ? c.num_tokens : (c.samples ? 1 : 0);
  return c;
}

void Scheduler::Plan(const ScheduledChunk& chunk, SchedulerOutput* out, int64_t* budget, int64_t* slots) {
  out->chunks.push_back(chunk);
  *budget -= chunk.num_tokens;
  *slots -= 1;
  if (chunk.prompt_logits) prompt_rows_left_ -= chunk.num_tokens;
}

void Scheduler::ScheduleRunning(SchedulerOutput* out, int64_t* budget, int64_t* slots,
                                int64_t now_ms) {
  // Decodes first (one token each, latency-critical), then prompts being prefilled.
  std::vector<Sequence*> order = running_;
  std::stable_sort(order.begin(), order.end(), [](const Sequence* a, const Sequence* b) {
    if (a->decoding() != b->decoding()) return a->decoding();
    return a->admitted_order < b->admitted_order;
  });
  for (size_t i = 0; i < order.size(); ++i) {
    Sequence* seq = order[i];
    if (seq->state != SequenceState::kRunning) continue;  // preempted earlier in this loop
    if (seq->remaining() <= 0) continue;  // nothing to compute (cannot happen; be safe)
    if (*budget <= 0 || *slots <= 0) break;
    const std::optional<ScheduledChunk> chunk = ChunkFor(*seq, std::min(seq->remaining(), *budget));
    if (!chunk) continue;  // its prompt's rows wait for the next step
    const int64_t n = chunk->num_tokens;
    bool fits = kv_.Reserve(seq->id, seq->num_computed + n);
    while (!fits) {
      // Victims: every running sequence, this one included. One already given a chunk this
      // step loses it (its tokens and slot go back to the budget): otherwise an urgent prompt
      // being prefilled could only evict itself while a low-priority decode, planned first,
      // kept running.
      std::vector<Sequence*> candidates;
      for (Sequence* s : order) {
        if (s->state == SequenceState::kRunning && !s->kv_released) candidates.push_back(s);
      }
      Sequence* victim = PickVictim(candidates);
      Unplan(victim->id, out, budget, slots);
      Preempt(victim, out, now_ms);
      if (victim == seq) break;
      fits = kv_.Reserve(seq->id, seq->num_computed + n);
    }
    if (!fits) continue;
    Plan(*chunk, out, budget, slots);
  }
}

bool Scheduler::WaitsForSharedPrefix(const Sequence& seq) const {
  if (!kv_.prefix_caching()) return false;
  const int64_t block = kv_.block_size();
  // Its last token is always computed (its logits are needed), so only blocks before it count;
  // nor, while its prompt's log-probabilities are pending, blocks past those computed.
  const int64_t reusable = static_cast<int64_t>(ReusableSpan(seq).size()) - 1;
  if (reusable < block) return false;
  for (const Sequence* r : running_) {
    if (r->prefix_root != seq.prefix_root) continue;  // another cache_salt: nothing to share
    const int64_t computed_blocks = r->num_computed / block;  // registered already
    const int64_t limit = std::min<int64_t>(reusable, static_cast<int64_t>(r->tokens.size()));
    if (limit / block <= computed_blocks) continue;  // nothing it has yet to compute is shareable
    const auto first_difference =
        std::mismatch(seq.tokens.begin(), seq.tokens.begin() + limit, r->tokens.begin()).first;
    if ((first_difference - seq.tokens.begin()) / block > computed_blocks) return true;
  }
  return false;
}

void Scheduler::AdmitWaiting(SchedulerOutput* out, int64_t* budget, int64_t* slots,
                             int64_t now_ms) {
  SortWaiting(now_ms);
  size_t admitted = 0;
  for (Sequence* seq : waiting_) {
    if (*budget <= 0 || *slots <= 0) break;
    // Static batching admits its batch's members only (a preempted one rejoins), however many
    // steps their prompts take.
    if (config_.policy == SchedulerPolicy::kStatic && !seq->in_static_batch) continue;
    if (WaitsForSharedPrefix(*seq)) {
      ++shared_prefix_waits_total_;
      continue;
    }
    if (seq->prompt_logits_pending() && prompt_rows_left_ <= 0) continue;  // its rows, next step
    Result<int64_t> reused = kv_.StartSequence(
        seq->id, ReusableSpan(*seq),
        seq->preemptions > 0 ? kv::KvBlockManager::PrefixQuery::kRecompute : kv::KvBlockManager::PrefixQuery::kCount,
        seq->prefix_root);
    if (!reused.ok()) break;  // cannot happen for a waiting sequence; stop admitting to be safe
    seq->num_computed = *reused;
    const ScheduledChunk chunk = *ChunkFor(*seq, std::min(seq->remaining(), *budget));
    const int64_t n = chunk.num_tokens;
    if (!kv_.Reserve(seq->id, seq->num_computed + n)) {
      kv_.CancelStart(seq->id);  // its reused prefix blocks go back to the cache
      seq->num_computed = 0;
      break;  // admission never preempts; keep strict priority order
    }
    seq->reused_prefix_tokens = *reused;
    seq->admitted_starving = Starving(*seq, now_ms);
    seq->waited_before_ms += now_ms - seq->waiting_since_ms;
    seq->state = SequenceState::kRunning;
    seq->admitted_order = next_admission_++;
    running_.push_back(seq);
    Plan(chunk, out, budget, slots);
    ++admitted;
  }
  if (admitted > 0) {
    waiting_.erase(std::remove_if(waiting_.begin(), waiting_.end(),
                                  [](const Sequence* s) { return s->state == SequenceState::kRunning; }),
                   waiting_.end());
  }
}

SchedulerOutput Scheduler::Schedule() {
  SchedulerOutput out;
  out.step = ++step_;
  const int64_t now_ms = clock_.NowMillis();
  int64_t budget = config_.max_batch_tokens;
  int64_t slots = config_.max_seqs;
  prompt_rows_left_ = config_.max_prompt_logprob_tokens;
  if (config_.policy == SchedulerPolicy::kStatic && static_batch_members_ == 0) {
    // The previous batch has completely finished: the next is the first max_seqs waiting.
    SortWaiting(now_ms);
    for (Sequence* seq : waiting_) {
      if (static_batch_members_ == config_.max_seqs) break;
      seq->in_static_batch = true;
      ++static_batch_members_;
    }
  }
  ScheduleRunning(&out, &budget, &slots, now_ms);
  // A step that preempted admits nothing: the blocks it freed belong to sequences already
  // running (they grow again next step), and a waiting sequence admitted into them would be
  // of lower priority than the victim, which sits out this step, and the next victim.
  if (out.preempted.empty()) {
    AdmitWaiting(&out, &budget, &slots, now_ms);
  }
  for (const ScheduledChunk& c : out.chunks) out.num_tokens += c.num_tokens;
  return out;
}

void Scheduler::Release(Sequence* seq) {
  if (seq->in_static_batch) --static_batch_members_;
  if (!seq->kv_released) kv_.Free(seq->id);
  auto& list = seq->state == SequenceState::kRunning ? running_ : waiting_;
  list.erase(std::find(list.begin(), list.end(), seq));
  sequences_.erase(seq->id);
}

void Scheduler::OnStepDone(const SchedulerOutput& output, std::span<const SampledToken> sampled) {
  OnStepLaunched(output);
  OnTokensSampled(sampled);
}

void Scheduler::OnStepLaunched(const SchedulerOutput& output, std::span<const uint64_t> last_samples) {
  for (const ScheduledChunk& c : output.chunks) {
    auto it = sequences_.find(c.seq_id);
    if (it == sequences_.end()) continue;  // removed since it was planned
    Sequence* seq = it->second.get();
    if (seq->state != SequenceState::kRunning || seq->num_computed != c.start) continue;
    seq->num_computed += c.num_tokens;
    seq->launched_step = output.step;
    if (c.prompt_logits) {
      seq->prompt_logprobs_done = std::max(seq->prompt_logprobs_done,
                                           std::min(seq->num_computed, seq->num_prompt_tokens - 1));
    }
    // Hashes only the blocks filled by computed tokens, never the pending one after them.
    kv_.MarkComputed(seq->id, seq->tokens, seq->num_computed);
    const bool last = std::find(last_samples.begin(), last_samples.end(), c.seq_id) != last_samples.end();
    if (c.samples && !seq->token_pending && !last) {
      seq->tokens.push_back(kPendingToken);
      seq->token_pending = true;
    }
    if (c.samples && last && seq->remaining() == 0) {
      // It ends with this step: its blocks (registered for prefix reuse already) go back to the
      // cache now, for the step planned while this one runs. That step runs after this one on
      // the device, as with any sequence preempted meanwhile.
      kv_.Free(seq->id);
      seq->kv_released = true;
    }
  }
  for (Sequence* seq : running_) {
    if (!seq->kv_released) kv_.SetHeldTokens(seq->id, seq->num_computed);
  }
}

void Scheduler::OnTokensSampled(std::span<const SampledToken> sampled) {
  for (const SampledToken& s : sampled) {
    auto it = sequences_.find(s.seq_id);
    if (it == sequences_.end()) continue;
    Sequence* seq = it->second.get();
    if (s.finished) {
      Release(seq);
      continue;
    }
    if (seq->token_pending) {
      seq->tokens.back() = s.token;
      seq->token_pending = false;
    } else {
      seq->tokens.push_back(s.token);  // was expected to be its last; keep it all the same
    }
    if (seq->kv_released) {
      // Its blocks are gone: it computes its context again, as a preempted sequence does (and,
      // counted as one, queries the prefix cache as a recompute).
      seq->kv_released = false;
      Requeue(seq, clock_.NowMillis());
    }
  }
}

bool Scheduler::Remove(uint64_t id) {
  auto it = sequences_.find(id);
  if (it == sequences_.end()) return false;
  Release(it->second.get());
  return true;
}

const Sequence* Scheduler::Find(uint64_t id) const {
  auto it = sequences_.find(id);
  return it == sequences_.end() ? nullptr : it->second.get();
}

SchedulerStats Scheduler::stats() const {
  return SchedulerStats{static_cast<int64_t>(running_.size()), static_cast<int64_t>(waiting_.size()),
                        preemptions_total_, step_, shared_prefix_waits_total_};
}

}  // namespace bmad::sched
