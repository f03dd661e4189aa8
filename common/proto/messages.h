// Plain C++ forms of every protocol message (see bmad.capnp for the field documentation).
//
// The rest of the code base never touches Cap'n Proto readers: codec.cc decodes a frame eagerly
// into these structs inside one try block, so malformed input can only ever surface as a Status
// from Decode, never later as an exception deep in a handler.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "common/config/config.h"
#include "common/status.h"

namespace bmad::proto {

// 2: Assign, TokenChunk and Error carry `assignment`; a coordinator drops a replica's chunks
// without the number of the request's current assignment, so version 1 replicas are refused.
// 3: the coordinator answers every heartbeat with HeartbeatAck (a version 2 replica would log
// each one as unexpected).
// 4: SamplingParams.include_stop_str_in_output (a version 3 replica would leave the stop string
// out); TokenChunk.stop_string and stop_token_id (vLLM's stop_reason).
// 5: SamplingParams.response_format (a version 4 replica would generate free text).
// 6: ResponseFormat json_schema and SamplingParams.json_schema (a version 5 replica would refuse
// the format as unknown).
// 7: Submit.priority's default is -1, "the coordinator's default class" (it was 1). Cap'n Proto
// stores a number XOR its default, so a version 6 peer would read every explicit class wrong.
// 8: Submit.api_key, and error code 13 (kUnauthenticated), which a version 7 peer cannot read.
// 9: SamplingParams.allowed_token_ids, bad_words and regex, and ResponseFormat regex (a version 8
// replica would ignore the first two and refuse the format as unknown).
// 10: SamplingParams.prompt_logprobs and TokenChunk's prompt_* fields (a version 9 replica would
// not score the prompt).
// 11: SamplingParams.cache_salt (a version 10 replica would share its prefix cache across salts)
// and disable_any_whitespace (it would write whitespace in JSON output).
// 12: SamplingParams.reasoning_end_token and reasoning_start_token (a version 11 replica would
// constrain a reasoning model's output from its first token).
inline constexpr uint16_t kProtocolVersion = 12;

enum class FinishReason : uint8_t { kNone = 0, kStop, kLength, kCancelled, kError };
std::string_view FinishReasonName(FinishReason reason);  // "stop", "length", ... ("" for none)

// OpenAI's response_format: what the output must be.
enum class ResponseFormat : uint8_t {
  kText = 0,
  kJsonObject,  // one JSON object, ending the output (the sampler bans every other token)
  kJsonSchema,  // one JSON value that SamplingParams::json_schema allows, ending the output
  kRegex,       // text that SamplingParams::regex matches whole
};
// "text", "json_object", "json_schema", "regex"
std::string_view ResponseFormatName(ResponseFormat format);

// OpenAI's logit_bias entry: added to the token's logit before anything else looks at it.
struct LogitBias {
  uint32_t token_id = 0;
  float bias = 0.0f;  // in [-100, 100]
  friend bool operator==(const LogitBias&, const LogitBias&) = default;
};

struct SamplingParams {
  float temperature = 1.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;
  bool has_seed = false;
  uint32_t max_tokens = 16;
  std::vector<uint32_t> stop_token_ids;
  std::vector<std::string> stop_strings;
  bool logprobs = false;
  bool ignore_eos = false;
  uint32_t top_logprobs = 0;  // with logprobs: the most likely tokens reported per token (<= 20)
  // vLLM's min_tokens: no end-of-generation or stop token, and no stop string, ends the output
  // before it has this many tokens.
  uint32_t min_tokens = 0;
  std::vector<LogitBias> logit_bias;  // distinct token ids
  // vLLM's include_stop_str_in_output: the stop string that ends the output is sent as its end,
  // and so is the text of a stop token of stop_token_ids (OpenAI leaves them out); not under a
  // JSON response format, whose value a stop token's text would break.
  bool include_stop_str_in_output = false;
  ResponseFormat response_format = ResponseFormat::kText;
  // With kJsonSchema: the JSON Schema the output is held to, as JSON text (sampling::JsonSchema
  // says which keywords are enforced); empty otherwise.
  std::string json_schema;
  // vLLM's allowed_token_ids: when not empty, every other token is banned (duplicates allowed).
  std::vector<uint32_t> allowed_token_ids;
  // vLLM's bad_words, as token sequences (the coordinator tokenizes the words): the last token
  // of each is banned wherever the output ends with the ones before it, so none is generated
  // whole (a one-token sequence is banned everywhere).
  std::vector<std::vector<uint32_t>> bad_words;
  // With kRegex: the regular expression the whole output must match (sampling::RegexNfa says
  // which syntax); empty otherwise.
  std::string regex;
  // The prompt's own log-probabilities (vLLM's prompt_logprobs; echo with logprobs), with this
  // many alternatives per position (<= 20); -1: none.
  int32_t prompt_logprobs = -1;
  // vLLM's cache_salt: the prompt's KV blocks are found in and added to the prefix cache only
  // for requests with the same salt (block hashes start from RootBlockHash(cache_salt)); empty:
  // the cache every request without a salt shares.
  std::string cache_salt;
  // vLLM's disable_any_whitespace: with kJsonObject or kJsonSchema, no whitespace between the
  // value's tokens (inside its strings it is text).
  bool disable_any_whitespace = false;
  // A reasoning model under a response format (sampling::ReasoningGate): with
  // reasoning_end_token >= 0 the format applies only after that token, the end of the model's
  // reasoning block, and nothing ends the output before it. With reasoning_start_token >= 0 as
  // well, the block is not open when the output starts: its first token may be that one, which
  // opens it; any other first token begins the formatted output at once. -1: none.
  int32_t reasoning_end_token = -1;
  int32_t reasoning_start_token = -1;
  friend bool operator==(const SamplingParams&, const SamplingParams&) = default;
};

struct Usage {
  uint32_t prompt_tokens = 0;
  uint32_t completion_tokens = 0;
  uint32_t cached_prompt_tokens = 0;
  friend bool operator==(const Usage&, const Usage&) = default;
};

struct Submit {
  // The priority that asks for the coordinator's default class (coordinator.priority_classes
  // decides which: CoordinatorConfig::DefaultPriority).
  static constexpr int32_t kDefaultPriority = -1;

  std::string client_request_id;
  std::string model;
  bool prompt_is_tokens = false;  // which of the next two fields holds the prompt
  std::string prompt_text;
  std::vector<uint32_t> prompt_tokens;
  SamplingParams sampling;
  int32_t priority = kDefaultPriority;  // or a class, 0 the most urgent
  uint32_t slo_ms = 0;
  bool stream = true;
  // A key of coordinator.api_keys_file when the coordinator has one (the HTTP API's bearer
  // token); never logged.
  std::string api_key;
  friend bool operator==(const Submit&, const Submit&) = default;
};

struct Cancel {
  std::string client_request_id;
  uint64_t request_id = 0;
  friend bool operator==(const Cancel&, const Cancel&) = default;
};

struct Accepted {
  std::string client_request_id;
  uint64_t request_id = 0;
  uint32_t prompt_tokens = 0;
  friend bool operator==(const Accepted&, const Accepted&) = default;
};

struct TokenChunk {
  uint64_t request_id = 0;
  std::string client_request_id;
  uint32_t sequence = 0;
  uint32_t token_offset = 0;
  std::vector<uint32_t> token_ids;
  std::string text;
  std::vector<float> logprobs;
  FinishReason finish_reason = FinishReason::kNone;
  Usage usage;
  // With top_logprobs N: N alternatives per token of token_ids (fewer when the vocabulary is
  // smaller), token after token, each token's most likely first; log-probabilities alike.
  std::vector<uint32_t> top_token_ids;
  std::vector<float> top_logprobs;
  // From a replica: the number of the assignment this chunk answers (Assign::assignment), so
  // that the coordinator can tell a request's current copy from an older one under the same id.
  uint32_t assignment = 0;
  // What ended a kStop finish, as vLLM's stop_reason tells it: the stop string that was hit, or
  // the stop_token_ids entry that was drawn (-1: neither, e.g. the end-of-generation token).
  std::string stop_string;
  int64_t stop_token_id = -1;
  // With SamplingParams::prompt_logprobs: prompt positions prompt_logprob_offset onward (>= 1),
  // one entry each: its token's log-probability given the tokens before it, its rank in that
  // distribution (1: the most likely), and prompt_logprobs alternatives (most likely first).
  uint32_t prompt_logprob_offset = 0;
  std::vector<float> prompt_logprobs;
  std::vector<uint32_t> prompt_ranks;
  std::vector<uint32_t> prompt_top_token_ids;
  std::vector<float> prompt_top_logprobs;
  friend bool operator==(const TokenChunk&, const TokenChunk&) = default;
};

struct ErrorMessage {
  StatusCode code = StatusCode::kInternal;
  std::string message;
  uint64_t request_id = 0;
  std::string client_request_id;
  uint32_t retry_after_ms = 0;
  uint32_t assignment = 0;  // from a replica, about a request: as in TokenChunk
  friend bool operator==(const ErrorMessage&, const ErrorMessage&) = default;
};

struct StatusQuery {
  friend bool operator==(const StatusQuery&, const StatusQuery&) = default;
};

struct LoadStats {
  uint32_t running = 0;
  uint32_t waiting = 0;
  float kv_usage = 0.0f;
  float utilization = 0.0f;
  uint32_t kv_free_blocks = 0;
  uint32_t kv_total_blocks = 0;
  uint64_t steps_total = 0;
  uint64_t generated_tokens_total = 0;
  uint32_t max_seqs = 0;
  friend bool operator==(const LoadStats&, const LoadStats&) = default;
};

struct ReplicaInfo {
  std::string replica_id;
  ReplicaPool pool = ReplicaPool::kNormal;
  uint32_t tp = 1;
  uint32_t pp = 1;
  uint32_t kv_blocks = 0;
  uint32_t block_size = 0;
  uint32_t max_seqs = 0;
  std::string model_name;
  uint32_t context_length = 0;
  std::string metrics_address;
  bool live = false;
  LoadStats load;
  uint32_t in_flight = 0;
  uint64_t routed_total = 0;
  friend bool operator==(const ReplicaInfo&, const ReplicaInfo&) = default;
};

struct ClusterStatus {
  std::string model_name;
  std::vector<ReplicaInfo> replicas;
  uint32_t queued = 0;
  uint32_t in_flight = 0;
  uint64_t requests_total = 0;
  friend bool operator==(const ClusterStatus&, const ClusterStatus&) = default;
};

struct Register {
  ReplicaInfo info;
  uint64_t incarnation = 0;
  friend bool operator==(const Register&, const Register&) = default;
};

struct RegisterAck {
  bool accepted = false;
  std::string message;
  friend bool operator==(const RegisterAck&, const RegisterAck&) = default;
};

struct Heartbeat {
  std::string replica_id;
  LoadStats load;
  std::vector<uint64_t> active_request_ids;
  // The number (Assign::assignment) of the newest Assign taken since the replica last
  // registered; has_last_assignment is false until it has taken one. Any request the
  // coordinator assigned here no later, and not in active_request_ids, was lost on the way.
  uint32_t last_assignment = 0;
  bool has_last_assignment = false;
  // The assignment each active request is served under, in the order of active_request_ids
  // (empty from a replica that does not say): an older copy under the same id is not the one
  // the coordinator assigned since.
  std::vector<uint32_t> active_assignments;
  // The newest HeartbeatAck::last_assignment heard since the replica last registered: every
  // Assign up to it was sent before that ack on the same connection, so it has arrived unless it
  // was lost (found at once on an idle replica, where no later Assign would tell).
  uint32_t seen_assignment = 0;
  bool has_seen_assignment = false;
  friend bool operator==(const Heartbeat&, const Heartbeat&) = default;
};

struct Assign {
  uint64_t request_id = 0;
  std::vector<uint32_t> prompt_tokens;
  std::vector<uint32_t> generated_tokens;
  SamplingParams sampling;
  int32_t priority = 1;
  uint32_t slo_ms = 0;
  uint64_t arrival_unix_ms = 0;
  // A new number for every Assign the coordinator sends (a request's first, and each
  // reassignment: migration, a retry elsewhere): the next after the last, from a random start
  // per coordinator process, so that a replica's Heartbeat::last_assignment orders them.
  uint32_t assignment = 0;
  friend bool operator==(const Assign&, const Assign&) = default;
};

struct WorkerCancel {
  uint64_t request_id = 0;
  friend bool operator==(const WorkerCancel&, const WorkerCancel&) = default;
};

struct Drain {
  friend bool operator==(const Drain&, const Drain&) = default;
};

// The coordinator's answer to a heartbeat from a replica it knows.
struct HeartbeatAck {
  // The newest Assign number sent to the replica before this ack (none since it registered:
  // has_last_assignment false).
  uint32_t last_assignment = 0;
  bool has_last_assignment = false;
  friend bool operator==(const HeartbeatAck&, const HeartbeatAck&) = default;
};

struct Shutdown {
  std::string reason;
  bool planned = false;  // stopped on purpose, not failed (see bmad.capnp)
  friend bool operator==(const Shutdown&, const Shutdown&) = default;
};

struct NewSequence {
  uint64_t seq_id = 0;
  std::vector<uint32_t> tokens;
  friend bool operator==(const NewSequence&, const NewSequence&) = default;
};

struct ScheduledSequence {
  uint64_t seq_id = 0;
  uint32_t position = 0;
  uint32_t num_tokens = 0;
  std::vector<uint32_t> append_tokens;
  std::vector<uint32_t> new_block_ids;
  bool want_logits = false;
  friend bool operator==(const ScheduledSequence&, const ScheduledSequence&) = default;
};

struct StepPlan {
  uint64_t step = 0;
  std::vector<NewSequence> new_sequences;
  std::vector<ScheduledSequence> scheduled;
  std::vector<uint64_t> released;
  bool shutdown = false;
  friend bool operator==(const StepPlan&, const StepPlan&) = default;
};

// Prompt log-probabilities (TokenChunk's prompt_* fields) carried from one chunk to another:
// `from`'s appended to `into`'s (into's offset set when it has none); and those of positions
// before `first` dropped (the rest keep their order).
void AppendPromptLogprobs(TokenChunk& into, const TokenChunk& from);
void DropPromptLogprobsBefore(TokenChunk& chunk, uint32_t first);

using Message = std::variant<Submit, Cancel, Accepted, TokenChunk, ErrorMessage, StatusQuery,
                             ClusterStatus, Register, RegisterAck, Heartbeat, Assign, WorkerCancel,
                             Drain, Shutdown, StepPlan, HeartbeatAck>;

// The message's kind as a short name ("submit", "token_chunk", ...), for logs and errors.
std::string_view MessageName(const Message& message);

}  // namespace bmad::proto
