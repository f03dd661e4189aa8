#include "common/proto/codec.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <cstring>
#include <new>

#include "bmad.capnp.h"

namespace bmad::proto {
namespace {

// ---------- helpers: lists ----------

template <typename Builder, typename T>
void SetList(Builder builder, const std::vector<T>& values) {
  for (size_t i = 0; i < values.size(); ++i) builder.set(static_cast<unsigned>(i), values[i]);
}

template <typename T, typename Reader>
std::vector<T> GetList(Reader reader) {
  std::vector<T> out;
  out.reserve(reader.size());
  for (auto v : reader) out.push_back(v);
  return out;
}

// Thrown inside the decode try-block for semantic errors; turned into kInvalidArgument.
struct InvalidContents {
  std::string message;
};

// A decoded text takes a std::string (32 bytes and more) for each 8-byte wire pointer: a message
// within the size limit holding millions of empty texts would decode into several times its
// size. Lists of texts are bounded well above any legitimate use (sampling allows 8 stop strings).
constexpr size_t kMaxTextListItems = 1024;

std::vector<std::string> GetTextList(capnp::List<capnp::Text>::Reader reader, const char* field) {
  if (reader.size() > kMaxTextListItems) {
    throw InvalidContents{std::string(field) + " holds " + std::to_string(reader.size()) +
                               " texts, more than the protocol takes (" + std::to_string(kMaxTextListItems) + ")"};
  }
  std::vector<std::string> out;
  out.reserve(reader.size());
  for (auto v : reader) out.emplace_back(v.cStr(), v.size());
  return out;
}

// Text with its exact length: std::string's implicit conversion goes through c_str(), which
// would cut the text at an embedded NUL byte (a real token can decode to one).
capnp::Text::Reader Txt(const std::string& s) { return capnp::Text::Reader(s.data(), s.size()); }

std::string GetText(capnp::Text::Reader text) { return std::string(text.cStr(), text.size()); }

// ---------- enums ----------

wire::FinishReason ToWire(FinishReason r) {
  switch (r) {
    case FinishReason::kNone: return wire::FinishReason::NONE;
    case FinishReason::kStop: return wire::FinishReason::STOP;
    case FinishReason::kLength: return wire::FinishReason::LENGTH;
    case FinishReason::kCancelled: return wire::FinishReason::CANCELLED;
    case FinishReason::kError: return wire::FinishReason::ERROR;
  }
  return wire::FinishReason::NONE;
}

FinishReason FromWire(wire::FinishReason r) {
  switch (r) {
    case wire::FinishReason::NONE: return FinishReason::kNone;
    case wire::FinishReason::STOP: return FinishReason::kStop;
    case wire::FinishReason::LENGTH: return FinishReason::kLength;
    case wire::FinishReason::CANCELLED: return FinishReason::kCancelled;
    case wire::FinishReason::ERROR: return FinishReason::kError;
  }
  throw InvalidContents{"unknown finish reason " + std::to_string(static_cast<int>(r))};
}

wire::ResponseFormat ToWire(ResponseFormat f) {
  switch (f) {
    case ResponseFormat::kText: return wire::ResponseFormat::TEXT;
    case ResponseFormat::kJsonObject: return wire::ResponseFormat::JSON_OBJECT;
    case ResponseFormat::kJsonSchema: return wire::ResponseFormat::JSON_SCHEMA;
    case ResponseFormat::kRegex: return wire::ResponseFormat::REGEX;
  }
  return wire::ResponseFormat::TEXT;
}

ResponseFormat FromWire(wire::ResponseFormat f) {
  switch (f) {
    case wire::ResponseFormat::TEXT: return ResponseFormat::kText;
    case wire::ResponseFormat::JSON_OBJECT: return ResponseFormat::kJsonObject;
    case wire::ResponseFormat::JSON_SCHEMA: return ResponseFormat::kJsonSchema;
    case wire::ResponseFormat::REGEX: return ResponseFormat::kRegex;
  }
  throw InvalidContents{"unknown response format " + std::to_string(static_cast<int>(f))};
}

wire::Pool ToWire(ReplicaPool p) {
  return p == ReplicaPool::kLongTail ? wire::Pool::LONG_TAIL : wire::Pool::NORMAL;
}

ReplicaPool FromWire(wire::Pool p) {
  switch (p) {
    case wire::Pool::NORMAL: return ReplicaPool::kNormal;
    case wire::Pool::LONG_TAIL: return ReplicaPool::kLongTail;
  }
  throw InvalidContents{"unknown pool " + std::to_string(static_cast<int>(p))};
}

StatusCode CodeFromWire(uint16_t code) {
  if (code > static_cast<uint16_t>(StatusCode::kLastCode)) {
    throw InvalidContents{"unknown error code " + std::to_string(code)};
  }
  return static_cast<StatusCode>(code);
}

// ---------- structs: to wire ----------

void Fill(wire::SamplingParams::Builder b, const SamplingParams& s) {
  b.setTemperature(s.temperature);
  b.setTopK(s.top_k);
  b.setTopP(s.top_p);
  b.setMinP(s.min_p);
  b.setRepetitionPenalty(s.repetition_penalty);
  b.setPresencePenalty(s.presence_penalty);
  b.setFrequencyPenalty(s.frequency_penalty);
  b.setSeed(s.seed);
  b.setHasSeed(s.has_seed);
  b.setMaxTokens(s.max_tokens);
  SetList(b.initStopTokenIds(static_cast<unsigned>(s.stop_token_ids.size())), s.stop_token_ids);
  auto stops = b.initStopStrings(static_cast<unsigned>(s.stop_strings.size()));
  for (size_t i = 0; i < s.stop_strings.size(); ++i) {
    stops.set(static_cast<unsigned>(i), Txt(s.stop_strings[i]));
  }
  b.setLogprobs(s.logprobs);
  b.setIgnoreEos(s.ignore_eos);
  b.setTopLogprobs(s.top_logprobs);
  b.setMinTokens(s.min_tokens);
  b.setIncludeStopStrInOutput(s.include_stop_str_in_output);
  b.setResponseFormat(ToWire(s.response_format));
  b.setJsonSchema(Txt(s.json_schema));
  auto biases = b.initLogitBias(static_cast<unsigned>(s.logit_bias.size()));
  for (size_t i = 0; i < s.logit_bias.size(); ++i) {
    biases[static_cast<unsigned>(i)].setTokenId(s.logit_bias[i].token_id);
    biases[static_cast<unsigned>(i)].setBias(s.logit_bias[i].bias);
  }
  b.setRegex(Txt(s.regex));
  b.setPromptLogprobs(s.prompt_logprobs);
  b.setCacheSalt(Txt(s.cache_salt));
  b.setDisableAnyWhitespace(s.disable_any_whitespace);
  b.setReasoningEndToken(s.reasoning_end_token);
  b.setReasoningStartToken(s.reasoning_start_token);
  SetList(b.initAllowedTokenIds(static_cast<unsigned>(s.allowed_token_ids.size())), s.allowed_token_ids);
  auto bad_words = b.initBadWords(static_cast<unsigned>(s.bad_words.size()));
  for (size_t i = 0; i < s.bad_words.size(); ++i) {
    SetList(bad_words.init(static_cast<unsigned>(i), static_cast<unsigned>(s.bad_words[i].size())), s.bad_words[i]);
  }
}

void Fill(wire::Usage::Builder b, const Usage& u) {
  b.setPromptTokens(u.prompt_tokens);
  b.setCompletionTokens(u.completion_tokens);
  b.setCachedPromptTokens(u.cached_prompt_tokens);
}

void Fill(wire::LoadStats::Builder b, const LoadStats& l) {
  b.setRunning(l.running);
  b.setWaiting(l.waiting);
  b.setKvUsage(l.kv_usage);
  b.setUtilization(l.utilization);
  b.setKvFreeBlocks(l.kv_free_blocks);
  b.setKvTotalBlocks(l.kv_total_blocks);
  b.setStepsTotal(l.steps_total);
  b.setGeneratedTokensTotal(l.generated_tokens_total);
  b.setMaxSeqs(l.max_seqs);
}

void Fill(wire::ReplicaInfo::Builder b, const ReplicaInfo& r) {
  b.setReplicaId(Txt(r.replica_id));
  b.setPool(ToWire(r.pool));
  b.setTp(r.tp);
  b.setPp(r.pp);
  b.setKvBlocks(r.kv_blocks);
  b.setBlockSize(r.block_size);
  b.setMaxSeqs(r.max_seqs);
  b.setModelName(Txt(r.model_name));
  b.setContextLength(r.context_length);
  b.setMetricsAddress(Txt(r.metrics_address));
  b.setLive(r.live);
  Fill(b.initLoad(), r.load);
  b.setInFlight(r.in_flight);
  b.setRoutedTotal(r.routed_total);
}

struct BodyFiller {
  wire::Envelope::Body::Builder body;

  void operator()(const Submit& m) {
    auto b = body.initSubmit();
    b.setClientRequestId(Txt(m.client_request_id));
    b.setModel(Txt(m.model));
    if (m.prompt_is_tokens) {
      SetList(b.getPrompt().initTokenIds(static_cast<unsigned>(m.prompt_tokens.size())),
              m.prompt_tokens);
    } else {
      b.getPrompt().setText(Txt(m.prompt_text));
    }
    Fill(b.initSampling(), m.sampling);
    b.setPriority(m.priority);
    b.setSloMs(m.slo_ms);
    b.setStream(m.stream);
    if (!m.api_key.empty()) b.setApiKey(Txt(m.api_key));
  }
  void operator()(const Cancel& m) {
    auto b = body.initCancel();
    b.setClientRequestId(Txt(m.client_request_id));
    b.setRequestId(m.request_id);
  }
  void operator()(const Accepted& m) {
    auto b = body.initAccepted();
    b.setClientRequestId(Txt(m.client_request_id));
    b.setRequestId(m.request_id);
    b.setPromptTokens(m.prompt_tokens);
  }
  void operator()(const TokenChunk& m) {
    auto b = body.initTokenChunk();
    b.setRequestId(m.request_id);
    b.setClientRequestId(Txt(m.client_request_id));
    b.setSequence(m.sequence);
    b.setTokenOffset(m.token_offset);
    SetList(b.initTokenIds(static_cast<unsigned>(m.token_ids.size())), m.token_ids);
    b.setText(Txt(m.text));
    SetList(b.initLogprobs(static_cast<unsigned>(m.logprobs.size())), m.logprobs);
    b.setFinishReason(ToWire(m.finish_reason));
    Fill(b.initUsage(), m.usage);
    SetList(b.initTopTokenIds(static_cast<unsigned>(m.top_token_ids.size())), m.top_token_ids);
    SetList(b.initTopLogprobs(static_cast<unsigned>(m.top_logprobs.size())), m.top_logprobs);
    b.setAssignment(m.assignment);
    b.setStopString(Txt(m.stop_string));
    b.setStopTokenId(m.stop_token_id);
    b.setPromptLogprobOffset(m.prompt_logprob_offset);
    SetList(b.initPromptLogprobs(static_cast<unsigned>(m.prompt_logprobs.size())), m.prompt_logprobs);
    SetList(b.initPromptRanks(static_cast<unsigned>(m.prompt_ranks.size())), m.prompt_ranks);
    SetList(b.initPromptTopTokenIds(static_cast<unsigned>(m.prompt_top_token_ids.size())), m.prompt_top_token_ids);
    SetList(b.initPromptTopLogprobs(static_cast<unsigned>(m.prompt_top_logprobs.size())), m.prompt_top_logprobs);
  }
  void operator()(const ErrorMessage& m) {
    auto b = body.initError();
    b.setCode(static_cast<uint16_t>(m.code));
    b.setMessage(Txt(m.message));
    b.setRequestId(m.request_id);
    b.setClientRequestId(Txt(m.client_request_id));
    b.setRetryAfterMs(m.retry_after_ms);
    b.setAssignment(m.assignment);
  }
  void operator()(const StatusQuery&) { body.initStatusQuery(); }
  void operator()(const ClusterStatus& m) {
    auto b = body.initClusterStatus();
    b.setModelName(Txt(m.model_name));
    auto list = b.initReplicas(static_cast<unsigned>(m.replicas.size()));
    for (size_t i = 0; i < m.replicas.size(); ++i) Fill(list[static_cast<unsigned>(i)], m.replicas[i]);
    b.setQueued(m.queued);
    b.setInFlight(m.in_flight);
    b.setRequestsTotal(m.requests_total);
  }
  void operator()(const Register& m) {
    auto b = body.initRegister();
    Fill(b.initInfo(), m.info);
    b.setIncarnation(m.incarnation);
  }
  void operator()(const RegisterAck& m) {
    auto b = body.initRegisterAck();
    b.setAccepted(m.accepted);
    b.setMessage(Txt(m.message));
  }
  void operator()(const Heartbeat& m) {
    auto b = body.initHeartbeat();
    b.setReplicaId(Txt(m.replica_id));
    Fill(b.initLoad(), m.load);
    SetList(b.initActiveRequestIds(static_cast<unsigned>(m.active_request_ids.size())),
            m.active_request_ids);
    b.setLastAssignment(m.last_assignment);
    b.setHasLastAssignment(m.has_last_assignment);
    SetList(b.initActiveAssignments(static_cast<unsigned>(m.active_assignments.size())),
            m.active_assignments);
    b.setSeenAssignment(m.seen_assignment);
    b.setHasSeenAssignment(m.has_seen_assignment);
  }
  void operator()(const Assign& m) {
    auto b = body.initAssign();
    b.setRequestId(m.request_id);
    SetList(b.initPromptTokens(static_cast<unsigned>(m.prompt_tokens.size())), m.prompt_tokens);
    SetList(b.initGeneratedTokens(static_cast<unsigned>(m.generated_tokens.size())),
            m.generated_tokens);
    Fill(b.initSampling(), m.sampling);
    b.setPriority(m.priority);
    b.setSloMs(m.slo_ms);
    b.setArrivalUnixMs(m.arrival_unix_ms);
    b.setAssignment(m.assignment);
  }
  void operator()(const WorkerCancel& m) { body.initWorkerCancel().setRequestId(m.request_id); }
  void operator()(const Drain&) { body.initDrain(); }
  void operator()(const HeartbeatAck& m) {
    auto b = body.initHeartbeatAck();
    b.setLastAssignment(m.last_assignment);
    b.setHasLastAssignment(m.has_last_assignment);
  }
  void operator()(const Shutdown& m) {
    auto b = body.initShutdown();
    b.setReason(Txt(m.reason));
    b.setPlanned(m.planned);
  }
  void operator()(const StepPlan& m) {
    auto b = body.initStepPlan();
    b.setStep(m.step);
    auto news = b.initNewSequences(static_cast<unsigned>(m.new_sequences.size()));
    for (size_t i = 0; i < m.new_sequences.size(); ++i) {
      auto n = news[static_cast<unsigned>(i)];
      n.setSeqId(m.new_sequences[i].seq_id);
      SetList(n.initTokens(static_cast<unsigned>(m.new_sequences[i].tokens.size())),
              m.new_sequences[i].tokens);
    }
    auto sched = b.initScheduled(static_cast<unsigned>(m.scheduled.size()));
    for (size_t i = 0; i < m.scheduled.size(); ++i) {
      const ScheduledSequence& s = m.scheduled[i];
      auto o = sched[static_cast<unsigned>(i)];
      o.setSeqId(s.seq_id);
      o.setPosition(s.position);
      o.setNumTokens(s.num_tokens);
      SetList(o.initAppendTokens(static_cast<unsigned>(s.append_tokens.size())), s.append_tokens);
      SetList(o.initNewBlockIds(static_cast<unsigned>(s.new_block_ids.size())), s.new_block_ids);
      o.setWantLogits(s.want_logits);
    }
    SetList(b.initReleased(static_cast<unsigned>(m.released.size())), m.released);
    b.setShutdown(m.shutdown);
  }
};

// ---------- structs: from wire ----------

SamplingParams Read(wire::SamplingParams::Reader r) {
  SamplingParams s;
  s.temperature = r.getTemperature();
  s.top_k = r.getTopK();
  s.top_p = r.getTopP();
  s.min_p = r.getMinP();
  s.repetition_penalty = r.getRepetitionPenalty();
  s.presence_penalty = r.getPresencePenalty();
  s.frequency_penalty = r.getFrequencyPenalty();
  s.seed = r.getSeed();
  s.has_seed = r.getHasSeed();
  s.max_tokens = r.getMaxTokens();
  s.stop_token_ids = GetList<uint32_t>(r.getStopTokenIds());
  s.stop_strings = GetTextList(r.getStopStrings(), "stopStrings");
  s.logprobs = r.getLogprobs();
  s.ignore_eos = r.getIgnoreEos();
  s.top_logprobs = r.getTopLogprobs();
  s.min_tokens = r.getMinTokens();
  s.include_stop_str_in_output = r.getIncludeStopStrInOutput();
  s.response_format = FromWire(r.getResponseFormat());
  s.json_schema = GetText(r.getJsonSchema());
  for (auto b : r.getLogitBias()) s.logit_bias.push_back(LogitBias{b.getTokenId(), b.getBias()});
  s.regex = GetText(r.getRegex());
  s.prompt_logprobs = r.getPromptLogprobs();
  s.cache_salt = GetText(r.getCacheSalt());
  s.disable_any_whitespace = r.getDisableAnyWhitespace();
  s.reasoning_end_token = r.getReasoningEndToken();
  s.reasoning_start_token = r.getReasoningStartToken();
  s.allowed_token_ids = GetList<uint32_t>(r.getAllowedTokenIds());
  for (auto word : r.getBadWords()) s.bad_words.push_back(GetList<uint32_t>(word));
  return s;
}

Usage Read(wire::Usage::Reader r) {
  return Usage{r.getPromptTokens(), r.getCompletionTokens(), r.getCachedPromptTokens()};
}

LoadStats Read(wire::LoadStats::Reader r) {
  LoadStats l;
  l.running = r.getRunning();
  l.waiting = r.getWaiting();
  l.kv_usage = r.getKvUsage();
  l.utilization = r.getUtilization();
  l.kv_free_blocks = r.getKvFreeBlocks();
  l.kv_total_blocks = r.getKvTotalBlocks();
  l.steps_total = r.getStepsTotal();
  l.generated_tokens_total = r.getGeneratedTokensTotal();
  l.max_seqs = r.getMaxSeqs();
  return l;
}

ReplicaInfo Read(wire::ReplicaInfo::Reader r) {
  ReplicaInfo i;
  i.replica_id = GetText(r.getReplicaId());
  i.pool = FromWire(r.getPool());
  i.tp = r.getTp();
  i.pp = r.getPp();
  i.kv_blocks = r.getKvBlocks();
  i.block_size = r.getBlockSize();
  i.max_seqs = r.getMaxSeqs();
  i.model_name = GetText(r.getModelName());
  i.context_length = r.getContextLength();
  i.metrics_address = GetText(r.getMetricsAddress());
  i.live = r.getLive();
  i.load = Read(r.getLoad());
  i.in_flight = r.getInFlight();
  i.routed_total = r.getRoutedTotal();
  return i;
}

Message ReadBody(wire::Envelope::Body::Reader body) {
  switch (body.which()) {
    case wire::Envelope::Body::SUBMIT: {
      auto r = body.getSubmit();
      Submit m;
      m.client_request_id = GetText(r.getClientRequestId());
      m.model = GetText(r.getModel());
      auto prompt = r.getPrompt();
      switch (prompt.which()) {
        case wire::Submit::Prompt::TEXT:
          m.prompt_text = GetText(prompt.getText());
          break;
        case wire::Submit::Prompt::TOKEN_IDS:
          m.prompt_is_tokens = true;
          m.prompt_tokens = GetList<uint32_t>(prompt.getTokenIds());
          break;
        default:
          throw InvalidContents{"submit: unknown prompt kind"};
      }
      m.sampling = Read(r.getSampling());
      m.priority = r.getPriority();
      m.slo_ms = r.getSloMs();
      m.stream = r.getStream();
      m.api_key = GetText(r.getApiKey());
      return m;
    }
    case wire::Envelope::Body::CANCEL: {
      auto r = body.getCancel();
      return Cancel{GetText(r.getClientRequestId()), r.getRequestId()};
    }
    case wire::Envelope::Body::ACCEPTED: {
      auto r = body.getAccepted();
      return Accepted{GetText(r.getClientRequestId()), r.getRequestId(), r.getPromptTokens()};
    }
    case wire::Envelope::Body::TOKEN_CHUNK: {
      auto r = body.getTokenChunk();
      TokenChunk m;
      m.request_id = r.getRequestId();
      m.client_request_id = GetText(r.getClientRequestId());
      m.sequence = r.getSequence();
      m.token_offset = r.getTokenOffset();
      m.token_ids = GetList<uint32_t>(r.getTokenIds());
      m.text = GetText(r.getText());
      m.logprobs = GetList<float>(r.getLogprobs());
      m.finish_reason = FromWire(r.getFinishReason());
      m.usage = Read(r.getUsage());
      m.top_token_ids = GetList<uint32_t>(r.getTopTokenIds());
      m.top_logprobs = GetList<float>(r.getTopLogprobs());
      m.assignment = r.getAssignment();
      m.stop_string = GetText(r.getStopString());
      m.stop_token_id = r.getStopTokenId();
      m.prompt_logprob_offset = r.getPromptLogprobOffset();
      m.prompt_logprobs = GetList<float>(r.getPromptLogprobs());
      m.prompt_ranks = GetList<uint32_t>(r.getPromptRanks());
      m.prompt_top_token_ids = GetList<uint32_t>(r.getPromptTopTokenIds());
      m.prompt_top_logprobs = GetList<float>(r.getPromptTopLogprobs());
      return m;
    }
    case wire::Envelope::Body::ERROR: {
      auto r = body.getError();
      ErrorMessage m;
      m.code = CodeFromWire(r.getCode());
      // An error that says "OK" would fail a request with a status that is not a failure.
      if (m.code == StatusCode::kOk) throw InvalidContents{"an error message with code 0 (OK)"};
      m.message = GetText(r.getMessage());
      m.request_id = r.getRequestId();
      m.client_request_id = GetText(r.getClientRequestId());
      m.retry_after_ms = r.getRetryAfterMs();
      m.assignment = r.getAssignment();
      return m;
    }
    case wire::Envelope::Body::STATUS_QUERY:
      return StatusQuery{};
    case wire::Envelope::Body::CLUSTER_STATUS: {
      auto r = body.getClusterStatus();
      ClusterStatus m;
      m.model_name = GetText(r.getModelName());
      for (auto rep : r.getReplicas()) m.replicas.push_back(Read(rep));
      m.queued = r.getQueued();
      m.in_flight = r.getInFlight();
      m.requests_total = r.getRequestsTotal();
      return m;
    }
    case wire::Envelope::Body::REGISTER: {
      auto r = body.getRegister();
      return Register{Read(r.getInfo()), r.getIncarnation()};
    }
    case wire::Envelope::Body::REGISTER_ACK: {
      auto r = body.getRegisterAck();
      return RegisterAck{r.getAccepted(), GetText(r.getMessage())};
    }
    case wire::Envelope::Body::HEARTBEAT: {
      auto r = body.getHeartbeat();
      return Heartbeat{GetText(r.getReplicaId()),
                       Read(r.getLoad()),
                       GetList<uint64_t>(r.getActiveRequestIds()),
                       r.getLastAssignment(),
                       r.getHasLastAssignment(),
                       GetList<uint32_t>(r.getActiveAssignments()),
                       r.getSeenAssignment(),
                       r.getHasSeenAssignment()};
    }
    case wire::Envelope::Body::ASSIGN: {
      auto r = body.getAssign();
      Assign m;
      m.request_id = r.getRequestId();
      m.prompt_tokens = GetList<uint32_t>(r.getPromptTokens());
      m.generated_tokens = GetList<uint32_t>(r.getGeneratedTokens());
      m.sampling = Read(r.getSampling());
      m.priority = r.getPriority();
      m.slo_ms = r.getSloMs();
      m.arrival_unix_ms = r.getArrivalUnixMs();
      m.assignment = r.getAssignment();
      return m;
    }
    case wire::Envelope::Body::WORKER_CANCEL:
      return WorkerCancel{body.getWorkerCancel().getRequestId()};
    case wire::Envelope::Body::DRAIN:
      return Drain{};
    case wire::Envelope::Body::HEARTBEAT_ACK: {
      auto r = body.getHeartbeatAck();
      return HeartbeatAck{r.getLastAssignment(), r.getHasLastAssignment()};
    }
    case wire::Envelope::Body::SHUTDOWN:
      return Shutdown{GetText(body.getShutdown().getReason()), body.getShutdown().getPlanned()};
    case wire::Envelope::Body::STEP_PLAN: {
      auto r = body.getStepPlan();
      StepPlan m;
      m.step = r.getStep();
      for (auto n : r.getNewSequences()) {
        m.new_sequences.push_back(NewSequence{n.getSeqId(), GetList<uint32_t>(n.getTokens())});
      }
      for (auto s : r.getScheduled()) {
        ScheduledSequence o;
        o.seq_id = s.getSeqId();
        o.position = s.getPosition();
        o.num_tokens = s.getNumTokens();
        o.append_tokens = GetList<uint32_t>(s.getAppendTokens());
        o.new_block_ids = GetList<uint32_t>(s.getNewBlockIds());
        o.want_logits = s.getWantLogits();
        m.scheduled.push_back(std::move(o));
      }
      m.released = GetList<uint64_t>(r.getReleased());
      m.shutdown = r.getShutdown();
      return m;
    }
  }
  throw InvalidContents{"unknown message kind " + std::to_string(static_cast<int>(body.which()))};
}

}  // namespace

static_assert(wire::PROTOCOL_VERSION == kProtocolVersion,
              "bmad.capnp's protocolVersion and proto::kProtocolVersion must agree");

std::string Encode(const Message& message) { return EncodeStamped(message, kProtocolVersion); }

std::string EncodeStamped(const Message& message, uint16_t version) {
  capnp::MallocMessageBuilder builder;
  auto envelope = builder.initRoot<wire::Envelope>();
  envelope.setVersion(version);
  std::visit(BodyFiller{envelope.getBody()}, message);
  kj::Array<capnp::word> words = capnp::messageToFlatArray(builder);
  kj::ArrayPtr<const kj::byte> bytes = words.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

namespace {

// `size` bytes (a whole number of words) copied to aligned words: Cap'n Proto reads words in
// place and needs 8-byte alignment; ZeroMQ frames usually are, but copying keeps decoding safe
// for any caller.
kj::Array<capnp::word> AlignedWords(const void* data, size_t size) {
  kj::Array<capnp::word> words = kj::heapArray<capnp::word>(size / sizeof(capnp::word));
  std::memcpy(words.begin(), data, size);
  return words;
}

// Bounded by the message's own size, not the largest allowed: Cap'n Proto charges a list of
// zero-sized structs one word per element, so a 200-byte Submit whose logit_bias list claimed
// 8 million entries decoded them all (67 MB, 0.1 s of the event loop) under a limit sized for
// 64 MiB messages. Reading a well-formed message visits each word once; twice leaves room.
capnp::ReaderOptions ReaderOptionsFor(size_t size) {
  capnp::ReaderOptions options;
  options.traversalLimitInWords = 2 * (size / sizeof(capnp::word)) + 64;
  options.nestingLimit = 16;
  return options;
}

}  // namespace

std::optional<uint16_t> EnvelopeVersion(const void* data, size_t size) {
  if (size == 0 || size % sizeof(capnp::word) != 0 || size > kDefaultMaxMessageBytes) return std::nullopt;
  kj::Array<capnp::word> words = AlignedWords(data, size);
  try {
    capnp::FlatArrayMessageReader reader(words.asPtr(), ReaderOptionsFor(size));
    return reader.getRoot<wire::Envelope>().getVersion();
  } catch (const kj::Exception&) {
    return std::nullopt;
  }
}

Result<Message> Decode(const void* data, size_t size, size_t max_bytes) {
  if (size > max_bytes) {
    return ResourceExhausted("message of " + std::to_string(size) +
                             " bytes exceeds the limit of " + std::to_string(max_bytes));
  }
  if (size == 0) return DataLoss("empty message");
  if (size % sizeof(capnp::word) != 0) {
    return DataLoss("truncated message: " + std::to_string(size) +
                    " bytes is not a whole number of 8-byte words");
  }
  kj::Array<capnp::word> words = AlignedWords(data, size);
  try {
    capnp::FlatArrayMessageReader reader(words.asPtr(), ReaderOptionsFor(size));
    if (reader.getEnd() != words.end()) {
      return DataLoss("trailing bytes after the message");
    }
    auto envelope = reader.getRoot<wire::Envelope>();
    if (envelope.getVersion() != kProtocolVersion) {
      return FailedPrecondition("protocol version " + std::to_string(envelope.getVersion()) +
                                " is not supported (this build speaks version " +
                                std::to_string(kProtocolVersion) + ")");
    }
    return ReadBody(envelope.getBody());
  } catch (const InvalidContents& e) {
    return InvalidArgument("invalid message: " + e.message);
  } catch (const kj::Exception& e) {
    return DataLoss("malformed message: " + std::string(e.getDescription().cStr()));
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("message of " + std::to_string(size) + " bytes: out of memory decoding it");
  }
}

}  // namespace bmad::proto
