// What one choice of an OpenAI response shows: a replica's token chunk as that choice's output
// (text, logprobs, finish), and the text the choice starts with when the request asked for echo.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/proto/messages.h"
#include "coordinator/http/openai_request.h"
#include "coordinator/http/openai_response.h"
#include "worker/model/tokenizer/tokenizer.h"

namespace bmad::coord {

// Choice `choice` (prompt by prompt, `per_prompt` each) begins its text with its first token:
// `starts_text` holds, per prompt, whether the prompt decodes to no text.
bool StartsText(const std::vector<bool>& starts_text, uint32_t per_prompt, uint32_t choice);

// The chunk as its choice's output; with `logprobs`, each token and its alternatives named as the
// text has them (the text's first token without its leading space when `starts_text`).
// `text_offset`: ChoiceOutput::text_offset.
http::ChoiceOutput ChoiceFromChunk(const proto::TokenChunk& chunk, const tokenizer::Tokenizer& tok,
                                   bool logprobs, size_t text_offset, bool starts_text);

// With echo, per prompt, the text each of its choices starts with; empty without echo.
// Completions: the prompt's text as given, or, for token ids or a prompt that
// truncate_prompt_tokens cut, the decoded tokens the model saw (`prompts`, PromptTokens'; a
// leading BOS, and the space it would leave before the text, left out). Chat
// (vLLM's rule): the final message's content when it is the assistant's, else nothing.
std::vector<std::string> EchoTexts(const http::CompletionRequest& cr,
                                   const std::vector<std::vector<uint32_t>>& prompts,
                                   const tokenizer::Tokenizer& tok);

// EchoTexts' text for choice `choice` (prompt by prompt, `per_prompt` each); "" when none.
const std::string& EchoTextOf(const std::vector<std::string>& echo_texts, uint32_t per_prompt, uint32_t choice);

}  // namespace bmad::coord
