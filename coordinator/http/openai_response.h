// OpenAI-compatible responses: errors, completions, chat completions, their streamed chunks
// (server-sent events) and the model list.
//
// Every function returns finished bytes for the HTTP server to send: a JSON document, or for
// streams one complete SSE event "data: {...}\n\n". The output is always valid JSON, even when a
// token's text is only part of a UTF-8 character (a byte-fallback token): invalid bytes become
// U+FFFD in strings (chat logprobs keep the exact bytes in "bytes").
//
// A stream is, in order (chat):
//   RenderChatRoleChunk                      delta {"role": "assistant", "content": ""}
//   RenderChatChunk for each piece of text   delta {"content": "..."}
//   RenderChatChunk with the finish reason   delta {} (or the last text) and "finish_reason"
//   RenderChatUsageChunk                     only with include_usage: "choices": [], "usage"
//   SseDone()                                "data: [DONE]\n\n"
// with SseKeepAlive() comments anywhere between events while nothing else is sent.
// With n choices, each choice has its own role chunk, text chunks and finish, the choices'
// chunks interleaved; the usage chunk and [DONE] come once, after every choice has finished.
// and for completions the same without the role chunk (RenderCompletionChunk,
// RenderCompletionUsageChunk). A failure mid-stream is sent as SseEvent(ErrorJson(status)).
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/proto/messages.h"
#include "common/status.h"
#include "coordinator/http/tool_call_split.h"

namespace bmad::http {

// ---- errors ----

// InvalidArgument and OutOfRange 400, NotFound 404, ResourceExhausted 429, Cancelled 499
// (client closed the request), Unavailable 503, DeadlineExceeded 504, OK 200, others 500.
int HttpStatusFor(StatusCode code);

// OpenAI's error object:
//   {"error": {"message": ..., "type": ..., "param": ... or null, "code": ...}}
// type: "invalid_request_error" (4xx), "rate_limit_exceeded" (429), "server_error" (5xx).
// code: OpenAI's own where one fits ("context_length_exceeded" for OutOfRange,
// "model_not_found" for NotFound, "rate_limit_exceeded" for ResourceExhausted), else the
// status code's name in lower case ("invalid_argument", "unavailable", ...).
// param: `param` when given; otherwise, for 4xx errors whose message starts with a quoted
// parameter name (as every ParseCompletionRequest error does: "'top_p' must be ..."), that name;
// "model" for NotFound (the model does not exist); else null. Meant for non-OK statuses (an OK one renders as a server error saying so).
std::string ErrorJson(const Status& status, std::string_view param = {});
// The body of a 404 or 405 for a path or method the API does not have, as OpenAI words it:
// {"error": {"message": "Invalid URL (POST /v1/embeddings)", "type": "invalid_request_error",
// "param": null, "code": null}}.
std::string RouteErrorJson(std::string_view method, std::string_view path);

// An error the HTTP layer answers in OpenAI's shape, type by status (server_error from 500 up),
// param and code null.
std::string HttpErrorJson(int http_status, std::string_view message);

// The body of an error the HTTP layer answers before any handler runs (a malformed request, a
// body over the limit, a handler that threw), in the same shape, code null. `form_encoded`: the
// request said Content-Type application/x-www-form-urlencoded, which is what `curl -d` sends
// without -H; such bodies are capped at `form_max_bytes`, other bodies at `max_body_bytes`.
std::string TransportErrorJson(int http_status, bool form_encoded, size_t form_max_bytes, size_t max_body_bytes);

// ---- completions ----

// One generated token with its log-probability, for responses that asked for logprobs.
struct TokenLogprob {
  std::string token;     // the token's text; may be part of a UTF-8 character
  float logprob = 0.0f;  // non-finite values and values below -9999 are sent as -9999
  // The most likely tokens at this position (top_logprobs), most likely first; each entry's
  // `top` is empty.
  std::vector<TokenLogprob> top;
  int64_t id = -1;  // the token id; -1: unknown (then the text stands for it, as without tokens_as_ids)
  // The echoed prompt's first token, which has no log-probability: null, and null alternatives.
  bool absent = false;
};

// One prompt position in vLLM's prompt_logprobs: null for the first (`absent`), else the
// prompt's token and the alternatives it is not among, each keyed by its id:
// {"<id>": {"logprob", "rank", "decoded_token"}, ...}.
struct PromptPositionLogprobs {
  bool absent = false;
  struct Candidate {
    int64_t id = 0;
    float logprob = 0.0f;
    uint32_t rank = 0;
    std::string decoded;  // the token's text (part of a character becomes U+FFFD)
  };
  std::vector<Candidate> candidates;
};

// One choice's output: all of it (non-streaming), or the part one chunk carries (streaming).
struct ChoiceOutput {
  uint32_t index = 0;  // "index": which of the request's n choices this is
  std::string text;
  // Chat, with ResponseContext::reasoning: the reasoning split off the answer (all of it, or
  // this chunk's); `text` is then the content alone.
  std::string reasoning;
  // Chat: the tool calls split off the answer (whole calls), or this chunk's pieces of them
  // (ToolCallSplit); `text` is then the content alone, null in a message with calls and no
  // content. tool_calls_finish: a "stop" finish is sent as "tool_calls" (the answer called tools).
  std::vector<ToolCallPiece> tool_calls;
  bool tool_calls_finish = false;
  std::vector<TokenLogprob> logprobs;  // the tokens of `text`, when the request asked
  proto::FinishReason finish_reason = proto::FinishReason::kNone;  // kNone: not finished
  // vLLM's "stop_reason" of a "stop" finish: the stop string hit, or the stop_token_ids entry
  // drawn; null when neither (the end-of-generation token, or not a stop).
  std::string stop_string;
  int64_t stop_token_id = -1;
  // Streamed completions only: characters (code points) of this choice's text sent in earlier
  // chunks, where this chunk's logprobs.text_offset starts counting.
  size_t text_offset = 0;
  // Streamed, with continuous_usage_stats: this choice's usage so far (its prompt, the tokens
  // generated up to and including this chunk's), as the chunk's "usage" instead of null.
  std::optional<proto::Usage> usage_so_far;
  // vLLM's prompt_logprobs, when the request asked for them (ResponseContext::prompt_logprobs):
  // one entry per prompt token.
  std::vector<PromptPositionLogprobs> prompt_logprobs;
  // With ResponseContext::return_token_ids: the token ids generated (all of them, or this
  // chunk's), and the prompt's (a whole answer's; a stream's first chunk of the choice).
  std::vector<uint32_t> token_ids;
  std::optional<std::vector<uint32_t>> prompt_token_ids;
};

// What every rendering of one response needs from its request.
struct ResponseContext {
  std::string request_id;      // the response id is "cmpl-" or "chatcmpl-" followed by this
  int64_t created_unix_s = 0;  // "created"; the same in every chunk of one stream
  std::string model;           // the served model's id
  bool logprobs = false;       // the request asked for logprobs: choices carry them
  bool include_usage = false;  // a stream with include_usage: every chunk has "usage": null
  // ... or, with continuous_usage_stats too, its choice's usage so far (ChoiceOutput::usage_so_far).
  bool continuous_usage = false;
  // vLLM's return_tokens_as_token_ids: logprobs name each token (and alternative) "token_id:N"
  // instead of its text; chat's "bytes" and completions' text_offset still follow the text.
  bool tokens_as_ids = false;
  // vLLM's prompt_logprobs were asked for: completions' choices carry "prompt_logprobs", a chat
  // response carries its first choice's at the top level (every choice has the same prompt).
  bool prompt_logprobs = false;
  // vLLM's return_token_ids: every choice carries "token_ids" (its generated ids, or a chunk's);
  // completions' choices carry "prompt_token_ids" (null in a stream's later chunks), chat puts
  // the first choice's at the top level (of a stream: its role chunks).
  bool return_token_ids = false;
  // Chat under a reasoning parser (model.reasoning_parser): every message carries "reasoning"
  // (vLLM's name) and "reasoning_content" (its older one, DeepSeek's, SGLang's and llama.cpp's),
  // the same text, null when there is none (or it was not asked for); a streamed delta carries
  // both when its chunk has reasoning.
  bool reasoning = false;
};

// finish_reason: "stop", "length", or bmad's "cancelled" and "error" (proto::FinishReasonName);
// null while kNone. stop_reason (vLLM's, in every choice): the stop string or stop token id
// that ended a "stop" finish, else null. usage: {prompt_tokens, completion_tokens, total_tokens,
// prompt_tokens_details: {cached_tokens}}.
//
// {"id": "cmpl-...", "object": "text_completion", "created", "model",
//  "choices": [{"index", "text", "logprobs": null or {tokens, token_logprobs, top_logprobs
//  (one object per token), text_offset}, "finish_reason"}, ...], "usage"}
// One entry in "choices" per output, in the order given (callers pass them by index).
std::string RenderCompletion(const ResponseContext& context, std::span<const ChoiceOutput> outputs,
                             const proto::Usage& usage);
std::string RenderCompletion(const ResponseContext& context, const ChoiceOutput& output,
                             const proto::Usage& usage);

// {"id": "chatcmpl-...", "object": "chat.completion", "created", "model",
//  "choices": [{"index", "message": {"role": "assistant", "content", and "tool_calls" when the
//  answer called tools: [{"id", "type": "function", "function": {"name", "arguments"}}]}, "logprobs": null or
//  {"content": [{token, logprob, bytes, top_logprobs: [...]}]}, "finish_reason"}, ...], "usage"}
std::string RenderChatCompletion(const ResponseContext& context, std::span<const ChoiceOutput> outputs,
                                 const proto::Usage& usage);
std::string RenderChatCompletion(const ResponseContext& context, const ChoiceOutput& output,
                                 const proto::Usage& usage);

// ---- streaming (each returns one SSE event) ----

// "data: " + json + "\n\n"; `json` must be one line (every renderer here writes one).
std::string SseEvent(std::string_view json);
// "data: [DONE]\n\n", the end of every stream.
std::string SseDone();
// ": keep-alive\n\n": an SSE comment, which clients ignore; sent while a stream has nothing
// else to say, so that idle timeouts on the way do not cut it.
std::string SseKeepAlive();

// A "text_completion" chunk: choices [{index, text, logprobs, finish_reason}]; one choice per
// chunk, also when the request asked for several (chunks of different choices interleave).
std::string RenderCompletionChunk(const ResponseContext& context, const ChoiceOutput& output);

// The first "chat.completion.chunk" of choice `index`: delta {"role": "assistant", "content": ""};
// `usage_so_far` as in ChoiceOutput (no tokens yet); with return_token_ids, "prompt_token_ids"
// at the top and "token_ids": [] in the choice.
std::string RenderChatRoleChunk(const ResponseContext& context, uint32_t index = 0,
                                std::optional<proto::Usage> usage_so_far = std::nullopt,
                                const std::optional<std::vector<uint32_t>>& prompt_token_ids = std::nullopt);
// A "chat.completion.chunk": delta {"content": text}, or delta {} when the chunk only finishes
// (empty text with a finish reason). With ResponseContext::reasoning and reasoning in the
// chunk: delta {"reasoning", "reasoning_content"}, and "content" when it has text too. With
// tool calls: delta {"tool_calls": [{"index", "id", "type": "function", "function": {"name",
// "arguments"}}]} (a call's later pieces: index and function.arguments only), and "content"
// when it has text too.
std::string RenderChatChunk(const ResponseContext& context, const ChoiceOutput& output);

// The include_usage chunk after the finish: "choices": [] and the request's usage.
std::string RenderCompletionUsageChunk(const ResponseContext& context, const proto::Usage& usage);
std::string RenderChatUsageChunk(const ResponseContext& context, const proto::Usage& usage);

// ---- /v1/models ----

struct ModelCard {
  std::string id;
  int64_t created_unix_s = 0;
  uint32_t max_model_len = 0;  // the context length in tokens (vLLM's field)
};

// {"object": "list", "data": [{"id", "object": "model", "created", "owned_by": "bmad",
// "max_model_len"}]}
std::string RenderModels(std::span<const ModelCard> models);
// One of them, as GET /v1/models/{id} answers: {"id", "object": "model", "created", ...}.
std::string RenderModel(const ModelCard& model);

}  // namespace bmad::http
