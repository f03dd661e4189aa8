// Answering a completion request the event loop accepted, on its HTTP handler's thread: one JSON
// response once every choice has finished (AnswerWhole), or server-sent events as the choices'
// chunks come (AnswerStreaming). Either cancels every choice when the client goes.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "coordinator/http/openai_response.h"
#include "coordinator/http/reasoning_split.h"
#include "coordinator/http/tool_call_split.h"
#include "coordinator/server/choice_output.h"

namespace httplib {
class Response;
}  // namespace httplib

namespace bmad::tokenizer {
class Tokenizer;
}  // namespace bmad::tokenizer

namespace bmad {
class HttpConnection;
}  // namespace bmad

namespace bmad::coord {

class HttpStream;

// Once accepted, a request is waited for as long as its client is there: a queue may hold it for
// minutes, and the event loop, not the handler, decides when it ends (it fails or migrates the
// requests of a replica that dies). Between events the handler checks this often whether the
// client has gone, and cancels the request if so.
inline constexpr std::chrono::milliseconds kClientCheckInterval{1000};

// A completion request the event loop accepted: its events, its requests' ids (prompt by
// prompt, choice by choice), and how to cancel them all.
struct AcceptedCompletion {
  std::shared_ptr<HttpStream> stream;
  std::vector<uint64_t> request_ids;
  std::vector<uint32_t> prompt_tokens;  // of each request, as the coordinator counted them
  uint32_t choices_per_prompt = 1;
  std::function<void()> abandon;
  // Per prompt, with logprobs asked for: the prompt decodes to no text, so the first token
  // generated begins the text and loses its leading space there (Tokenizer::Decode's rule,
  // which the worker's detokenizer follows): its logprob entry is written the same way.
  std::vector<bool> starts_text;
  // Per prompt, with echo: the text each of its choices starts with (EchoTexts).
  std::vector<std::string> echo_texts;
  PromptScoring scoring;  // completions: what the response shows of the prompt besides its text
  // Per prompt, with vLLM's return_token_ids: its token ids as the model sees them.
  std::vector<std::vector<uint32_t>> prompt_token_ids;
  // Chat under a reasoning parser: each answer's reasoning is split off its content
  // (http::ReasoningSplit), which starts as this says; nullopt: no split, all content. The
  // reasoning is sent with include_reasoning (vLLM's request field), else left out.
  std::optional<http::ReasoningStart> reasoning_start;
  bool include_reasoning = true;
  // Chat with tools: each answer's content (after its reasoning) has its tool calls split off
  // (http::ToolCallSplit) in this format; nullopt: no calls are read (tool_choice "none").
  std::optional<http::ToolCallFormat> tool_format;
  std::string tool_function;  // kFunction: the function's name
  bool parallel_tool_calls = true;
};

// OpenAI's error object for `s` with its HTTP status, and Retry-After (whole seconds, at least
// 1) when `retry_after_ms` is set.
void SendHttpError(httplib::Response& res, const Status& s, uint32_t retry_after_ms = 0);

// One JSON response once every choice has finished; cancels them all if the client goes.
void AnswerWhole(AcceptedCompletion accepted, const http::ResponseContext& ctx, bool chat, HttpConnection& client,
                 const tokenizer::Tokenizer& tok, httplib::Response& res);
// Server-sent events as the choices' chunks come, and a keep-alive comment after each
// `keepalive` without one (0: none); cancels them all if the client goes.
void AnswerStreaming(AcceptedCompletion accepted, const http::ResponseContext& ctx, bool chat,
                     std::shared_ptr<HttpConnection> client, const tokenizer::Tokenizer& tok,
                     std::chrono::milliseconds keepalive, httplib::Response& res);

}  // namespace bmad::coord
