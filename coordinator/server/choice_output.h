// What one choice of an OpenAI response shows: a replica's token chunk as that choice's output
// (text, logprobs, finish), and the text the choice starts with when the request asked for echo.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
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

// The prompt choice `choice` belongs to: a request's choices go prompt by prompt, `per_prompt`
// each.
uint32_t PromptOfChoice(uint32_t per_prompt, uint32_t choice);

// EchoTexts' text for choice `choice` (prompt by prompt, `per_prompt` each); "" when none.
const std::string& EchoTextOf(const std::vector<std::string>& echo_texts, uint32_t per_prompt, uint32_t choice);

// The token ids of choice `choice`'s prompt, when the request asked for them (vLLM's
// return_token_ids: `per_prompt_ids` holds every prompt's); nullopt otherwise.
std::optional<std::vector<uint32_t>> PromptTokenIdsOf(const std::vector<std::vector<uint32_t>>& per_prompt_ids,
                                                      uint32_t per_prompt, uint32_t choice);

// What a completions response shows of each prompt besides its text.
struct PromptScoring {
  std::vector<std::vector<uint32_t>> prompt_ids;  // per prompt, when its log-probabilities are shown
  bool echo_logprobs = false;      // echo with logprobs: the prompt's tokens lead the logprobs
  bool echo_only = false;          // max_tokens 0 with echo: the generated token is left out
  uint32_t echo_alternatives = 0;  // echo's alternatives per position (logprobs N)
  int32_t vllm_alternatives = -1;  // vLLM's prompt_logprobs; -1: not asked
};

// Adds to each choice (prompt by prompt, `per_prompt` each) its prompt's log-probabilities as
// `scoring` asks, from `scored[i]` (choice i's prompt_* fields, all its chunks') of the prompt's
// first choice, the one that scores it: the echoed prompt's tokens before its logprobs, and
// vLLM's prompt_logprobs.
void AddPromptLogprobs(const PromptScoring& scoring, uint32_t per_prompt, const std::vector<proto::TokenChunk>& scored,
                       const tokenizer::Tokenizer& tok, std::vector<http::ChoiceOutput>& outputs);

// The echoed prompt's tokens as logprobs entries (completions' echo with logprobs): the first
// without a log-probability (absent), each later one with its own and its `alternatives` most
// likely alternatives, from `scored` (prompt positions from 1, TokenChunk's prompt_* fields;
// positions it lacks are left out). Pieces as the echoed text has them: the text's first
// token without the space the vocabulary puts before a text.
std::vector<http::TokenLogprob> EchoedPromptLogprobs(const std::vector<uint32_t>& prompt,
                                                     const proto::TokenChunk& scored, uint32_t alternatives,
                                                     const tokenizer::Tokenizer& tok);

// vLLM's prompt_logprobs of `prompt` from `scored`: null for the first token, then each token
// with its rank, and its `alternatives` most likely alternatives (ranked 1, 2, ...) it is not
// among.
std::vector<http::PromptPositionLogprobs> VllmPromptLogprobs(const std::vector<uint32_t>& prompt,
                                                             const proto::TokenChunk& scored,
                                                             uint32_t alternatives,
                                                             const tokenizer::Tokenizer& tok);

}  // namespace bmad::coord
