#include "coordinator/http/openai_response.h"

#include <cctype>
#include <cmath>

#include <nlohmann/json.hpp>

#include "worker/model/tokenizer/utf8.h"

namespace bmad::http {
namespace {

using Json = nlohmann::ordered_json;  // keeps OpenAI's field order: "id" first

// OpenAI sends this for tokens whose probability underflows (JSON has no -Infinity).
constexpr float kMinLogprob = -9999.0f;

// Compact one-line JSON. Invalid UTF-8 becomes U+FFFD instead of an exception: a token's text
// may be part of a character, and a response must never fail to render.
std::string Dump(const Json& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string Lowercase(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// OpenAI's "type" and "code" for a status.
struct ErrorKind {
  std::string type;
  std::string code;
};

ErrorKind ErrorKindFor(StatusCode code) {
  const int http_status = HttpStatusFor(code);
  ErrorKind kind;
  kind.type = http_status >= 500 ? "server_error" : "invalid_request_error";
  kind.code = Lowercase(StatusCodeName(code));
  switch (code) {
    case StatusCode::kOutOfRange: kind.code = "context_length_exceeded"; break;
    case StatusCode::kNotFound: kind.code = "model_not_found"; break;
    case StatusCode::kUnauthenticated: kind.code = "invalid_api_key"; break;  // OpenAI's 401
    case StatusCode::kResourceExhausted:
      kind.type = "rate_limit_exceeded";
      kind.code = "rate_limit_exceeded";
      break;
    case StatusCode::kOk: kind.type = "server_error"; break;
    default: break;
  }
  return kind;
}

// The parameter a message names first, quoted: "'messages[0].role' must be ..." gives
// "messages[0].role"; "" when the message does not start that way.
std::string_view LeadingParam(std::string_view message) {
  if (message.size() < 3 || message.front() != '\'') return {};
  const size_t end = message.find('\'', 1);
  if (end == std::string_view::npos || end == 1) return {};
  const std::string_view name = message.substr(1, end - 1);
  for (const char c : name) {
    const bool ok =
        std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '[' || c == ']';
    if (!ok) return {};
  }
  return name;
}

Json UsageJson(const proto::Usage& usage) {
  return Json{
      {"prompt_tokens", usage.prompt_tokens},
      {"completion_tokens", usage.completion_tokens},
      {"total_tokens", uint64_t{usage.prompt_tokens} + usage.completion_tokens},
      {"prompt_tokens_details", Json{{"cached_tokens", usage.cached_prompt_tokens}}},
  };
}

Json FinishReasonJson(proto::FinishReason reason) {
  if (reason == proto::FinishReason::kNone) return nullptr;
  return std::string(proto::FinishReasonName(reason));
}

Json StopReasonJson(const ChoiceOutput& output) {
  if (output.finish_reason != proto::FinishReason::kStop) return nullptr;
  if (!output.stop_string.empty()) return output.stop_string;
  if (output.stop_token_id >= 0) return output.stop_token_id;
  return nullptr;
}

double LogprobValue(float logprob) {
  if (!std::isfinite(logprob) || logprob < kMinLogprob) return kMinLogprob;
  return logprob;
}

// Characters (code points) in `text`: bytes that do not continue a UTF-8 sequence.
size_t CodePoints(std::string_view text) {
  size_t n = 0;
  for (const char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

// How logprobs name a token: "token_id:N" (return_tokens_as_token_ids), else its text, made
// valid UTF-8 when `valid_utf8` (completions; chat sends the raw bytes in "bytes" beside it).
std::string TokenName(const ResponseContext& context, const TokenLogprob& t, bool valid_utf8) {
  if (context.tokens_as_ids && t.id >= 0) return "token_id:" + std::to_string(t.id);
  return valid_utf8 ? tokenizer::ToValidUtf8(t.token) : t.token;
}

// Completions' legacy shape: parallel arrays.
Json CompletionLogprobsJson(const ResponseContext& context, const ChoiceOutput& output) {
  Json tokens = Json::array();
  Json token_logprobs = Json::array();
  Json top_logprobs = Json::array();
  Json text_offset = Json::array();
  size_t offset = output.text_offset;
  for (const TokenLogprob& t : output.logprobs) {
    // A token's piece may be part of a character (a byte-fallback token): shown with U+FFFD for
    // what is not whole, here rather than when the JSON is written, so that pieces that differ
    // only in such bytes are one key below, not keys that JSON would write twice.
    const std::string token = TokenName(context, t, /*valid_utf8=*/true);
    tokens.push_back(token);
    text_offset.push_back(offset);
    offset += CodePoints(t.token);  // the raw piece: its partial characters join the next's in the text
    if (t.absent) {  // an echoed prompt's first token: nothing came before it
      token_logprobs.push_back(nullptr);
      top_logprobs.push_back(nullptr);
      continue;
    }
    token_logprobs.push_back(LogprobValue(t.logprob));
    // The chosen token and its alternatives; OpenAI: "up to logprobs+1 elements". A piece
    // that two ids share is listed once, with the higher log-probability (the first seen).
    Json top = Json{{token, LogprobValue(t.logprob)}};
    for (const TokenLogprob& a : t.top) {
      const std::string alternative = TokenName(context, a, /*valid_utf8=*/true);
      if (!top.contains(alternative)) top[alternative] = LogprobValue(a.logprob);
    }
    top_logprobs.push_back(std::move(top));
  }
  return Json{{"tokens", std::move(tokens)},
              {"token_logprobs", std::move(token_logprobs)},
              {"top_logprobs", std::move(top_logprobs)},
              {"text_offset", std::move(text_offset)}};
}

// Chat's shape: one entry per token, with the exact bytes (which survive partial characters).
Json ChatLogprobsJson(const ResponseContext& context, const ChoiceOutput& output) {
  const auto bytes_of = [](const std::string& token) {
    Json bytes = Json::array();
    for (const char c : token) bytes.push_back(static_cast<unsigned char>(c));
    return bytes;
  };
  Json content = Json::array();
  for (const TokenLogprob& t : output.logprobs) {
    Json top = Json::array();
    for (const TokenLogprob& a : t.top) {
      top.push_back(Json{{"token", TokenName(context, a, /*valid_utf8=*/false)},
                         {"logprob", LogprobValue(a.logprob)},
                         {"bytes", bytes_of(a.token)}});
    }
    content.push_back(Json{{"token", TokenName(context, t, /*valid_utf8=*/false)},
                           {"logprob", LogprobValue(t.logprob)},
                           {"bytes", bytes_of(t.token)},
                           {"top_logprobs", std::move(top)}});
  }
  return Json{{"content", std::move(content)}};
}

Json Envelope(const ResponseContext& context, bool chat, std::string_view object) {
  return Json{{"id", (chat ? "chatcmpl-" : "cmpl-") + context.request_id},
              {"object", object},
              {"created", context.created_unix_s},
              {"model", context.model}};
}

// vLLM's prompt_logprobs: [null, {"<id>": {"logprob", "rank", "decoded_token"}, ...}, ...].
Json PromptLogprobsJson(const ChoiceOutput& output) {
  Json positions = Json::array();
  for (const PromptPositionLogprobs& p : output.prompt_logprobs) {
    if (p.absent) {
      positions.push_back(nullptr);
      continue;
    }
    Json candidates = Json::object();
    for (const PromptPositionLogprobs::Candidate& c : p.candidates) {
      candidates[std::to_string(c.id)] = Json{{"logprob", LogprobValue(c.logprob)},
                                              {"rank", c.rank},
                                              {"decoded_token", tokenizer::ToValidUtf8(c.decoded)}};
    }
    positions.push_back(std::move(candidates));
  }
  return positions;
}

Json CompletionChoice(const ResponseContext& context, const ChoiceOutput& output) {
  Json choice{{"index", output.index},
              {"text", output.text},
              {"logprobs", context.logprobs ? CompletionLogprobsJson(context, output) : Json(nullptr)},
              {"finish_reason", FinishReasonJson(output.finish_reason)},
              {"stop_reason", StopReasonJson(output)}};
  if (context.prompt_logprobs) choice["prompt_logprobs"] = PromptLogprobsJson(output);
  if (context.return_token_ids) {
    choice["prompt_token_ids"] = output.prompt_token_ids ? Json(*output.prompt_token_ids) : Json(nullptr);
    choice["token_ids"] = output.token_ids;
  }
  return choice;
}

// Chat's tool_calls: whole calls in a message, or pieces in a delta (a piece without an id
// carries only more of its call's arguments).
Json ToolCallsJson(std::span<const ToolCallPiece> calls, bool delta) {
  Json list = Json::array();
  for (const ToolCallPiece& call : calls) {
    Json function = Json::object();
    Json entry = Json::object();
    if (delta) entry["index"] = call.index;
    if (!call.id.empty()) {
      entry["id"] = call.id;
      entry["type"] = "function";
      function["name"] = call.name;
    }
    function["arguments"] = call.arguments;
    entry["function"] = std::move(function);
    list.push_back(std::move(entry));
  }
  return list;
}

Json ChatChoice(const ResponseContext& context, const ChoiceOutput& output,
                std::string_view message_key, Json message) {
  Json choice{{"index", output.index},
              {message_key, std::move(message)},
              {"logprobs", context.logprobs ? ChatLogprobsJson(context, output) : Json(nullptr)},
              {"finish_reason", output.tool_calls_finish && output.finish_reason == proto::FinishReason::kStop
                                    ? Json("tool_calls")
                                    : FinishReasonJson(output.finish_reason)},
              {"stop_reason", StopReasonJson(output)}};
  if (context.return_token_ids) choice["token_ids"] = output.token_ids;
  return choice;
}

// Chat's prompt_token_ids, at the top of a response or of a stream's role chunk.
void AddChatPromptTokenIds(const ResponseContext& context, const std::optional<std::vector<uint32_t>>& ids,
                           Json& response) {
  if (context.return_token_ids) response["prompt_token_ids"] = ids ? Json(*ids) : Json(nullptr);
}

// A choice's usage so far (continuous_usage_stats), as vLLM sends it: the counts only, since
// how much of the prompt was cached is known once the choice has finished.
Json UsageSoFarJson(const proto::Usage& usage) {
  return Json{{"prompt_tokens", usage.prompt_tokens},
              {"completion_tokens", usage.completion_tokens},
              {"total_tokens", uint64_t{usage.prompt_tokens} + usage.completion_tokens}};
}

// A streamed chunk; OpenAI puts "usage": null in every chunk of an include_usage stream, vLLM
// the choice's usage so far with continuous_usage_stats.
std::string ChunkEvent(const ResponseContext& context, bool chat, Json choice,
                       const std::optional<proto::Usage>& usage_so_far,
                       const std::optional<std::vector<uint32_t>>* chat_prompt_token_ids = nullptr) {
  Json chunk = Envelope(context, chat, chat ? "chat.completion.chunk" : "text_completion");
  if (chat_prompt_token_ids != nullptr) AddChatPromptTokenIds(context, *chat_prompt_token_ids, chunk);
  chunk["choices"] = Json::array({std::move(choice)});
  if (usage_so_far) {
    chunk["usage"] = UsageSoFarJson(*usage_so_far);
  } else if (context.include_usage) {
    chunk["usage"] = nullptr;
  }
  return SseEvent(Dump(chunk));
}

std::string UsageChunkEvent(const ResponseContext& context, bool chat, const proto::Usage& usage) {
  Json chunk = Envelope(context, chat, chat ? "chat.completion.chunk" : "text_completion");
  chunk["choices"] = Json::array();
  chunk["usage"] = UsageJson(usage);
  return SseEvent(Dump(chunk));
}

}  // namespace

int HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return 200;
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange: return 400;
    case StatusCode::kUnauthenticated: return 401;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kResourceExhausted: return 429;
    case StatusCode::kCancelled: return 499;  // nginx's "client closed request"
    case StatusCode::kUnavailable: return 503;
    case StatusCode::kDeadlineExceeded: return 504;
    default: return 500;
  }
}

std::string ErrorJson(const Status& status, std::string_view param) {
  const ErrorKind kind = ErrorKindFor(status.code());
  if (param.empty() && HttpStatusFor(status.code()) / 100 == 4) {
    param = LeadingParam(status.message());
  }
  if (param.empty() && status.code() == StatusCode::kNotFound) param = "model";  // model_not_found
  const std::string message =
      status.ok() ? "ErrorJson was given an OK status (a bug in the server)" : status.message();
  return Dump(Json{{"error", Json{{"message", message},
                                  {"type", kind.type},
                                  {"param", param.empty() ? Json(nullptr) : Json(param)},
                                  {"code", kind.code}}}});
}

std::string RouteErrorJson(std::string_view method, std::string_view path) {
  return Dump(Json{{"error", Json{{"message", "Invalid URL (" + std::string(method) + " " + std::string(path) + ")"},
                                  {"type", "invalid_request_error"},
                                  {"param", nullptr},
                                  {"code", nullptr}}}});
}

std::string HttpErrorJson(int http_status, std::string_view message) {
  return Dump(Json{{"error", Json{{"message", message},
                                  {"type", http_status >= 500 ? "server_error" : "invalid_request_error"},
                                  {"param", nullptr},
                                  {"code", nullptr}}}});
}

std::string TransportErrorJson(int http_status, bool form_encoded, size_t form_max_bytes, size_t max_body_bytes) {
  std::string message;
  switch (http_status) {
    case 400: message = "malformed HTTP request"; break;
    case 413:
      message = form_encoded
                    ? "the request body is over " + std::to_string(form_max_bytes) +
                          " bytes, the most accepted as application/x-www-form-urlencoded (what curl -d "
                          "sends without a Content-Type); send it as JSON with the header "
                          "'Content-Type: application/json'"
                    : "the request body is over " + std::to_string(max_body_bytes) + " bytes, the most accepted";
      break;
    case 414: message = "the request line is too long"; break;
    case 431: message = "the request's headers are too large"; break;
    case 500: message = "internal error while handling the request"; break;
    default: message = "HTTP error " + std::to_string(http_status); break;
  }
  return HttpErrorJson(http_status, message);
}

std::string RenderCompletion(const ResponseContext& context, std::span<const ChoiceOutput> outputs,
                             const proto::Usage& usage) {
  Json response = Envelope(context, false, "text_completion");
  response["choices"] = Json::array();
  for (const ChoiceOutput& output : outputs) response["choices"].push_back(CompletionChoice(context, output));
  response["usage"] = UsageJson(usage);
  return Dump(response);
}

std::string RenderCompletion(const ResponseContext& context, const ChoiceOutput& output,
                             const proto::Usage& usage) {
  return RenderCompletion(context, std::span(&output, 1), usage);
}

std::string RenderChatCompletion(const ResponseContext& context, std::span<const ChoiceOutput> outputs,
                                 const proto::Usage& usage) {
  Json response = Envelope(context, true, "chat.completion");
  response["choices"] = Json::array();
  for (const ChoiceOutput& output : outputs) {
    // With tool calls and nothing else, content is null (as OpenAI sends it).
    Json message{{"role", "assistant"},
                 {"content", output.text.empty() && !output.tool_calls.empty() ? Json(nullptr) : Json(output.text)}};
    if (context.reasoning) {
      const Json reasoning = output.reasoning.empty() ? Json(nullptr) : Json(output.reasoning);
      message["reasoning"] = reasoning;
      message["reasoning_content"] = reasoning;
    }
    if (!output.tool_calls.empty()) message["tool_calls"] = ToolCallsJson(output.tool_calls, false);
    response["choices"].push_back(ChatChoice(context, output, "message", std::move(message)));
  }
  if (context.prompt_logprobs) {
    response["prompt_logprobs"] = outputs.empty() ? Json(nullptr) : PromptLogprobsJson(outputs.front());
  }
  AddChatPromptTokenIds(context, outputs.empty() ? std::nullopt : outputs.front().prompt_token_ids, response);
  response["usage"] = UsageJson(usage);
  return Dump(response);
}

std::string RenderChatCompletion(const ResponseContext& context, const ChoiceOutput& output,
                                 const proto::Usage& usage) {
  return RenderChatCompletion(context, std::span(&output, 1), usage);
}

std::string SseEvent(std::string_view json) {
  std::string event;
  event.reserve(json.size() + 8);
  event += "data: ";
  event += json;
  event += "\n\n";
  return event;
}

std::string SseDone() { return "data: [DONE]\n\n"; }

std::string SseKeepAlive() { return ": keep-alive\n\n"; }

std::string RenderCompletionChunk(const ResponseContext& context, const ChoiceOutput& output) {
  return ChunkEvent(context, false, CompletionChoice(context, output), output.usage_so_far);
}

std::string RenderChatRoleChunk(const ResponseContext& context, uint32_t index,
                                std::optional<proto::Usage> usage_so_far,
                                const std::optional<std::vector<uint32_t>>& prompt_token_ids) {
  Json choice{{"index", index},
              {"delta", Json{{"role", "assistant"}, {"content", ""}}},
              {"logprobs", nullptr},
              {"finish_reason", nullptr}};
  if (context.return_token_ids) choice["token_ids"] = Json::array();
  return ChunkEvent(context, true, std::move(choice), usage_so_far, &prompt_token_ids);
}

std::string RenderChatChunk(const ResponseContext& context, const ChoiceOutput& output) {
  const bool has_reasoning = context.reasoning && !output.reasoning.empty();
  Json delta = Json::object();
  if (has_reasoning) {
    delta["reasoning"] = output.reasoning;
    delta["reasoning_content"] = output.reasoning;
  }
  const bool only_finishes = output.text.empty() && output.finish_reason != proto::FinishReason::kNone;
  if (!output.text.empty() || (!only_finishes && !has_reasoning && output.tool_calls.empty())) {
    delta["content"] = output.text;
  }
  if (!output.tool_calls.empty()) delta["tool_calls"] = ToolCallsJson(output.tool_calls, true);
  return ChunkEvent(context, true, ChatChoice(context, output, "delta", std::move(delta)), output.usage_so_far);
}

std::string RenderCompletionUsageChunk(const ResponseContext& context, const proto::Usage& usage) {
  return UsageChunkEvent(context, false, usage);
}

std::string RenderChatUsageChunk(const ResponseContext& context, const proto::Usage& usage) {
  return UsageChunkEvent(context, true, usage);
}

namespace {

Json ModelJson(const ModelCard& model) {
  return Json{{"id", model.id},
              {"object", "model"},
              {"created", model.created_unix_s},
              {"owned_by", "bmad"},
              {"max_model_len", model.max_model_len}};
}

}  // namespace

std::string RenderModels(std::span<const ModelCard> models) {
  Json data = Json::array();
  for (const ModelCard& model : models) data.push_back(ModelJson(model));
  return Dump(Json{{"object", "list"}, {"data", std::move(data)}});
}

std::string RenderModel(const ModelCard& model) { return Dump(ModelJson(model)); }

}  // namespace bmad::http
