// Parsing and validation of OpenAI request bodies: POST /v1/completions and
// /v1/chat/completions.
//
// A body becomes a CompletionRequest, or a kInvalidArgument Status whose message names the
// offending parameter first, quoted, the way OpenAI words it ("'max_tokens' must be a positive
// integer, got -5"); ErrorJson turns that into OpenAI's error object with "param" filled in.
// Whatever passes here also passes the workers' sampling::ValidateSamplingParams (the same
// limits, checked earlier and worded for HTTP clients), except stop token ids against the
// vocabulary, which only the coordinator knows.
//
// Fields (absent and null mean "not set"; fields not listed are ignored, as OpenAI clients send
// many):
//   model              string; absent or "" means the served model (the coordinator checks it)
//   prompt             completions only, required: a string, a non-empty array of token ids,
//                      or a batch: an array of up to kMaxBatchPrompts strings or of non-empty
//                      token-id arrays (all of one kind). Text prompts hold at most
//                      limits.max_prompt_bytes together. An empty string is the BOS token
//                      alone (unconditional generation, as in vLLM).
//   add_special_tokens completions, boolean, default true (vLLM's): the tokenizer's BOS before
//                      each text prompt. (Chat prompts are the template's; the field is ignored.)
//   messages           chat only, required: a non-empty array of {role, content}. role: system,
//                      developer (taken as system), user, assistant, tool (a tool's result; its
//                      tool_call_id, when given, a string); function is rejected (OpenAI's
//                      deprecated function calling). content: a string, or an array of
//                      {"type": "text", "text": ...} parts joined with "\n"; an assistant's may
//                      be null or absent (taken as ""). An assistant's tool_calls: see
//                      tool_fields.h.
//   tools, tool_choice, parallel_tool_calls  chat only: tool calling (tool_fields.h)
//   add_generation_prompt  chat, boolean, default true (vLLM's extension; default false with
//                      continue_final_message)
//   continue_final_message  chat, vLLM's: boolean; the final (assistant) message is left open
//                      for the model to continue (ChatPromptOptions). Not with
//                      add_generation_prompt true.
//   chat_template_kwargs  chat, vLLM's: an object; only enable_thinking (boolean) is read
//                      (ChatPromptOptions), any other key is refused
//   include_reasoning  chat, vLLM's: boolean, default true; false leaves a reasoning model's
//                      reasoning out of the answer (with model.reasoning_parser set)
//   echo               boolean: completions, each choice's text starts with its prompt's text,
//                      and with logprobs (not streamed) the prompt's tokens lead its logprobs,
//                      the first with null; max_tokens 0 then means the prompt alone. Chat, as
//                      vLLM: the final message's content when that is the assistant's
//   prompt_logprobs    vLLM's: integer in [0, 20], not with stream; every prompt token's
//                      log-probability, rank and that many alternatives (the first: null)
//   cache_salt         vLLM's: non-empty string of at most 1024 bytes; the prompt shares
//                      prefix-cache blocks only with requests of the same salt
//   temperature [0, 2] default 1; top_p (0, 1] default 1; top_k integer >= -1 (-1 and 0: off);
//   min_p [0, 1]; repetition_penalty > 0; presence_penalty, frequency_penalty [-2, 2];
//   seed               any 64-bit signed integer
//   max_tokens         integer in [1, limits.max_model_len]; completions default 16. Chat also
//                      takes max_completion_tokens (which wins when both are set); with neither,
//                      max_tokens stays unset: the coordinator fills in the room left.
//   stop               a string or an array of strings, each non-empty, within the limits
//   include_stop_str_in_output  vLLM's extension, boolean, default false: the stop string that
//                      ends the output is sent as its end (so is the text of a stop token,
//                      except under a JSON response_format)
//   stop_token_ids     array of token ids (vLLM's extension), at most 64
//   logit_bias         object from token ids (decimal strings) to numbers in [-100, 100], at
//                      most 4096 entries; null values are skipped
//   min_tokens         vLLM's extension: integer in [0, max_tokens]; nothing but the length
//                      limit ends the output before it has this many tokens
//   logprobs           completions: integer in [0, 20]; chat: boolean, with top_logprobs in
//                      [0, 20] (top_logprobs > 0 needs logprobs true)
//   ignore_eos         boolean
//   stream             boolean, default false; stream_options {include_usage: boolean,
//                      continuous_usage_stats: boolean (vLLM's: with include_usage, every
//                      chunk carries its choice's usage so far)} is allowed only when stream
//                      is true (as OpenAI and vLLM both insist)
//   n                  integer in [1, 128], choices per prompt; best_of (completions, and chat
//                      as vLLM) must equal n; user must be a string,
//                      and is otherwise ignored
//   response_format    {"type": "text"}, {"type": "json_object"} (the output is one JSON
//                      object) or {"type": "json_schema", "json_schema": {"schema": {...}}}
//                      (one JSON value the schema allows; name, description and strict are
//                      checked for type and otherwise ignored: the schema is always
//                      enforced); neither min_tokens nor ignore_eos with either
//   structured_outputs vLLM's: {"json": a JSON Schema (object, or its JSON text)},
//                      {"regex": a regular expression (sampling::RegexNfa's syntax) the whole
//                      output matches}, {"choice": a non-empty array of strings, the output one
//                      of them} or {"json_object": true}; guided_json, guided_regex and
//                      guided_choice are vLLM's older names. One constraint at most among
//                      these and response_format (see output_constraint_fields.h)
//   priority           bmad: integer class in [0, limits.priority_classes), 0 most urgent
//   slo_ms             bmad: latency objective in milliseconds, integer >= 0 (0: none)
//   truncate_prompt_tokens  vLLM's: -1 or an integer in [1, limits.max_model_len]; the
//                      prompt keeps only its last that many tokens
//   return_tokens_as_token_ids  vLLM's: boolean; logprobs name tokens "token_id:N"
//   return_token_ids   vLLM's: boolean; the response carries the prompt's token ids and each
//                      choice's generated ones ("prompt_token_ids", "token_ids")
//   allowed_token_ids  vLLM's: at most 262144 token ids; only they are generated
//   bad_words          vLLM's: at most 64 strings of 1 to 128 bytes, not only whitespace; none
//                      is generated (bad_words, as given here; the coordinator tokenizes them)
// Parameters OpenAI defines but this server cannot honour are rejected rather than silently
// ignored when set to anything but their neutral value: suffix (non-empty), response_format
// (another type), OpenAI's deprecated functions (non-empty) and function_call (other than
// "none"), and tools and tool_choice on completions; so are vLLM's extensions that would change
// the output or its form:
// use_beam_search (true), skip_special_tokens and spaces_between_special_tokens (false),
// guided_grammar and guided_whitespace_pattern (and their structured_outputs forms),
// chat_template, logits_processors, prompt_embeds and documents, and
// OpenAI's audio, web_search_options, reasoning_effort and prediction (anything but null or
// empty), and modalities other than ["text"].
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/proto/messages.h"
#include "common/status.h"
#include "coordinator/http/chat_template.h"
#include "worker/sampling/sampling_params_validation.h"

namespace bmad::http {

// The most choices (n) one request may ask for: OpenAI's own limit for chat.
inline constexpr uint32_t kMaxChoices = 128;
// The most prompts in one /v1/completions batch.
inline constexpr size_t kMaxBatchPrompts = 1024;
// vLLM's bad_words: words per request (each becomes up to two token sequences, within
// sampling::kMaxBadWordSequences) and bytes per word.
inline constexpr size_t kMaxBadWords = sampling::kMaxBadWordSequences / 2;
inline constexpr size_t kMaxBadWordBytes = 128;

// Bounds on one request, set by the coordinator.
struct RequestLimits {
  // Larger bodies are rejected before parsing.
  size_t max_body_bytes = 16u << 20;
  // Bytes of prompt text: the completion prompt, or all chat messages' contents together.
  size_t max_prompt_bytes = 4u << 20;
  // The model's context length in tokens: max_tokens above it, and token-id prompts longer
  // than it, are rejected. 0: not checked here.
  uint32_t max_model_len = 0;
  // Stop strings per request and bytes per stop string (above the workers' limits, the workers'
  // limits still apply).
  size_t max_stop_strings = sampling::kMaxStopStrings;
  size_t max_stop_string_bytes = sampling::kMaxStopStringBytes;
  // Priority classes are 0 .. priority_classes - 1 (coordinator.priority_classes).
  int32_t priority_classes = 3;
};

// One /v1/completions prompt: token ids when is_tokens, else text (non-empty either way).
struct CompletionPrompt {
  bool is_tokens = false;
  std::string text;
  std::vector<uint32_t> tokens;  // ids are not checked against the vocabulary here
};

// Chat's tool_choice: how the answer may call the request's tools.
enum class ToolChoice {
  kNone,      // never: the answer is content (the tools are still in the prompt, as vLLM does)
  kAuto,      // when the model writes a call (the server's tool call parser finds it)
  kRequired,  // at least one call: the answer is held to a JSON list of calls
  kFunction,  // the named function: the answer is held to its parameters' schema
};

// Chat's tools (OpenAI's "tools", "tool_choice", "parallel_tool_calls").
struct RequestTools {
  // Each tool as the chat template writes it (ChatPromptOptions::tools), in the request's order.
  std::vector<std::string> rendered;
  std::vector<std::string> names;  // each tool's function name
  ToolChoice choice = ToolChoice::kNone;
  std::string function;             // kFunction: its name
  bool parallel_calls = true;       // false: one call at most
};

struct CompletionRequest {
  bool chat = false;  // /v1/chat/completions rather than /v1/completions
  std::string model;  // "" when the client named none

  // /v1/completions: one prompt, or several (a batch); each gets n choices, numbered
  // prompt * n + choice in the response.
  std::vector<CompletionPrompt> prompts;
  // /v1/completions: vLLM's add_special_tokens, the tokenizer's BOS before each text prompt.
  bool add_special_tokens = true;

  // /v1/chat/completions: at least one message; the chat template's own rules (alternation)
  // are checked when it is applied.
  std::vector<ChatMessage> messages;
  bool add_generation_prompt = true;
  bool continue_final_message = false;
  std::optional<bool> enable_thinking;  // chat_template_kwargs.enable_thinking
  bool include_reasoning = true;        // vLLM's: the reasoning a reasoning parser splits off is sent
  RequestTools tools;                   // none unless the request gave some

  // Completions: each choice's text starts with its prompt's text. Chat: with the final
  // message's content when that is the assistant's (vLLM's rule).
  bool echo = false;
  // Completions: echo with logprobs; the echoed prompt's tokens lead each choice's logprobs
  // (sampling.prompt_logprobs asks the replicas for them).
  bool echo_logprobs = false;
  // Completions: max_tokens 0 with echo, the prompt alone; max_tokens is 1, and that token is
  // left out of the response (its text, logprobs and usage).
  bool echo_only = false;
  // vLLM's prompt_logprobs: its alternatives per position; -1: not asked (sampling.prompt_logprobs
  // asks the replicas for the most either this or echo wants).
  int32_t vllm_prompt_logprobs = -1;

  // Every sampling parameter; sampling.max_tokens equals *max_tokens when that is set. When it
  // is not (chat without max_tokens), sampling.max_tokens is 0, which the workers reject, so a
  // coordinator that forgets to fill in the room left fails loudly instead of generating 16.
  proto::SamplingParams sampling;
  std::optional<uint32_t> max_tokens;
  // Alternatives per token the client asked for (completions' logprobs, chat's top_logprobs),
  // also in sampling.top_logprobs: the replicas return them with each token.
  uint32_t top_logprobs = 0;

  uint32_t n = 1;  // choices to generate

  // vLLM's truncate_prompt_tokens: keep only the prompt's last k tokens (after the chat template
  // and the BOS; -1: as many as the context holds). A token-id prompt longer than the context is
  // then accepted, to be cut.
  std::optional<int64_t> truncate_prompt_tokens;
  // vLLM's return_tokens_as_token_ids: logprobs name tokens "token_id:N".
  bool return_tokens_as_token_ids = false;
  // vLLM's return_token_ids: the prompt's and the generated token ids in the response.
  bool return_token_ids = false;
  // vLLM's bad_words, as given; the coordinator tokenizes them into sampling.bad_words.
  std::vector<std::string> bad_words;

  bool stream = false;
  bool include_usage = false;       // stream_options.include_usage
  // stream_options.continuous_usage_stats, and include_usage (vLLM ignores the one without the
  // other): every chunk has its choice's usage so far.
  bool continuous_usage = false;
  std::optional<int32_t> priority;  // unset: the coordinator's default class
  uint32_t slo_ms = 0;              // 0: none
};

// Parses a request body. `chat` selects the endpoint's schema. kInvalidArgument for every
// malformed, mistyped, missing or out-of-range field, for bodies over limits.max_body_bytes and
// for JSON nested deeper than 275 levels; kOutOfRange for a token-id prompt longer than
// limits.max_model_len. Never throws.
Result<CompletionRequest> ParseCompletionRequest(std::string_view body, bool chat,
                                                 const RequestLimits& limits);

}  // namespace bmad::http
