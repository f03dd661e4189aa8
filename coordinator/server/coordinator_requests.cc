// The life of a request in the coordinator: accept (validate, tokenize, admit), dispatch (route to
// a live replica), stream (forward chunks, dropping any the client already has), and end
// (finish, fail, cancel), or migrate when the replica dies.
#include <algorithm>
#include <limits>
#include <optional>
#include <unordered_map>

#include "common/block_hash.h"
#include "common/log.h"
#include "common/proto/codec.h"
#include "common/proto/frames.h"
#include "coordinator/server/coordinator_core.h"
#include "worker/sampling/sampling_params_validation.h"

namespace bmad::coord {
namespace {

constexpr const char* kLog = "coordinator";
// A request lost this many times (by any replicas) fails: something loses it on purpose.
constexpr uint32_t kMaxLosses = 3;

// Whether assignment number `a` was sent no later than `b`: numbers wrap around, and two in use
// at once are never 2^31 apart.
bool NoLaterThan(uint32_t a, uint32_t b) { return static_cast<int32_t>(b - a) >= 0; }

// `why` (about one prompt of a batch) as about prompt `p`: a message naming 'prompt' names
// 'prompt[p]' instead, any other gets it as context. OpenAI's error `param` is the name a
// message starts with.
Status AboutBatchPrompt(const Status& why, size_t p) {
  const std::string name = "'prompt[" + std::to_string(p) + "]'";
  constexpr std::string_view kPrompt = "'prompt' ";
  if (why.message().starts_with(kPrompt)) {
    return Status(why.code(), name + why.message().substr(kPrompt.size() - 1));
  }
  return why.WithContext(name);
}

// What is left of a request's deadline (slo_ms from when the front door received it) at `now_ns`,
// for an Assign: a replica counts the deadline from when it takes the request, so time spent
// queued here, waiting after refusals, or on a lost replica before a migration would
// otherwise start over. 1 once overdue (the most urgent); 0 when the request set none.
// What is left of the request's deadline: its slo_ms, or for one without, `default_slo_ms`
// (scheduler.default_slo_ms), counted from its arrival here as the queue ranks it, so that the
// replica's scheduler does not give back the time it waited. 0 for a request without one that
// has not waited: the replica's own default, counted from now, is the same deadline.
uint32_t RemainingSloMs(const CoordRequest& r, int64_t now_ns, int64_t default_slo_ms) {
  const int64_t waited_ms = std::max<int64_t>(0, (now_ns - r.arrival_ns) / 1'000'000);
  if (r.slo_ms == 0 && waited_ms == 0) return 0;
  const int64_t slo_ms = r.slo_ms > 0 ? int64_t{r.slo_ms} : default_slo_ms;
  return static_cast<uint32_t>(std::clamp<int64_t>(slo_ms - waited_ms, 1, std::numeric_limits<uint32_t>::max()));
}

}  // namespace

std::vector<ReplicaView> CoordinatorServer::Core::Views() const { return replicas_.Views(); }

Status CoordinatorServer::Core::CheckPromptTextMayFit(size_t bytes) const {
  const size_t per_token = tokenizer_->max_bytes_per_token();
  if (per_token == 0 || bytes < static_cast<size_t>(context_length_) * per_token) return Status::Ok();
  return OutOfRange("the prompt has " + std::to_string(bytes) + " bytes, more than this model's context length of " +
                    std::to_string(context_length_) + " tokens can hold (a token stands for at most " +
                    std::to_string(per_token) + " bytes)");
}

int64_t CoordinatorServer::Core::ServedContextLength() const {
  int64_t largest = 0;
  for (const ReplicaState* replica : replicas_.All()) {
    if (replica->live && !replica->draining) largest = std::max<int64_t>(largest, replica->info.context_length);
  }
  return largest > 0 ? std::min(largest, context_length_) : context_length_;
}

Status CoordinatorServer::Core::CheckAssignFits(int64_t prompt_tokens, const proto::SamplingParams& sampling) const {
  // Each offer to a replica is one Assign; a migrated request's carries the tokens generated so
  // far too (up to max_tokens). One larger than the replica's socket takes would be refused there
  // as undecodable (lost, then offered again and again) or, past twice the limit, cut the
  // replica's connection: refused here instead. Token lists take 4 bytes a token; the slack
  // covers their padding to whole words and the segment table of a message in several segments.
  proto::Assign shape;
  shape.sampling = sampling;
  const uint64_t bytes = proto::Encode(shape).size() +
                         4 * (static_cast<uint64_t>(prompt_tokens) + sampling.max_tokens) + 64;
  const auto limit = static_cast<uint64_t>(config_.coordinator.max_message_bytes);
  if (bytes <= limit) return Status::Ok();
  return InvalidArgument("the request would be a message of up to " + std::to_string(bytes) +
                         " bytes to its replica (a prompt of " + std::to_string(prompt_tokens) +
                         " tokens, up to " + std::to_string(sampling.max_tokens) +
                         " generated, and its sampling parameters), above coordinator.max_message_bytes (" +
                         std::to_string(limit) + ")");
}

Result<std::unique_ptr<CoordRequest>> CoordinatorServer::Core::Prepare(SubmitInput in) const {
  if (!in.model.empty() && in.model != model_name_) {
    return NotFound("model '" + in.model + "' does not exist; this cluster serves '" + model_name_ + "'");
  }
  auto r = std::make_unique<CoordRequest>();
  if (in.prompt_is_tokens) {
    r->prompt = std::move(in.prompt_tokens);
  } else {
    // Short socket-door prompts are tokenized here, on the event loop (long ones on the
    // tokenizer thread first); one that cannot fit is refused untokenized.
    BMAD_RETURN_IF_ERROR(CheckPromptTextMayFit(in.prompt_text.size()));
    const std::vector<int32_t> ids = tokenizer_->Encode(in.prompt_text);
    r->prompt.assign(ids.begin(), ids.end());
  }
  if (r->prompt.empty()) return InvalidArgument("the prompt is empty");
  const auto vocab = static_cast<uint32_t>(tokenizer_->vocab_size());
  for (uint32_t t : r->prompt) {
    if (t >= vocab) {
      return InvalidArgument("'prompt' holds token id " + std::to_string(t) + ", outside the vocabulary (0.." +
                             std::to_string(vocab - 1) + ")");
    }
  }
  const auto prompt_len = static_cast<int64_t>(r->prompt.size());
  // As vLLM's max_model_len: what the replicas can hold, which a small KV cache cuts below the
  // model's (the workers would refuse a longer prompt only after it was accepted here).
  const int64_t context = ServedContextLength();
  const std::string context_is =
      context < context_length_ ? "the replicas' context length is " + std::to_string(context) +
                                      " (all their KV caches hold; the model's is " +
                                      std::to_string(context_length_) + ")"
                                : "this model's context length is " + std::to_string(context);
  if (prompt_len >= context) {
    return OutOfRange("the prompt has " + std::to_string(prompt_len) + " tokens; " + context_is);
  }
  if (!in.max_tokens_given) in.sampling.max_tokens = static_cast<uint32_t>(context - prompt_len);
  if (in.sampling.max_tokens >= 1 && prompt_len + in.sampling.max_tokens > context) {
    return OutOfRange("the prompt (" + std::to_string(prompt_len) + " tokens) plus max_tokens (" +
                      std::to_string(in.sampling.max_tokens) + ") exceed the context: " + context_is);
  }
  BMAD_RETURN_IF_ERROR(sampling::ValidateSamplingParams(in.sampling, tokenizer_->vocab_size()));
  if (in.sampling.prompt_logprobs >= 0 && config_.scheduler.max_prompt_logprob_tokens == 0) {
    return InvalidArgument("'prompt_logprobs': the prompt's log-probabilities are turned off here "
                           "(scheduler.max_prompt_logprob_tokens is 0)");
  }
  BMAD_RETURN_IF_ERROR(CheckAssignFits(prompt_len, in.sampling));
  r->client_request_id = std::move(in.client_request_id);
  r->arrival_ns = in.received_ns;
  r->stream = in.stream;
  r->max_tokens_given = in.max_tokens_given;
  r->sampling = std::move(in.sampling);
  r->priority = in.priority;
  r->slo_ms = in.slo_ms;
  const std::vector<int32_t> as_int(r->prompt.begin(), r->prompt.end());
  // Salted as the replicas salt theirs, so that routing by cached prefix sees what they can reuse.
  r->block_hashes = HashFullBlocks(as_int, block_size_, RootBlockHash(r->sampling.cache_salt));
  return r;
}

Result<CoordRequest*> CoordinatorServer::Core::Admit(std::unique_ptr<CoordRequest> r,
                                                     const std::string& client_routing_id,
                                                     std::shared_ptr<HttpStream> http) {
  r->id = requests_.NextId();
  r->client_routing_id = client_routing_id;
  r->http = std::move(http);
  r->queued_since_ns = clock_.NowNanos();
  if (r->arrival_ns == 0) r->arrival_ns = r->queued_since_ns;  // a front door that did not say
  // Its first offer decides long-tail or not, for good: offered again (refused, migrated) it
  // keeps its pool, though the window's threshold has moved meanwhile.
  if (!r->prompt_long_tail) r->prompt_long_tail = std::make_shared<std::optional<bool>>();
  Result<CoordRequest*> admitted = requests_.Admit(std::move(r));
  if (!admitted.ok()) {
    CountRefused(admitted.status());
    return admitted.status();
  }
  CoordRequest* req = *admitted;
  ++requests_received_;
  metrics_->requests_total.Increment();
  metrics_->prompt_tokens.Increment(double(req->prompt.size()));
  if (req->http) {
    StreamEvent e;
    e.kind = StreamEvent::Kind::kAccepted;
    e.prompt_tokens = static_cast<uint32_t>(req->prompt.size());
    e.request_id = req->id;
    req->http->Push(std::move(e));
  }
  // Behind the requests already waiting, if any: a replica's free slot goes to the first of
  // them (the queue's order), not to whoever arrived last.
  if (requests_.queued() > 1) {
    DispatchQueued();
  } else {
    Dispatch(req);
  }
  return req;
}

Result<CoordRequest*> CoordinatorServer::Core::Accept(SubmitInput in, const std::string& client_routing_id,
                                                      std::shared_ptr<HttpStream> http) {
  Result<std::unique_ptr<CoordRequest>> prepared = Prepare(std::move(in));
  if (!prepared.ok()) {
    CountRefused(prepared.status());
    return prepared.status();
  }
  return Admit(std::move(*prepared), client_routing_id, std::move(http));
}

Status CoordinatorServer::Core::AcceptChoices(std::vector<SubmitInput> inputs,
                                              const std::shared_ptr<HttpStream>& http) {
  uint32_t total = 0;
  for (const SubmitInput& in : inputs) total += std::max<uint32_t>(in.choices, 1);
  if (inputs.empty()) return Internal("an HTTP request without a prompt reached the event loop");
  // Each choice is a request in the metrics; a refusal refuses them all.
  if (total > 1) {
    // Never fewer choices than asked for: room for all of them first.
    const std::string what = inputs.size() > 1 ? std::to_string(inputs.size()) + " prompts with " +
                                                     std::to_string(inputs.front().choices) + " choices each"
                                               : "'n' of " + std::to_string(total);
    Status room = total > requests_.max_per_priority()
                      ? InvalidArgument((inputs.size() > 1 ? "'prompt': " : "") + what + " asks for " +
                                        std::to_string(total) + " requests, more than the " +
                                        std::to_string(requests_.max_per_priority()) +
                                        " of one priority class this coordinator holds at once "
                                        "(coordinator.max_queued_per_priority)")
                      : requests_.CheckRoom(inputs.front().priority, total);
    if (!room.ok()) {
      CountRefused(room, total);
      return room;
    }
  }
  // Every prompt is checked before any is admitted: a bad one refuses the batch untouched.
  std::vector<std::unique_ptr<CoordRequest>> prepared;
  for (size_t p = 0; p < inputs.size(); ++p) {
    const uint32_t choices = inputs[p].choices;
    Result<std::unique_ptr<CoordRequest>> r = Prepare(std::move(inputs[p]));
    if (!r.ok()) {
      CountRefused(r.status(), total);
      // A wrong model is the whole request's fault (OpenAI's param "model"), not one prompt's.
      const bool about_one_prompt = inputs.size() > 1 && r.status().code() != StatusCode::kNotFound;
      return about_one_prompt ? AboutBatchPrompt(r.status(), p) : r.status();
    }
    (*r)->choices = std::max<uint32_t>(choices, 1);
    prepared.push_back(std::move(*r));
  }
  std::vector<uint64_t> accepted;
  for (std::unique_ptr<CoordRequest>& prompt : prepared) {
    const uint32_t n = prompt->choices;
    if (n > 1) prompt->prompt_long_tail = std::make_shared<std::optional<bool>>();
    for (uint32_t i = 0; i < n; ++i) {
      auto choice = i + 1 < n ? std::make_unique<CoordRequest>(*prompt) : std::move(prompt);
      // Distinct choices that the same seed reproduces (vLLM numbers its choices' seeds so too).
      if (choice->sampling.has_seed) choice->sampling.seed += i;
      // The prompt's log-probabilities are the same for every choice: the first scores it, the
      // others prefill it as usual (and may reuse its cached blocks). The response shows the
      // first's for all (AddPromptLogprobs).
      if (i > 0) choice->sampling.prompt_logprobs = -1;
      Result<CoordRequest*> r = Admit(std::move(choice), "", http);
      if (!r.ok()) {
        // Only a full queue can refuse here (the room was checked for more than one): the rest
        // are refused with it, all or none.
        CountRefused(r.status(), total - static_cast<uint32_t>(accepted.size()) - 1);
        for (uint64_t id : accepted) {
          if (CoordRequest* a = requests_.Find(id)) Cancel(a, /*tell_client=*/false);
        }
        return r.status();
      }
      accepted.push_back((*r)->id);
    }
  }
  return Status::Ok();
}

bool CoordinatorServer::Core::Dispatch(CoordRequest* r) {
  std::vector<ReplicaView> views = Views();
  // A replica whose context cannot hold the whole request (its KV cache is smaller: another
  // pool's size) is no candidate for it: it would refuse it, or cut it short. Prepare checked
  // that a live one could; if none can now, the request waits, as for a replica to come.
  const std::vector<const ReplicaState*> states = replicas_.All();
  const int64_t needed = ContextNeeded(*r);
  for (size_t i = 0; i < views.size() && i < states.size(); ++i) {
    const int64_t context = states[i]->info.context_length;  // 0: not reported (taken as enough)
    if (context != 0 && context < needed) views[i].accepting = false;
  }
  const int64_t start = clock_.NowNanos();
  RouteRequest route{static_cast<int64_t>(r->prompt.size()), r->block_hashes,
                     r->prompt_long_tail ? *r->prompt_long_tail : std::nullopt};
  Result<RouteDecision> d = router_.Pick(route, views);
  if (!d.ok()) return false;  // stays queued until a replica is live
  // Only picks that found a replica: a queue waiting for one retries every turn, and those
  // instant failures would bury the time real decisions take.
  metrics_->routing_seconds.Observe(double(clock_.NowNanos() - start) * 1e-9);
  const ReplicaView& chosen = views[d->index];
  proto::Assign a;
  a.request_id = r->id;
  a.prompt_tokens = r->prompt;
  a.generated_tokens = r->streamed_tokens;
  a.sampling = r->sampling;
  a.priority = r->priority;
  a.slo_ms = RemainingSloMs(*r, clock_.NowNanos(), config_.scheduler.default_slo_ms);
  a.arrival_unix_ms = static_cast<uint64_t>(UnixMillis());
  a.assignment = ++last_assignment_;
  ReplicaState* replica = replicas_.Find(chosen.id);
  if (!replica) return true;
  if (!proto::SendMessage(*worker_socket_, a, replica->routing_id).ok()) {
    log::Warn(kLog, "replica unreachable while dispatching", {{"replica", chosen.id}});
    replicas_.MarkDead(chosen.id);
    Migrate(chosen.id);
    return true;
  }
  const OfferPosition position = replicas_.Offered(chosen.id);
  r->offer_interval = position.interval;
  r->offer_index = position.index;
  if (!replica->assigned) replica->first_assignment = a.assignment;
  replica->assigned = true;
  replica->last_assignment = a.assignment;
  // The window of numbers sent there is compared modulo 2^32: kept well under 2^31 wide (the
  // numbers before its new start all lie well behind any heartbeat's newest).
  constexpr uint32_t kWindow = 1u << 30;
  if (a.assignment - replica->first_assignment > kWindow) replica->first_assignment = a.assignment - kWindow;
  requests_.SetState(r, r->streamed_tokens.empty() ? RequestState::kDispatched : RequestState::kStreaming);
  r->replica_id = chosen.id;
  r->assignment = a.assignment;
  r->assigned_ns = clock_.NowNanos();
  replicas_.AddInFlight(chosen.id, +1);
  // A request offered again (refused, or migrated) counts once among recent prompt lengths, and
  // once among long-tail requests; every offer is a routing decision.
  const bool first_offer = !r->length_recorded;
  // A choice of a prompt whose long-tail decision another choice made counts no length.
  const bool decides_prompt = !r->prompt_long_tail || !r->prompt_long_tail->has_value();
  if (r->prompt_long_tail && !r->prompt_long_tail->has_value()) *r->prompt_long_tail = d->long_tail;
  router_.Record(route, chosen, /*count_length=*/first_offer && decides_prompt);
  r->length_recorded = true;
  metrics_->Routed(chosen.id, d->policy, std::string(EnumName(d->pool))).Increment();
  if (first_offer) {
    metrics_->requests_dispatched.Increment();
    if (d->long_tail) metrics_->long_tail_requests.Increment();
  }
  return true;
}

int64_t CoordinatorServer::Core::ContextNeeded(const CoordRequest& r) {
  // With a max_tokens of the client's, all of it. Without, the output runs to the chosen
  // replica's context: the prompt, the tokens already streamed (a migrated request continues
  // after them) and one more must fit, and min_tokens.
  const uint64_t output = r.max_tokens_given
                              ? r.sampling.max_tokens
                              : std::max<uint64_t>(r.streamed_tokens.size() + 1, r.sampling.min_tokens);
  return static_cast<int64_t>(r.prompt.size() + output);
}

bool CoordinatorServer::Core::LiveContextHolds(const CoordRequest& r) const {
  for (const ReplicaState* replica : replicas_.All()) {
    const int64_t context = replica->info.context_length;
    if (replica->live && (context == 0 || context >= ContextNeeded(r))) return true;
  }
  return false;
}

void CoordinatorServer::Core::DispatchQueued() {
  if (requests_.queued() == 0) return;
  const int64_t now = clock_.NowNanos();
  // By id: a dispatch that finds its replica unreachable migrates that replica's requests and
  // dispatches the queue again from inside this loop, which may dispatch, fail and free the
  // requests listed here.
  std::vector<uint64_t> queued;
  // Every replica full, draining or dead: only deadlines to check, in any order (ranking a deep
  // queue on every arrival, when nothing can be placed, would cost the loop for nothing).
  const bool any_takes = replicas_.AnyTakesRequests();
  for (const CoordRequest* r : requests_.Queued(now, /*ranked=*/any_takes)) queued.push_back(r->id);
  // A request no replica can take (none live, accepting, with room in its pool and the context
  // it needs) tells the same of every later one of its pool that needs as much context: those
  // wait for the next pass without a pick each. A deep queue while every replica drains (a
  // rolling update) cost a registry copy and a pick per request per tick, and held the event
  // loop. Kept per pool: a full normal pool says nothing of the long-tail one.
  std::optional<int64_t> unplaceable_from[2];
  const auto nothing_placeable = [&] { unplaceable_from[0] = unplaceable_from[1] = 0; };
  if (!any_takes) nothing_placeable();
  for (uint64_t id : queued) {
    CoordRequest* r = requests_.Find(id);
    if (r == nullptr || r->state != RequestState::kQueued) continue;
    if (now - r->queued_since_ns > config_.coordinator.queue_timeout_ms * 1'000'000) {
      const std::string waited = std::to_string(config_.coordinator.queue_timeout_ms) + " ms";
      std::string why = "no live replica for " + waited;
      if (replicas_.LiveCount() > 0 && !LiveContextHolds(*r)) {
        // Migrated from a replica with a larger context, past what the others hold.
        why = "no live replica's context holds the request's " + std::to_string(ContextNeeded(*r)) +
              " tokens (prompt, output so far and the least still to come) for " + waited;
      } else if (replicas_.LiveCount() > 0) {
        // Refused by replicas, or never offered: every live one was full (it waited its turn
        // in this queue) or draining.
        why = "no replica accepted the request in " + waited + " (every live one full or draining)";
      }
      Fail(r, Unavailable(why));
      continue;
    }
    if (replicas_.LiveCount() == 0) nothing_placeable();  // later ones' deadlines still count
    const int64_t needed = ContextNeeded(*r);
    const RouteRequest route{static_cast<int64_t>(r->prompt.size()), {},
                             r->prompt_long_tail ? *r->prompt_long_tail : std::nullopt};
    std::optional<int64_t>& pool_unplaceable = unplaceable_from[router_.LongTail(route) ? 1 : 0];
    if (pool_unplaceable && needed >= *pool_unplaceable) continue;
    if (!Dispatch(r)) {
      pool_unplaceable = std::min(needed, pool_unplaceable.value_or(needed));
      if (!replicas_.AnyTakesRequests()) nothing_placeable();  // the last room was taken
    }
  }
}

bool CoordinatorServer::Core::Deliver(CoordRequest* r, proto::TokenChunk chunk) {
  chunk.assignment = 0;  // between the coordinator and its replicas; clients never see it
  chunk.request_id = r->id;
  chunk.client_request_id = r->client_request_id;
  if (r->http) {
    if (r->http->abandoned()) return false;
    chunk.sequence = r->next_client_sequence++;
    StreamEvent e;
    e.kind = StreamEvent::Kind::kChunk;
    e.chunk = std::move(chunk);
    r->http->Push(std::move(e));
    return true;
  }
  if (!r->stream && chunk.finish_reason == proto::FinishReason::kNone) {
    // Non-streaming socket clients get one chunk at the end.
    r->pending_text += chunk.text;
    r->pending_logprobs.insert(r->pending_logprobs.end(), chunk.logprobs.begin(), chunk.logprobs.end());
    r->pending_top_ids.insert(r->pending_top_ids.end(), chunk.top_token_ids.begin(), chunk.top_token_ids.end());
    r->pending_top_logprobs.insert(r->pending_top_logprobs.end(), chunk.top_logprobs.begin(),
                                   chunk.top_logprobs.end());
    proto::AppendPromptLogprobs(r->pending_prompt, chunk);
    return true;
  }
  if (!r->stream) {
    chunk.text = r->pending_text + chunk.text;
    std::vector<float> lp = std::move(r->pending_logprobs);
    lp.insert(lp.end(), chunk.logprobs.begin(), chunk.logprobs.end());
    chunk.logprobs = std::move(lp);
    std::vector<uint32_t> top_ids = std::move(r->pending_top_ids);
    top_ids.insert(top_ids.end(), chunk.top_token_ids.begin(), chunk.top_token_ids.end());
    chunk.top_token_ids = std::move(top_ids);
    std::vector<float> top_lp = std::move(r->pending_top_logprobs);
    top_lp.insert(top_lp.end(), chunk.top_logprobs.begin(), chunk.top_logprobs.end());
    chunk.top_logprobs = std::move(top_lp);
    chunk.token_ids = r->streamed_tokens;
    chunk.token_offset = 0;
    proto::AppendPromptLogprobs(r->pending_prompt, chunk);
    chunk.prompt_logprob_offset = r->pending_prompt.prompt_logprob_offset;
    chunk.prompt_logprobs = std::move(r->pending_prompt.prompt_logprobs);
    chunk.prompt_ranks = std::move(r->pending_prompt.prompt_ranks);
    chunk.prompt_top_token_ids = std::move(r->pending_prompt.prompt_top_token_ids);
    chunk.prompt_top_logprobs = std::move(r->pending_prompt.prompt_top_logprobs);
  }
  chunk.sequence = r->next_client_sequence++;
  return proto::SendMessage(*client_socket_, chunk, r->client_routing_id).ok();
}

void CoordinatorServer::Core::OnChunk(const std::string& replica_id, proto::TokenChunk& chunk) {
  // Only from a registered replica (HandleWorkerMessage cancels the rest): never delivered to
  // a queued request, whose replica id is empty.
  if (replica_id.empty()) return;
  CoordRequest* r = requests_.Find(chunk.request_id);
  if (!r || r->done()) {
    // Not ours (any more): make sure the replica stops spending on it.
    if (chunk.finish_reason == proto::FinishReason::kNone) {
      SendToWorker(replica_id, proto::WorkerCancel{chunk.request_id});
    }
    return;
  }
  if (replica_id != r->replica_id) {
    // From a replica the request has left (it was taken for dead and its requests moved, or
    // it refused and the request went elsewhere): that copy is an orphan, so stop it.
    if (chunk.finish_reason == proto::FinishReason::kNone) {
      SendToWorker(replica_id, proto::WorkerCancel{chunk.request_id});
    }
    return;
  }
  // An older copy on the same replica (it was taken for dead, then given the request back): the
  // replica replaces that copy when the new assignment reaches it; until then, drop its chunks.
  if (chunk.assignment != r->assignment) return;
  // Drop tokens the client already has (a migrated request restarts from what was streamed).
  const size_t have = r->streamed_tokens.size();
  if (chunk.token_offset > have) {
    // Tokens between went missing on the way (a connection cut between the chunks): the text
    // would have a hole. The request continues from what the client has, as after a migration.
    TakeBackLost(r, "tokens " + std::to_string(have) + " to " + std::to_string(chunk.token_offset - 1) +
                        " never arrived");
    DispatchQueued();
    return;
  }
  if (chunk.token_offset + chunk.token_ids.size() <= have && chunk.finish_reason == proto::FinishReason::kNone &&
      !chunk.token_ids.empty()) {
    return;
  }
  if (chunk.token_offset < have) {
    const size_t skip = have - chunk.token_offset;
    // Each token's alternatives go with it (the same count for every token of a chunk).
    const size_t per_token = chunk.token_ids.empty() ? 0 : chunk.top_token_ids.size() / chunk.token_ids.size();
    const size_t skip_top = std::min(skip * per_token, chunk.top_token_ids.size());
    chunk.top_token_ids.erase(chunk.top_token_ids.begin(), chunk.top_token_ids.begin() + static_cast<long>(skip_top));
    if (chunk.top_logprobs.size() >= skip_top) {
      chunk.top_logprobs.erase(chunk.top_logprobs.begin(), chunk.top_logprobs.begin() + static_cast<long>(skip_top));
    }
    chunk.token_ids.erase(chunk.token_ids.begin(), chunk.token_ids.begin() + static_cast<long>(std::min(skip, chunk.token_ids.size())));
    if (chunk.logprobs.size() >= skip) chunk.logprobs.erase(chunk.logprobs.begin(), chunk.logprobs.begin() + static_cast<long>(skip));
    chunk.token_offset = static_cast<uint32_t>(have);
  }
  // Prompt log-probabilities come in prompt order; those the client has (a migrated request's
  // new replica scores the prompt again) are dropped, and a gap is lost output, as above.
  if (!chunk.prompt_logprobs.empty()) {
    const uint32_t next = r->prompt_logprobs_sent + 1;
    if (chunk.prompt_logprob_offset > next) {
      TakeBackLost(r, "prompt log-probabilities " + std::to_string(next) + " to " +
                          std::to_string(chunk.prompt_logprob_offset - 1) + " never arrived");
      DispatchQueued();
      return;
    }
    proto::DropPromptLogprobsBefore(chunk, next);
    if (!chunk.prompt_logprobs.empty()) {
      r->prompt_logprobs_sent = chunk.prompt_logprob_offset + static_cast<uint32_t>(chunk.prompt_logprobs.size()) - 1;
    } else if (chunk.token_ids.empty() && chunk.text.empty() && chunk.finish_reason == proto::FinishReason::kNone) {
      return;  // nothing new
    }
  }
  const int64_t now = clock_.NowNanos();
  if (!chunk.token_ids.empty()) {
    if (r->first_token_ns == 0) {
      r->first_token_ns = now;
      metrics_->time_to_first_token.Observe(double(now - r->arrival_ns) * 1e-9);
      CountQueueWait(*r, r->assigned_ns);
    } else {
      metrics_->inter_token_latency.Observe(double(now - r->last_token_ns) * 1e-9);
    }
    r->last_token_ns = now;
    metrics_->generation_tokens.Increment(double(chunk.token_ids.size()));
    r->streamed_tokens.insert(r->streamed_tokens.end(), chunk.token_ids.begin(), chunk.token_ids.end());
    requests_.SetState(r, RequestState::kStreaming);
    r->losses = 0;  // it makes progress: only losses in a row make it fail
  }
  const proto::FinishReason finish = chunk.finish_reason;
  if (finish != proto::FinishReason::kNone) {
    chunk.usage.prompt_tokens = static_cast<uint32_t>(r->prompt.size());
    CountFinished(*r, finish == proto::FinishReason::kCancelled ? "cancelled" : "ok");
  }
  const uint64_t id = r->id;
  if (!Deliver(r, std::move(chunk))) {
    if (finish != proto::FinishReason::kNone) {
      // The replica had finished it; only the answer was lost, and it is counted as it ended.
      log::Info(kLog, "client gone before its last chunk", {{"request", id}});
      requests_.Remove(id);
      return;
    }
    log::Info(kLog, "client gone; cancelling", {{"request", id}});
    Cancel(r, /*tell_client=*/false);
    return;
  }
  if (finish != proto::FinishReason::kNone) requests_.Remove(id);
}

void CoordinatorServer::Core::OnWorkerError(const std::string& replica_id, const proto::ErrorMessage& e) {
  CoordRequest* r = e.request_id ? requests_.Find(e.request_id) : nullptr;
  if (!r || replica_id.empty()) {  // not about a request, or from no registered replica
    log::Warn(kLog, "error from a replica", {{"replica", replica_id}, {"message", e.message}});
    return;
  }
  if (r->replica_id != replica_id || r->done() || e.assignment != r->assignment) return;
  if (e.code == StatusCode::kFailedPrecondition && replicas_.MarkDraining(replica_id)) {
    // Draining (the only reason a replica refuses this way): offer it nothing more.
    log::Info(kLog, "replica is draining; routing around it", {{"replica", replica_id}});
  }
  if (e.code == StatusCode::kResourceExhausted || e.code == StatusCode::kFailedPrecondition) {
    // The replica is full or draining. A full one is offered no more until it shows progress,
    // and no more than it held then, or than it took in one step (ReplicaRegistry::MarkFull).
    // The request keeps its place in the queue and its queue deadline (refusals do not restart
    // the wait), and goes to another replica at once if one has room (the loop dispatches once
    // this batch of messages is read).
    replicas_.AddInFlight(replica_id, -1);
    if (e.code == StatusCode::kResourceExhausted) {
      replicas_.MarkFull(replica_id, OfferPosition{r->offer_interval, r->offer_index});
    }
    router_.Refused(r->block_hashes, replica_id);
    requests_.SetState(r, RequestState::kQueued);
    r->replica_id.clear();
    ++r->refusals;
    room_changed_ = true;
    return;
  }
  Fail(r, Status(e.code, e.message));
}

void CoordinatorServer::Core::CancelOrphans(const std::string& replica_id,
                                            const std::vector<uint64_t>& running) {
  for (uint64_t id : running) {
    const CoordRequest* r = requests_.Find(id);
    if (r && !r->done() && r->replica_id == replica_id) continue;
    log::Info(kLog, "cancelling an orphan request on a replica", {{"request", id}, {"replica", replica_id}});
    SendToWorker(replica_id, proto::WorkerCancel{id});
  }
}

void CoordinatorServer::Core::ReassignLost(const std::string& replica_id, const proto::Heartbeat& heartbeat) {
  const ReplicaState* replica = replicas_.Find(replica_id);
  if (replica == nullptr) return;
  // What it holds, each with the assignment it serves (when it says): an older copy under the
  // same id is not the request assigned since.
  const bool numbered = heartbeat.active_assignments.size() == heartbeat.active_request_ids.size();
  std::unordered_map<uint64_t, std::optional<uint32_t>> held;
  for (size_t i = 0; i < heartbeat.active_request_ids.size(); ++i) {
    held[heartbeat.active_request_ids[i]] =
        numbered ? std::optional<uint32_t>(heartbeat.active_assignments[i]) : std::nullopt;
  }
  // Every Assign up to the newest number the replica took, or heard in a HeartbeatAck sent after
  // it (one connection keeps the order), has been read unless lost. Only numbers sent to it since
  // it registered count.
  auto ours = [&](uint32_t n) {
    return replica->assigned && NoLaterThan(replica->first_assignment, n) && NoLaterThan(n, replica->last_assignment);
  };
  const bool taken_known = heartbeat.has_last_assignment && ours(heartbeat.last_assignment);
  const bool seen_known = heartbeat.has_seen_assignment && ours(heartbeat.seen_assignment);
  uint32_t taken = taken_known ? heartbeat.last_assignment : heartbeat.seen_assignment;
  if (taken_known && seen_known && NoLaterThan(taken, heartbeat.seen_assignment)) taken = heartbeat.seen_assignment;
  // The fallback when neither number tells (the acks lost too): a replica reads every message
  // that came between two steps, and stops heartbeating when one step runs past
  // parallel.step_timeout_ms, so an Assign it has not taken by twice that (or twice the liveness
  // timeout) after it was sent never reached it.
  const int64_t overdue_ns =
      2 * std::max(config_.parallel.step_timeout_ms, config_.coordinator.liveness_timeout_ms) * 1'000'000;
  const int64_t now = clock_.NowNanos();
  // By id: taking one back may find the replica unreachable, which moves and may free others.
  std::vector<std::pair<uint64_t, const char*>> lost;
  for (const CoordRequest* r : requests_.OnReplica(replica_id)) {
    const auto it = held.find(r->id);
    if (it != held.end() && (!it->second || *it->second == r->assignment)) continue;
    if ((taken_known || seen_known) && NoLaterThan(r->assignment, taken)) {
      lost.emplace_back(r->id, "not held there, though assigned no later than the last Assign the replica took "
                               "or heard of");
    } else if (now - r->assigned_ns > overdue_ns) {
      lost.emplace_back(r->id, "its Assign never reached the replica");
    }
  }
  if (lost.empty()) return;
  for (const auto& [id, what] : lost) {
    CoordRequest* r = requests_.Find(id);
    if (r == nullptr || r->done() || r->state == RequestState::kQueued || r->replica_id != replica_id) continue;
    TakeBackLost(r, what);
  }
  DispatchQueued();
}

void CoordinatorServer::Core::TakeBackLost(CoordRequest* r, const std::string& what) {
  const std::string replica_id = r->replica_id;
  log::Warn(kLog, "a replica lost a request; assigning it again",
            {{"request", r->id}, {"replica", replica_id}, {"what", what},
             {"tokens_streamed", r->streamed_tokens.size()}});
  if (++r->losses > kMaxLosses) {
    Fail(r, Internal("request lost by its replicas " + std::to_string(r->losses) + " times (the last: replica '" +
                     replica_id + "': " + what + ")"));
    return;
  }
  Requeue(r);
  // After the request has left: a send that finds the replica unreachable moves what is still
  // there, and must not take this one along. The replica may hold a copy (a hole in its chunks).
  StopOnReplica(replica_id, r->id);
}

void CoordinatorServer::Core::Requeue(CoordRequest* r) {
  replicas_.AddInFlight(r->replica_id, -1);
  requests_.SetState(r, RequestState::kQueued);
  r->queued_since_ns = clock_.NowNanos();  // the queue timeout starts again
  r->replica_id.clear();
  ++r->migrations;
  metrics_->migrations.Increment();
}

void CoordinatorServer::Core::Migrate(const std::string& replica_id) {
  for (CoordRequest* r : requests_.OnReplica(replica_id)) {
    Requeue(r);
    log::Info(kLog, "migrating request", {{"request", r->id}, {"from", replica_id},
                                          {"tokens_streamed", r->streamed_tokens.size()}});
  }
  DispatchQueued();
}

std::string CoordinatorServer::Core::AssignedReplica(const CoordRequest& r) {
  return r.state != RequestState::kQueued ? r.replica_id : std::string();
}

void CoordinatorServer::Core::StopOnReplica(const std::string& replica_id, uint64_t request_id) {
  if (!replica_id.empty()) SendToWorker(replica_id, proto::WorkerCancel{request_id});
}

void CoordinatorServer::Core::Cancel(CoordRequest* r, bool tell_client) {
  // The replica is told after the request is gone: a send that finds it unreachable migrates
  // its requests, and must not take this one along.
  const std::string replica = AssignedReplica(*r);
  const uint64_t id = r->id;
  CountFinished(*r, "cancelled");
  if (tell_client) {
    proto::TokenChunk last;
    last.finish_reason = proto::FinishReason::kCancelled;
    last.token_offset = static_cast<uint32_t>(r->streamed_tokens.size());
    last.usage = proto::Usage{static_cast<uint32_t>(r->prompt.size()),
                              static_cast<uint32_t>(r->streamed_tokens.size()), 0};
    (void)Deliver(r, std::move(last));
  }
  requests_.Remove(id);
  StopOnReplica(replica, id);
}

void CoordinatorServer::Core::Fail(CoordRequest* r, const Status& status) {
  const std::string replica = AssignedReplica(*r);
  const uint64_t id = r->id;
  CountFinished(*r, "error");
  if (r->http) {
    StreamEvent e;
    e.kind = StreamEvent::Kind::kError;
    e.status = status;
    r->http->Push(std::move(e));
  } else {
    SendClientError(r->client_routing_id, status, r->client_request_id, 0);
  }
  requests_.Remove(id);
  StopOnReplica(replica, id);
}

void CoordinatorServer::Core::FailAll(const Status& status) {
  std::vector<uint64_t> ids;
  for (const CoordRequest* r : requests_.All()) ids.push_back(r->id);
  for (uint64_t id : ids) {
    if (CoordRequest* r = requests_.Find(id)) Fail(r, status);
  }
}

void CoordinatorServer::Core::CountQueueWait(CoordRequest& r, int64_t left_queue_ns) {
  if (r.queue_wait_counted) return;
  r.queue_wait_counted = true;
  metrics_->queue_wait.Observe(double(std::max<int64_t>(left_queue_ns - r.arrival_ns, 0)) * 1e-9);
}

void CoordinatorServer::Core::CountFinished(CoordRequest& r, const std::string& outcome) {
  CountQueueWait(r, r.state == RequestState::kQueued ? clock_.NowNanos() : r.assigned_ns);
  if (const std::string replica = AssignedReplica(r); !replica.empty()) {
    replicas_.AddInFlight(replica, -1);
    room_changed_ = true;  // a full replica takes the next queued request
  }
  metrics_->Finished(outcome).Increment();
  metrics_->e2e_latency.Observe(double(clock_.NowNanos() - r.arrival_ns) * 1e-9);
}

void CoordinatorServer::Core::CountRefused(const Status& why, uint32_t requests) {
  if (requests == 0) return;
  requests_received_ += requests;
  metrics_->requests_total.Increment(requests);
  switch (why.code()) {
    case StatusCode::kCancelled: metrics_->Finished("cancelled").Increment(requests); return;
    case StatusCode::kResourceExhausted: metrics_->Rejected("overloaded").Increment(requests); return;
    case StatusCode::kUnavailable: metrics_->Rejected("unavailable").Increment(requests); return;
    case StatusCode::kUnauthenticated: metrics_->rejected_unauthenticated->Increment(requests); return;
    default: metrics_->Rejected("invalid").Increment(requests); return;
  }
}

void CoordinatorServer::Core::SendClientError(const std::string& routing_id, const Status& s,
                                              const std::string& client_request_id,
                                              uint32_t retry_after_ms) {
  if (routing_id.empty()) return;
  (void)proto::SendMessage(*client_socket_,
                           proto::ErrorMessage{s.code(), s.message(), 0, client_request_id, retry_after_ms},
                           routing_id);
}

}  // namespace bmad::coord
