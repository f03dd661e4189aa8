// vLLM's tokenizer endpoints, which clients use to count a prompt's tokens exactly as the server
// will: POST /tokenize and POST /detokenize.
//
// /tokenize takes a completions body ({"prompt": ...}) or, when "messages" is present, a chat
// body ({"messages": [...], "add_generation_prompt"}), read by ParseCompletionRequest: every rule
// of those endpoints applies to them. Its own fields: add_special_tokens (boolean, default true:
// BOS as the completions endpoint adds it; a chat body always gets the BOS, as the chat endpoint
// writes it) and return_token_strs (boolean, default false: also list each token's vocabulary string). Answer: {"count", "max_model_len", "tokens", "token_strs"}.
//
// /detokenize takes {"tokens": [ids]} (and an optional "model") and answers {"prompt": text}.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "coordinator/http/openai_request.h"

namespace bmad::http {

struct TokenizeRequest {
  CompletionRequest prompt;  // prompt.chat: the body had "messages"
  bool add_special_tokens = true;
  bool return_token_strs = false;
};

// kInvalidArgument naming the field, as ParseCompletionRequest words it.
Result<TokenizeRequest> ParseTokenizeRequest(std::string_view body, const RequestLimits& limits);

struct DetokenizeRequest {
  std::string model;             // "" when the client named none
  std::vector<uint32_t> tokens;  // ids are not checked against the vocabulary here
};

// kInvalidArgument for a body over limits.max_body_bytes, not a JSON object, without "tokens",
// or whose "tokens" is not an array of token ids (integers >= 0).
Result<DetokenizeRequest> ParseDetokenizeRequest(std::string_view body, const RequestLimits& limits);

// {"count": n, "max_model_len", "tokens": [...], "token_strs": [...] or null}. `token_strs`, when
// given, holds one string per token: the vocabulary's (invalid UTF-8 becomes U+FFFD).
std::string RenderTokenize(std::span<const uint32_t> tokens, uint32_t max_model_len,
                           const std::vector<std::string>* token_strs);
// {"prompt": text}; invalid UTF-8 becomes U+FFFD.
std::string RenderDetokenize(std::string_view text);

}  // namespace bmad::http
