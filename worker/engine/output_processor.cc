#include "worker/engine/output_processor.h"

#include <algorithm>

namespace bmad::engine {

std::vector<int32_t> TokensThatEnd(const tokenizer::Tokenizer& tokenizer,
                                   const proto::SamplingParams& params) {
  std::vector<int32_t> tokens;
  if (!params.ignore_eos) tokens = tokenizer.EndOfGenerationIds();
  for (uint32_t id : params.stop_token_ids) tokens.push_back(static_cast<int32_t>(id));
  return tokens;
}

Result<std::optional<sampling::OutputConstraint>> MakeOutputConstraint(
    const tokenizer::Tokenizer& tokenizer, const proto::SamplingParams& params,
    std::shared_ptr<const sampling::TokenTexts>& texts) {
  if (params.response_format == proto::ResponseFormat::kText) return std::optional<sampling::OutputConstraint>();
  if (!texts) {
    std::vector<std::string> pieces(static_cast<size_t>(tokenizer.vocab_size()));
    for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) pieces[static_cast<size_t>(id)] = tokenizer.TokenPiece(id);
    texts = std::make_shared<const sampling::TokenTexts>(pieces);
  }
  sampling::ReasoningGate gate;
  if (params.reasoning_end_token >= 0) {
    gate.end_token = params.reasoning_end_token;
    gate.start_token = params.reasoning_start_token;
    gate.ending_tokens = TokensThatEnd(tokenizer, params);
  }
  if (params.response_format == proto::ResponseFormat::kRegex) {
    BMAD_ASSIGN_OR_RETURN(std::shared_ptr<const sampling::RegexNfa> pattern, sampling::RegexNfa::Compile(params.regex));
    return std::optional(sampling::OutputConstraint(
        sampling::RegexConstraint(texts, TokensThatEnd(tokenizer, params), std::move(pattern)), gate));
  }
  std::shared_ptr<const sampling::JsonSchema> schema = sampling::JsonSchema::AnyObject();
  if (params.response_format == proto::ResponseFormat::kJsonSchema) {
    BMAD_ASSIGN_OR_RETURN(schema, sampling::JsonSchema::Compile(params.json_schema));
  }
  return std::optional(
      sampling::OutputConstraint(sampling::JsonConstraint(texts, TokensThatEnd(tokenizer, params), std::move(schema),
                                                          params.disable_any_whitespace),
                                 std::move(gate)));
}

OutputProcessor::OutputProcessor(const tokenizer::Tokenizer& tokenizer,
                                 const proto::SamplingParams& params,
                                 std::span<const int32_t> prompt, int64_t max_new_tokens,
                                 std::vector<int32_t> already_generated)
    : tokenizer_(tokenizer),
      detokenizer_(tokenizer, /*decodes_sequence_start=*/tokenizer.Decode(prompt).empty()),
      stop_strings_(params.stop_strings, params.include_stop_str_in_output),
      stop_token_ids_(params.stop_token_ids),
      ignore_eos_(params.ignore_eos),
      include_stop_text_(params.include_stop_str_in_output &&
                         params.response_format == proto::ResponseFormat::kText),
      min_tokens_(params.min_tokens),
      max_new_tokens_(max_new_tokens) {
  // Tokens streamed before a migration were already detokenized for the client; run them
  // through the detokenizer and stop-string matcher silently so that state continues exactly.
  for (int32_t t : already_generated) {
    generated_.push_back(t);
    FeedText(t);
  }
}

sampling::StopFeedResult OutputProcessor::PassText(std::string text) {
  if (static_cast<int64_t>(generated_.size()) <= min_tokens_) return stop_strings_.FeedUnchecked(text);
  return stop_strings_.Feed(text);
}

sampling::StopFeedResult OutputProcessor::FeedText(int32_t token) {
  return PassText(detokenizer_.Feed(token));
}

TokenOutcome OutputProcessor::Complete(std::string text, proto::FinishReason reason) {
  finished_ = true;
  TokenOutcome outcome{"", true, reason};
  if (reason != proto::FinishReason::kStop || !stop_strings_.stopped()) {
    // Whatever the detokenizer and the matcher still hold is part of the output. The flushed
    // bytes (a character cut short becomes U+FFFD) may complete a stop string: the output then
    // ends there like any other hit, and a length finish becomes that stop.
    sampling::StopFeedResult flushed = PassText(detokenizer_.Flush());
    text += flushed.text;
    if (flushed.stopped && reason == proto::FinishReason::kLength) {
      outcome.reason = proto::FinishReason::kStop;
      outcome.stop_string = stop_strings_.stop_string(flushed.stop_index);
    }
    if (!stop_strings_.stopped()) text += stop_strings_.Flush();
  }
  outcome.text = std::move(text);
  return outcome;
}

TokenOutcome OutputProcessor::OnToken(int32_t token) {
  if (finished_) return TokenOutcome{"", true, proto::FinishReason::kNone};
  generated_.push_back(token);
  const bool stop_token =
      std::find(stop_token_ids_.begin(), stop_token_ids_.end(), static_cast<uint32_t>(token)) !=
      stop_token_ids_.end();
  // Before min_tokens the sampler never picks an ending token; one given here anyway (a device
  // draw, a test) is an ordinary token.
  const bool may_end = static_cast<int64_t>(generated_.size()) > min_tokens_;
  const bool end_of_generation = !ignore_eos_ && tokenizer_.IsEndOfGeneration(token);
  if (may_end && (stop_token || end_of_generation)) {
    // The ending token adds no text, unless it is a stop token and the client asked for the
    // stop in the output (then it goes through the stop-string matcher like any text: a stop
    // string it completes ends the output there and names itself). An end-of-generation token's
    // text never shows, as vLLM skips special tokens' (most have none; a vocabulary may give
    // one a user-defined text such as "<|endoftext|>").
    sampling::StopFeedResult fed;
    if (include_stop_text_ && stop_token && !tokenizer_.IsEndOfGeneration(token)) fed = FeedText(token);
    TokenOutcome outcome = Complete(std::move(fed.text), proto::FinishReason::kStop);
    if (fed.stopped) {
      outcome.stop_string = stop_strings_.stop_string(fed.stop_index);
    } else if (stop_token && !end_of_generation) {  // vLLM's order: end of generation first
      outcome.stop_token_id = token;
    }
    return outcome;
  }
  sampling::StopFeedResult fed = FeedText(token);
  if (fed.stopped) {
    TokenOutcome outcome = Complete(std::move(fed.text), proto::FinishReason::kStop);
    outcome.stop_string = stop_strings_.stop_string(fed.stop_index);
    return outcome;
  }
  if (static_cast<int64_t>(generated_.size()) >= max_new_tokens_) {
    return Complete(std::move(fed.text), proto::FinishReason::kLength);
  }
  return TokenOutcome{std::move(fed.text), false, proto::FinishReason::kNone};
}

std::string OutputProcessor::Finish() {
  if (finished_) return "";
  return Complete("", proto::FinishReason::kCancelled).text;
}

}  // namespace bmad::engine
