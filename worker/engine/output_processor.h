// Turns one sequence's sampled tokens into the text a client sees and decides when the
// sequence is finished: end-of-generation and stop token ids, stop strings (held back until
// they can no longer match, cut off when they do), max_tokens and the context length. Text
// only ever contains whole UTF-8 characters.
//
// min_tokens (vLLM's semantics): until the output holds more than that many tokens nothing but
// the length limit ends it. The sampler holds back the tokens that would (TokensThatEnd); stop
// strings are looked for from the (min_tokens + 1)-th token's text on, and one may begin in
// earlier text (its beginning is held back there too, so the output ends where it begins).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/proto/messages.h"
#include "worker/model/tokenizer/streaming_detokenizer.h"
#include "worker/model/tokenizer/tokenizer.h"
#include "worker/sampling/output_constraint.h"
#include "worker/sampling/stop_string_matcher.h"

namespace bmad::engine {

// The tokens that end a sequence with these parameters: its stop token ids, and the model's
// end-of-generation tokens unless ignore_eos. What sampling::Sampler holds back for min_tokens.
std::vector<int32_t> TokensThatEnd(const tokenizer::Tokenizer& tokenizer,
                                   const proto::SamplingParams& params);

// What the parameters hold the output to (response_format json_object, json_schema or regex),
// for the sequence's Sampler, behind the reasoning gate the parameters' reasoning_* tokens set;
// nullopt for free text. `texts` keeps the vocabulary's texts between
// calls: built on the first call that needs them. kInvalidArgument for a schema JsonSchema or a
// pattern RegexNfa refuses (ValidateSamplingParams refuses them first).
Result<std::optional<sampling::OutputConstraint>> MakeOutputConstraint(
    const tokenizer::Tokenizer& tokenizer, const proto::SamplingParams& params,
    std::shared_ptr<const sampling::TokenTexts>& texts);

struct TokenOutcome {
  std::string text;  // text to send now (may be empty)
  bool finished = false;
  proto::FinishReason reason = proto::FinishReason::kNone;
  // A kStop finish's cause, when it was not the end-of-generation token: the stop string hit,
  // or the stop_token_ids entry drawn (proto::TokenChunk's stop_string and stop_token_id).
  std::string stop_string;
  int64_t stop_token_id = -1;
};

class OutputProcessor {
 public:
  // `prompt`: the prompt's token ids (when they hold no text, e.g. BOS alone, the output is the
  // start of the text and loses its first leading space, as a whole-sequence decode would).
  // `max_new_tokens`: the most tokens this sequence may generate (max_tokens, already capped by
  // the context length left after the prompt). `already_generated`: tokens a previous replica
  // generated (request migration); they count towards max_tokens and are not emitted again.
  OutputProcessor(const tokenizer::Tokenizer& tokenizer, const proto::SamplingParams& params,
                  std::span<const int32_t> prompt, int64_t max_new_tokens,
                  std::vector<int32_t> already_generated = {});

  // Accounts for one sampled token.
  TokenOutcome OnToken(int32_t token);
  // Ends the sequence early (cancel, error): returns text still held back, if any.
  std::string Finish();

  const std::vector<int32_t>& generated() const { return generated_; }
  // The next token is the last the length limit allows (it finishes the sequence whatever it is).
  bool next_is_last() const { return static_cast<int64_t>(generated_.size()) + 1 >= max_new_tokens_; }
  bool finished() const { return finished_; }

 private:
  TokenOutcome Complete(std::string text, proto::FinishReason reason);
  // Text of the output so far, through the stop-string matcher once stops may end it.
  sampling::StopFeedResult PassText(std::string text);
  sampling::StopFeedResult FeedText(int32_t token);

  const tokenizer::Tokenizer& tokenizer_;
  tokenizer::StreamingDetokenizer detokenizer_;
  sampling::StopStringMatcher stop_strings_;
  std::vector<uint32_t> stop_token_ids_;
  bool ignore_eos_;
  // vLLM's include_stop_str_in_output keeps the text of a stop token (stop_token_ids) as well;
  // not under a JSON response format, whose constraint lets a stop token end a complete value
  // whatever its text (the text would follow the value and break it).
  bool include_stop_text_;
  int64_t min_tokens_;
  int64_t max_new_tokens_;
  std::vector<int32_t> generated_;
  bool finished_ = false;
};

}  // namespace bmad::engine
