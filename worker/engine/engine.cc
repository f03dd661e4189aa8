#include "worker/engine/engine.h"

#include <algorithm>
#include <cstdlib>
#include <new>
#include <optional>
#include <random>

#include "common/block_hash.h"
#include "worker/memory/system_allocations.h"
#include "worker/sampling/sampling_params_validation.h"

namespace bmad::engine {

namespace {

// The model's context, or the configured one if shorter.
int64_t ConfiguredContext(const EngineOptions& o, int64_t trained) {
  return o.context_length > 0 ? std::min(o.context_length, trained) : trained;
}

// ... and never more than the KV cache holds: a sequence longer than the whole cache could never
// run, and would preempt itself forever. As in vLLM, max_model_len fits in the cache; the worker
// reports it to the coordinator.
int64_t ContextLength(const EngineOptions& o, int64_t trained) {
  const int64_t configured = ConfiguredContext(o, trained);
  const int64_t cache_tokens = (o.num_blocks - 1) * o.block_size;
  return cache_tokens > 0 ? std::min(configured, cache_tokens) : configured;
}

// A step refused as malformed fails its requests; any other error stops the replica.
bool Malformed(const Status& s) {
  return s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kOutOfRange;
}

// The last output of a cancelled request: after the `generated` tokens it has, nothing more.
RequestOutput CancelledOutput(uint64_t id, size_t prompt, size_t generated, size_t cached, std::string text) {
  RequestOutput out;
  out.id = id;
  out.text = std::move(text);
  out.finished = true;
  out.reason = proto::FinishReason::kCancelled;
  out.token_offset = static_cast<int64_t>(generated);
  out.usage = proto::Usage{static_cast<uint32_t>(prompt), static_cast<uint32_t>(generated),
                           static_cast<uint32_t>(cached)};
  return out;
}

}  // namespace

struct Engine::RequestState {
  RequestState(uint64_t request_id, std::vector<int32_t> prompt_tokens,
               const proto::SamplingParams& params, uint64_t seed,
               const tokenizer::Tokenizer& tok, int64_t max_new, std::vector<int32_t> generated,
               std::optional<sampling::OutputConstraint> constraint)
      : id(request_id),
        prompt(std::move(prompt_tokens)),
        sampler(params, seed, TokensThatEnd(tok, params), std::move(constraint)),
        output(tok, params, prompt, max_new, std::move(generated)),
        want_logprobs(params.logprobs),
        prompt_logprobs(params.prompt_logprobs) {
    sampler.SkipDrawsOf(output.generated().size());
  }

  uint64_t id;
  std::vector<int32_t> prompt;
  sampling::Sampler sampler;
  OutputProcessor output;
  bool want_logprobs;
  int32_t prompt_logprobs;             // alternatives per prompt position; -1: none wanted
  int64_t prompt_logprobs_sent = 0;    // prompt positions 1.. this one have gone out
  // Whether this request's admission (queue wait, prompt tokens) and first token were counted
  // already: by the copy a replacement takes the place of, or, for a request migrated with
  // tokens streamed elsewhere, by the replica it came from. Not counted twice.
  bool admission_counted = false;
  bool first_token_counted = false;
  int64_t arrival_ns = 0;
  int64_t admitted_ns = 0;
  int64_t first_token_ns = 0;
  int64_t last_token_ns = 0;
  int64_t cached_prompt_tokens = 0;
};

Engine::Engine(const EngineOptions& options, model::LlamaModel& model, model::KvCache& cache,
               const tokenizer::Tokenizer& tokenizer, kernels::Backend& backend,
               const Clock& clock, EngineMetrics* metrics)
    : options_(options),
      model_(model),
      cache_(cache),
      tokenizer_(tokenizer),
      backend_(backend),
      clock_(clock),
      metrics_(metrics),
      context_length_(ContextLength(options, model.config().n_ctx_train)),
      kv_(kv::KvBlockManagerOptions{options.num_blocks, options.block_size, options.prefix_caching}),
      scheduler_(options.scheduler, kv_, clock),
      default_seed_(std::random_device{}()) {
  // Size every step buffer for the largest step up front, so steps never allocate.
  const auto max_rows = static_cast<size_t>(options.scheduler.max_logit_rows());
  if (!options.workspace) model_.Reserve(options.scheduler.max_batch_tokens, static_cast<int64_t>(max_rows));
  const auto max_seqs = static_cast<size_t>(options.scheduler.max_seqs);
  for (StepBatch& b : batches_) {
    b.steps.reserve(max_seqs);
    b.ids.reserve(max_seqs);
    b.sampling.reserve(max_seqs);
    b.sample_rows.reserve(max_seqs);
    b.prompt_chunks.reserve(max_seqs);
    b.row_sampling.reserve(max_seqs);
  }
  sampled_.reserve(max_seqs);
  score_jobs_.reserve(max_rows);
  scored_chunks_.reserve(max_seqs);
  score_results_.reserve(max_rows);
  last_samples_.reserve(max_seqs);
  sampling_rows_.reserve(max_seqs);
  host_draws_.reserve(max_seqs);
  // A device backend runs the forward pass while the host goes on; the CPU backend computes in
  // the launch. An executor (a replica over ranks) computes its step before returning.
  const StepOverlap overlap = options.scheduler.overlap_steps;
  overlap_ = overlap == StepOverlap::kOn ||
             (overlap == StepOverlap::kAuto && !backend.host_memory() && !options.executor);
  // What comes back from the device: page-aligned and pinned, since a device backend's copy into
  // unpinned memory blocks until the step is done (correct, but nothing overlaps).
  auto page_aligned = [](size_t bytes, size_t* rounded) {
    constexpr size_t kPage = 4096;
    *rounded = (std::max<size_t>(bytes, 1) + kPage - 1) / kPage * kPage;
    void* p = std::aligned_alloc(kPage, *rounded);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  };
  logits_.reset(static_cast<float*>(page_aligned(
      max_rows * static_cast<size_t>(model.config().n_vocab) * sizeof(float), &logits_bytes_)));
  device_tokens_.reset(
      static_cast<int32_t*>(page_aligned(max_seqs * sizeof(int32_t), &device_tokens_bytes_)));
  if (!backend.host_memory()) {
    logits_pinned_ = backend.PinHostMemory(logits_.get(), logits_bytes_).ok();
    device_tokens_pinned_ =
        backend.PinHostMemory(device_tokens_.get(), device_tokens_bytes_).ok();
  }
  // Where the logits are on a device, tokens are drawn there. On the CPU the host sampler reads
  // the same memory. An executor (a replica over ranks) returns logits.
  sample_on_device_ = !backend.host_memory() && !options.executor;
  window_start_nanos_ = clock_.NowNanos();
  UpdateGauges();  // the gauges say "empty cache, nothing running" before the first request
}

Engine::~Engine() {
  // A step still running on the device writes into the buffers below and the cache.
  StepBatch& b = batches_[current_];
  if (b.in_flight && b.launched.ok() && !options_.executor) (void)model_.FinishForward();
  if (logits_pinned_) backend_.UnpinHostMemory(logits_.get());
  if (device_tokens_pinned_) backend_.UnpinHostMemory(device_tokens_.get());
}

Status Engine::Add(EngineRequest r) {
  // What a copy this one replaces had counted: taken out whatever becomes of this Add (one that
  // fails leaves no entry behind).
  std::optional<CountedMetrics> replaced;
  if (auto node = replaced_counts_.extract(r.id)) replaced = node.mapped();
  const std::string which = "request " + std::to_string(r.id);
  if (draining_ && !r.replaces_copy) return FailedPrecondition("replica is draining; not accepting " + which);
  if (requests_.count(r.id)) return InvalidArgument(which + " is already running here");
  if (r.prompt.empty()) return InvalidArgument(which + ": the prompt is empty");
  const int32_t vocab = tokenizer_.vocab_size();
  for (const auto* list : {&r.prompt, &r.generated}) {
    for (int32_t t : *list) {
      if (t < 0 || t >= vocab) {
        return InvalidArgument(which + ": token id " + std::to_string(t) +
                               " is outside the vocabulary (0.." + std::to_string(vocab - 1) + ")");
      }
    }
  }
  BMAD_RETURN_IF_ERROR(sampling::ValidateSamplingParams(r.sampling, vocab).WithContext(which));
  const auto known = static_cast<int64_t>(r.prompt.size() + r.generated.size());
  if (known >= context_length_) {
    const bool cache_bound =
        context_length_ < ConfiguredContext(options_, model_.config().n_ctx_train);
    return OutOfRange(which + ": the prompt has " + std::to_string(known) +
                      " tokens; the context length is " + std::to_string(context_length_) +
                      " (prompt plus at least one generated token)" +
                      (cache_bound ? std::string(", all the KV cache holds (") +
                                         std::to_string(kv_.NumUsableBlocks()) + " blocks of " +
                                         std::to_string(options_.block_size) + " tokens)"
                                   : std::string()));
  }
  const int64_t already = static_cast<int64_t>(r.generated.size());
  if (already >= static_cast<int64_t>(r.sampling.max_tokens)) {
    return InvalidArgument(which + " has already generated its max_tokens");
  }
  const int64_t max_new =
      std::min<int64_t>(r.sampling.max_tokens, context_length_ - static_cast<int64_t>(r.prompt.size()));
  BMAD_ASSIGN_OR_RETURN(std::optional<sampling::OutputConstraint> constraint,
                        MakeOutputConstraint(tokenizer_, r.sampling, token_texts_));
  // Tokens generated elsewhere (a migrated request) must already be on the way to the value.
  if (constraint) BMAD_RETURN_IF_ERROR(constraint->Sync(r.generated).WithContext(which));
  const uint64_t seed = default_seed_ ^ (r.id * 0x9e3779b97f4a7c15ull);
  auto state = std::make_unique<RequestState>(r.id, r.prompt, r.sampling, seed, tokenizer_,
                                              max_new, r.generated, std::move(constraint));
  if (!r.generated.empty()) state->admission_counted = state->first_token_counted = true;
  if (replaced && r.replaces_copy) {
    state->admission_counted |= replaced->admission;
    state->first_token_counted |= replaced->first_token;
  }
  // A replacement waited for the step in flight: its latency counts from when it was taken.
  state->arrival_ns = r.received_ns != 0 ? r.received_ns : clock_.NowNanos();
  sched::SequenceRequest seq{r.id,     std::move(r.prompt), std::move(r.generated), r.priority,
                             r.slo_ms, clock_.NowMillis(), r.replaces_copy};
  seq.prompt_logprobs = r.sampling.prompt_logprobs >= 0;
  seq.prefix_root = RootBlockHash(r.sampling.cache_salt);
  BMAD_RETURN_IF_ERROR(scheduler_.Add(std::move(seq)));
  requests_.emplace(state->id, std::move(state));
  UpdateGauges();
  return Status::Ok();
}

bool Engine::Cancel(uint64_t id, RequestOutput* final_output) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return false;
  scheduler_.Remove(id);
  RequestState& r = *it->second;
  RequestOutput out = CancelledOutput(id, r.prompt.size(), r.output.generated().size(), r.cached_prompt_tokens,
                                      r.output.Finish());
  FinishMetrics(r, proto::FinishReason::kCancelled);
  Forget(id);
  if (final_output) *final_output = std::move(out);
  UpdateGauges();
  return true;
}

RequestOutput Engine::CancelUnadded(const EngineRequest& request) {
  replaced_counts_.erase(request.id);
  RequestOutput out = CancelledOutput(request.id, request.prompt.size(), request.generated.size(), 0, "");
  FinishMetrics(proto::FinishReason::kCancelled, request.received_ns != 0 ? request.received_ns : clock_.NowNanos(),
                request.prompt.size(), request.generated.size());
  return out;
}

bool Engine::DropReplaced(uint64_t id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return false;
  const RequestState& r = *it->second;
  replaced_counts_[id] = {r.admission_counted || r.admitted_ns != 0, r.first_token_counted || r.first_token_ns != 0};
  scheduler_.Remove(id);
  Forget(id);
  UpdateGauges();
  return true;
}

bool Engine::Plan(StepBatch& batch) {
  const int64_t start = clock_.NowNanos();
  const kv::KvBlockManager::Stats kv_before = kv_.GetStats();
  const uint64_t prefix_waits_before = scheduler_.stats().shared_prefix_waits_total;
  batch.plan = scheduler_.Schedule();
  if (metrics_) {
    // Prefix lookups and evictions happen while planning; counted here, not at the step's end,
    // so that a step planned while another runs is not counted twice.
    const kv::KvBlockManager::Stats kv_after = kv_.GetStats();
    metrics_->prefix_query_tokens.Increment(double(kv_after.prefix_query_tokens - kv_before.prefix_query_tokens));
    metrics_->prefix_hit_tokens.Increment(double(kv_after.prefix_hit_tokens - kv_before.prefix_hit_tokens));
    metrics_->kv_evictions.Increment(double(kv_after.evictions - kv_before.evictions));
    if (!batch.plan.preempted.empty()) metrics_->preemptions.Increment(double(batch.plan.preempted.size()));
    metrics_->shared_prefix_waits.Increment(
        double(scheduler_.stats().shared_prefix_waits_total - prefix_waits_before));
  }
  if (options_.executor) {
    for (uint64_t id : batch.plan.preempted) options_.executor->Release(id);
  }
  for (const sched::ScheduledChunk& c : batch.plan.chunks) {
    RequestState& r = *requests_.at(c.seq_id);
    if (r.admitted_ns == 0) {
      r.admitted_ns = start;
      // A migrated request's reused blocks may hold tokens it generated before: only the prompt's
      // count as cached prompt tokens.
      r.cached_prompt_tokens = std::min<int64_t>(c.start, static_cast<int64_t>(r.prompt.size()));
      if (metrics_ && !r.admission_counted) {
        metrics_->queue_wait.Observe(double(start - r.arrival_ns) * 1e-9);
        metrics_->prompt_tokens.Increment(double(r.prompt.size()));
      }
    }
  }
  call_timing_.plan_nanos += clock_.NowNanos() - start;
  return !batch.plan.empty();
}

void Engine::PrepareBatch(StepBatch& batch) {
  const int64_t start = clock_.NowNanos();
  batch.steps.clear();
  batch.ids.clear();
  batch.sampling.clear();
  batch.sample_rows.clear();
  batch.prompt_chunks.clear();
  int64_t rows = 0;  // the logits come back in step order, each chunk's logit_rows
  for (const sched::ScheduledChunk& c : batch.plan.chunks) {
    batch.ids.push_back(c.seq_id);
    const sched::Sequence* seq = scheduler_.Find(c.seq_id);
    batch.steps.push_back({std::span<const int32_t>(seq->tokens).subspan(static_cast<size_t>(c.start),
                                                                         static_cast<size_t>(c.num_tokens)),
                           static_cast<int32_t>(c.start), scheduler_.BlockTable(c.seq_id),
                           static_cast<int32_t>(c.logit_rows)});
    if (c.prompt_logits) batch.prompt_chunks.emplace_back(&c, rows);
    rows += c.logit_rows;
    if (c.samples) {
      batch.sampling.push_back(&c);
      batch.sample_rows.push_back(rows - 1);  // its last token's
    }
  }
  // Only a step of one row per sampling sequence is drawn on the device.
  batch.sampled_on_device =
      sample_on_device_ && batch.prompt_chunks.empty() && std::all_of(batch.sampling.begin(), batch.sampling.end(),
                                       [&](const sched::ScheduledChunk* c) {
                                         const RequestState& r = *requests_.at(c->seq_id);
                                         return r.sampler.device_samplable(r.output.generated().size());
                                       });
  batch.row_sampling.clear();
  if (batch.sampled_on_device) {
    for (const sched::ScheduledChunk* c : batch.sampling) {
      const sampling::DeviceDraw d = requests_.at(c->seq_id)->sampler.PrepareDeviceDraw();
      batch.row_sampling.push_back({d.temperature, d.top_k, d.top_p, d.min_p, d.uniform});
    }
  }
  call_timing_.plan_nanos += clock_.NowNanos() - start;
}

void Engine::Launch(StepBatch& batch) {
  const int64_t start = clock_.NowNanos();
  if (options_.workspace) options_.workspace->Reset();
  if (options_.executor) {
    batch.launched = options_.executor->Execute(batch.steps, batch.ids, logits_.get());
  } else if (batch.sampled_on_device) {
    batch.launched = model_.LaunchSampledForward(batch.steps, cache_, batch.row_sampling,
                                                 device_tokens_.get(), options_.workspace);
  } else {
    batch.launched = model_.LaunchForward(batch.steps, cache_, logits_.get(), options_.workspace);
  }
  // From here on the scheduler plans as if the step were done (its tokens pending), except for
  // sequences whose token is their last by length: nothing is planned after it.
  if (batch.launched.ok()) {
    last_samples_.clear();
    for (const sched::ScheduledChunk* c : batch.sampling) {
      if (requests_.at(c->seq_id)->output.next_is_last()) last_samples_.push_back(c->seq_id);
    }
    scheduler_.OnStepLaunched(batch.plan, last_samples_);
  }
  batch.in_flight = true;
  call_timing_.execute_nanos += clock_.NowNanos() - start;
}

Status Engine::Wait(StepBatch& batch) {
  batch.in_flight = false;
  if (!batch.launched.ok() || options_.executor) return batch.launched;
  const int64_t start = clock_.NowNanos();
  Status done = model_.FinishForward();
  call_timing_.execute_nanos += clock_.NowNanos() - start;
  return done;
}

void Engine::FailBatch(const StepBatch& batch, const Status& why, std::vector<RequestOutput>* outputs) {
  // A malformed step is a bug, not the requests' fault, but they cannot continue: fail them with
  // the reason and keep serving the rest. Only a step refused at launch comes here, in the call
  // that launched it: the caller cannot have given one of its ids to a new request meanwhile.
  for (const sched::ScheduledChunk& c : batch.plan.chunks) {
    auto it = requests_.find(c.seq_id);
    if (it == requests_.end()) continue;
    RequestOutput out;
    out.id = c.seq_id;
    out.finished = true;
    out.reason = proto::FinishReason::kError;
    out.error = why.ToString();
    FinishMetrics(*it->second, out.reason);
    outputs->push_back(std::move(out));
    scheduler_.Remove(c.seq_id);
    Forget(c.seq_id);
  }
}

void Engine::DropGoneChunks(StepBatch& batch) {
  // Sequences that finished, failed or were cancelled after this step was planned.
  std::erase_if(batch.plan.chunks, [&](const sched::ScheduledChunk& c) {
    if (scheduler_.Find(c.seq_id) != nullptr) return false;
    batch.plan.num_tokens -= c.num_tokens;
    return true;
  });
}

void Engine::Sample(const StepBatch& batch, std::vector<RequestOutput>* outputs) {
  sampled_.clear();
  const int64_t vocab = model_.config().n_vocab;
  const int64_t now = clock_.NowNanos();
  const size_t n = batch.sampling.size();
  // Each row's request, or null: cancelled while its step ran (and perhaps its id given to a new
  // request since, whose sequence was not in this step: the row is not its).
  sampling_rows_.clear();
  for (size_t i = 0; i < n; ++i) {
    const uint64_t id = batch.sampling[i]->seq_id;
    const sched::Sequence* seq = scheduler_.Find(id);
    auto found = requests_.find(id);
    const bool gone = found == requests_.end() || seq == nullptr || seq->launched_step != batch.plan.step;
    sampling_rows_.push_back(gone ? nullptr : found->second.get());
  }
  // Host draws, one per row, on the backend's host threads: each request has its own sampler,
  // and a draw over a whole vocabulary (top-p without top-k) takes a fraction of a millisecond.
  if (!batch.sampled_on_device) {
    host_draws_.assign(n, sampling::SampleResult{});
    backend_.ParallelForOnHost(static_cast<int64_t>(n), [&](int64_t i) {
      RequestState* r = sampling_rows_[static_cast<size_t>(i)];
      if (r == nullptr) return;
      const int64_t at = batch.sample_rows[static_cast<size_t>(i)];
      const std::span<const float> row(logits_.get() + at * vocab, static_cast<size_t>(vocab));
      host_draws_[static_cast<size_t>(i)] = r->sampler.Sample(row, r->prompt, r->output.generated());
    });
  }
  for (size_t i = 0; i < n; ++i) {
    if (sampling_rows_[i] == nullptr) continue;
    RequestState& r = *sampling_rows_[i];
    const uint64_t id = batch.sampling[i]->seq_id;
    RequestOutput out;
    out.id = id;
    out.token_offset = static_cast<int64_t>(r.output.generated().size());
    Result<sampling::SampleResult> s = sampling::SampleResult{};
    if (!batch.sampled_on_device) {
      s = std::move(host_draws_[i]);
    } else if (device_tokens_.get()[i] >= 0) {
      s->token_id = device_tokens_.get()[i];
      r.sampler.DrawnOnDevice();
    } else {
      s = Internal("no token can be chosen: the logits hold a NaN or +inf, or nothing above -inf "
                   "(sampling on the device)");
    }
    if (!s.ok()) {
      out.finished = true;
      out.reason = proto::FinishReason::kError;
      const bool clients_doing = s.status().code() == StatusCode::kInvalidArgument;
      out.error_code = clients_doing ? StatusCode::kInvalidArgument : StatusCode::kInternal;
      out.error = clients_doing ? s.status().message() : s.status().ToString();
      sampled_.push_back({id, -1, true});
    } else {
      TokenOutcome outcome = r.output.OnToken(s->token_id);
      out.token_ids.push_back(s->token_id);
      if (r.want_logprobs && s->logprob) out.logprobs.push_back(*s->logprob);
      for (const sampling::SampleResult::Alternative& a : s->top) {
        out.top_token_ids.push_back(a.token_id);
        out.top_logprobs.push_back(a.logprob);
      }
      out.text = std::move(outcome.text);
      out.finished = outcome.finished;
      out.reason = outcome.reason;
      out.stop_string = std::move(outcome.stop_string);
      out.stop_token_id = outcome.stop_token_id;
      sampled_.push_back({id, s->token_id, outcome.finished});
      ++generated_total_;
      if (metrics_) {
        metrics_->generation_tokens.Increment();
        if (r.first_token_ns == 0) {
          // A continued output's first token here is not its first (nor is the gap before it
          // one between two tokens of one replica).
          if (!r.first_token_counted) metrics_->time_to_first_token.Observe(double(now - r.arrival_ns) * 1e-9);
        } else {
          metrics_->inter_token_latency.Observe(double(now - r.last_token_ns) * 1e-9);
        }
      }
    }
    if (r.first_token_ns == 0) r.first_token_ns = now;
    r.last_token_ns = now;
    if (out.finished) {
      out.usage = proto::Usage{static_cast<uint32_t>(r.prompt.size()),
                               static_cast<uint32_t>(r.output.generated().size()),
                               static_cast<uint32_t>(r.cached_prompt_tokens)};
      FinishMetrics(r, out.reason);
    }
    outputs->push_back(std::move(out));
  }
}

void Engine::ScorePrompts(const StepBatch& batch, std::vector<RequestOutput>* outputs) {
  if (batch.prompt_chunks.empty()) return;
  const int64_t vocab = model_.config().n_vocab;
  // Every position to score, each a pass over its row of the vocabulary: spread over the
  // backend's host threads as the draws are (on the CPU, the compute threads, idle between
  // steps), then gathered per request in order.
  scored_chunks_.clear();
  score_jobs_.clear();
  for (const auto& [chunk, first_row] : batch.prompt_chunks) {
    const sched::Sequence* seq = scheduler_.Find(chunk->seq_id);
    auto found = requests_.find(chunk->seq_id);
    if (found == requests_.end() || seq == nullptr || seq->launched_step != batch.plan.step) continue;  // gone
    RequestState& r = *found->second;
    if (r.prompt_logprobs < 0) continue;
    // Row j holds the logits after position start + j: the distribution of the token at
    // start + j + 1. Positions already sent (before a preemption) are not sent again.
    const int64_t first = std::max(r.prompt_logprobs_sent + 1, chunk->start + 1);
    const int64_t last = std::min(chunk->start + chunk->num_tokens, static_cast<int64_t>(r.prompt.size()) - 1);
    if (first > last) continue;
    scored_chunks_.push_back({&r, first, last, score_jobs_.size()});
    for (int64_t p = first; p <= last; ++p) score_jobs_.push_back({&r, first_row + (p - 1 - chunk->start), p});
  }
  score_results_.assign(score_jobs_.size(), sampling::PromptTokenLogprob{});
  backend_.ParallelForOnHost(static_cast<int64_t>(score_jobs_.size()), [&](int64_t j) {
    thread_local sampling::PromptLogprobScorer scorer;  // its scratch, per host thread
    const ScoreJob& job = score_jobs_[static_cast<size_t>(j)];
    const std::span<const float> logits(logits_.get() + job.row * vocab, static_cast<size_t>(vocab));
    score_results_[static_cast<size_t>(j)] = scorer.Score(
        logits, job.request->prompt[static_cast<size_t>(job.position)], static_cast<size_t>(job.request->prompt_logprobs));
  });
  for (const ScoredChunk& c : scored_chunks_) {
    RequestState& r = *c.request;
    RequestOutput out;
    out.id = r.id;
    out.token_offset = static_cast<int64_t>(r.output.generated().size());
    out.prompt_logprob_offset = c.first;
    Status failed;
    for (size_t j = c.job; j < c.job + static_cast<size_t>(c.last - c.first + 1) && failed.ok(); ++j) {
      const Result<sampling::PromptTokenLogprob>& scored = score_results_[j];
      if (!scored.ok()) {
        failed = scored.status();
        break;
      }
      out.prompt_logprobs.push_back(scored->logprob);
      out.prompt_ranks.push_back(scored->rank);
      for (const auto& [token, logprob] : scored->top) {
        out.prompt_top_token_ids.push_back(token);
        out.prompt_top_logprobs.push_back(logprob);
      }
    }
    if (!failed.ok()) {
      // The model gave no distribution: the request cannot go on (as a failed draw).
      const uint64_t id = r.id;
      RequestOutput error;
      error.id = id;
      error.finished = true;
      error.reason = proto::FinishReason::kError;
      error.error = failed.ToString();
      FinishMetrics(r, error.reason);
      outputs->push_back(std::move(error));
      scheduler_.Remove(id);
      Forget(id);
      continue;
    }
    r.prompt_logprobs_sent = c.last;
    outputs->push_back(std::move(out));
  }
}

void Engine::Forget(uint64_t id) {
  requests_.erase(id);
  if (options_.executor) options_.executor->Release(id);
}

void Engine::FinishMetrics(const RequestState& r, proto::FinishReason reason) {
  FinishMetrics(reason, r.arrival_ns, r.prompt.size(), r.output.generated().size());
}

void Engine::FinishMetrics(proto::FinishReason reason, int64_t arrival_ns, size_t prompt_tokens,
                           size_t generated_tokens) {
  if (!metrics_) return;
  metrics_->Finished(reason).Increment();
  metrics_->e2e_latency.Observe(double(clock_.NowNanos() - arrival_ns) * 1e-9);
  metrics_->prompt_tokens_per_request.Observe(double(prompt_tokens));
  metrics_->generation_tokens_per_request.Observe(double(generated_tokens));
}

Status Engine::Step(std::vector<RequestOutput>* outputs) {
  const int64_t start = clock_.NowNanos();
  call_timing_ = StepTiming{};
  if (returned_in_flight_at_ != 0) {
    busy_nanos_ += start - returned_in_flight_at_;  // the device worked between the calls
    returned_in_flight_at_ = 0;
  }
  StepBatch& now = batches_[current_];
  if (!now.in_flight) {
    if (!Plan(now)) {
      UpdateGauges();
      return Status::Ok();
    }
    PrepareBatch(now);
    Launch(now);
  }
  // While step n runs, plan step n+1 over its pending tokens.
  StepBatch& next = batches_[1 - current_];
  const bool planned_next = overlap_ && now.launched.ok() && Plan(next);
  Status executed = Wait(now);
  // Only a step refused as malformed (by the model before it ran, or by an executor's ranks)
  // fails just its requests. What the device reports when the step is waited for stops the
  // replica: a device backend keeps its first error (CudaBackend's sticky status) and would
  // report it for every later step, failing every request while the replica looked healthy.
  if (!executed.ok() && (now.launched.ok() || !Malformed(executed))) {
    return executed.WithContext("executing step");  // the replica stops
  }
  const size_t first_output = outputs->size();
  if (executed.ok()) {
    ScorePrompts(now, outputs);
    Sample(now, outputs);
    scheduler_.OnTokensSampled(sampled_);
    for (size_t i = first_output; i < outputs->size(); ++i) {
      if ((*outputs)[i].finished) Forget((*outputs)[i].id);
    }
  } else {
    FailBatch(now, executed, outputs);
  }
  if (planned_next) {
    DropGoneChunks(next);
    if (!next.plan.empty()) {
      PrepareBatch(next);
      Launch(next);  // runs while this step's outputs go out
      if (Malformed(next.launched)) {
        // Refused before it ran: fail its requests now, not after the caller may have reused
        // their ids.
        FailBatch(next, next.launched, outputs);
        next.in_flight = false;
      } else {
        current_ = 1 - current_;  // a fatal error surfaces at the next call's wait
      }
    }
  }
  const int64_t end = clock_.NowNanos();
  busy_nanos_ += end - start;
  last_busy_end_nanos_ = end;
  if (batches_[current_].in_flight) returned_in_flight_at_ = end;
  if (executed.ok()) {  // the timing of calls that completed a step only, all fields alike
    ++timing_.steps;
    if (planned_next) ++timing_.overlapped_steps;
    if (now.sampled_on_device) ++timing_.device_sampled_steps;
    timing_.plan_nanos += call_timing_.plan_nanos;
    timing_.execute_nanos += call_timing_.execute_nanos;
    timing_.total_nanos += end - start;
    if (metrics_) {
      metrics_->step_seconds.Observe(double(end - start) * 1e-9);
      metrics_->step_tokens.Observe(double(now.plan.num_tokens));
      metrics_->batch_sequences.Observe(double(now.plan.chunks.size()));
    }
  }
  UpdateGauges();
  return Status::Ok();
}

float Engine::Utilization(int64_t now) const {
  // The share of wall time spent in steps, over windows of about a second. Only a step (or an
  // Add or Cancel) closes a window, so an idle engine's window stays open: counted as it grows,
  // its idle time brings the value down instead of leaving the last busy second's figure.
  // An engine that has computed nothing for a whole second (and has no step in flight on the
  // device) is idle: 0, not a figure that only falls as 1/t (a replica idle for a minute after a
  // busy second read 0.016, and the weighted router gave it a ninth of another idle one's share).
  if (returned_in_flight_at_ == 0 && now - last_busy_end_nanos_ >= 1'000'000'000) return 0;
  const int64_t window = now - window_start_nanos_;
  if (window < 1'000'000'000) return utilization_;
  return static_cast<float>(std::min(1.0, double(busy_nanos_) / double(window)));
}

void Engine::UpdateGauges() {
  const int64_t now = clock_.NowNanos();
  if (now - window_start_nanos_ >= 1'000'000'000) {
    utilization_ = Utilization(now);
    busy_nanos_ = 0;
    window_start_nanos_ = now;
  }
  if (!metrics_) return;
  const sched::SchedulerStats s = scheduler_.stats();
  const kv::KvBlockManager::Stats kv = kv_.GetStats();
  metrics_->requests_running.Set(double(s.running));
  metrics_->requests_waiting.Set(double(s.waiting));
  metrics_->vllm_running.Set(double(s.running));
  metrics_->vllm_waiting.Set(double(s.waiting));
  metrics_->kv_usage.Set(kv.usage);
  metrics_->vllm_kv_usage.Set(kv.usage);
  metrics_->vllm_gpu_cache_usage.Set(kv.usage);
  metrics_->kv_free_blocks.Set(double(kv_.NumFreeBlocks()));
  metrics_->kv_waste.Set(kv.allocated_slots > 0
                             ? double(kv.allocated_slots - kv.held_tokens) / double(kv.allocated_slots)
                             : 0.0);
  metrics_->system_allocations.Set(double(SystemAllocations()));
}

std::vector<uint64_t> Engine::ActiveRequestIds() const {
  std::vector<uint64_t> ids;
  ids.reserve(requests_.size());
  for (const auto& [id, r] : requests_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

proto::LoadStats Engine::Load() const {
  const sched::SchedulerStats s = scheduler_.stats();
  const kv::KvBlockManager::Stats kv = kv_.GetStats();
  proto::LoadStats l;
  l.running = static_cast<uint32_t>(s.running);
  l.waiting = static_cast<uint32_t>(s.waiting);
  l.kv_usage = static_cast<float>(kv.usage);
  l.utilization = Utilization(clock_.NowNanos());
  l.kv_free_blocks = static_cast<uint32_t>(kv_.NumFreeBlocks());
  l.kv_total_blocks = static_cast<uint32_t>(kv_.NumUsableBlocks());
  l.steps_total = s.steps_total;
  l.generated_tokens_total = generated_total_;
  l.max_seqs = static_cast<uint32_t>(options_.scheduler.max_seqs);
  return l;
}

uint64_t Engine::SystemAllocations() const {
  return memory::SystemAllocations::Count() + backend_.buffer_allocations() +
         model_.workspace_allocations() + buffer_growths_;
}

}  // namespace bmad::engine
