#include "worker/sampling/sampling_params_validation.h"

#include "common/utf8_lead.h"
#include "worker/sampling/json_schema.h"
#include "worker/sampling/regex_nfa.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <unordered_set>

namespace bmad::sampling {
namespace {

std::string FormatFloat(float value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(value));
  return buf;
}

// `range` is the human-readable interval, e.g. "[0, 2]".
Status BadNumber(const char* field, const char* range, float value) {
  return InvalidArgument(std::string("'") + field + "' must be a finite number in " + range +
                         "; got " + FormatFloat(value));
}

// Each check is written so that NaN fails it: comparisons with NaN are false.
bool InClosed(float value, float lo, float hi) {
  return std::isfinite(value) && value >= lo && value <= hi;
}

}  // namespace

bool IsValidUtf8(std::string_view bytes) {
  for (size_t i = 0; i < bytes.size();) {
    const std::optional<Utf8Lead> lead = ReadUtf8Lead(static_cast<uint8_t>(bytes[i]));
    if (!lead || bytes.size() - i < static_cast<size_t>(lead->length)) return false;
    for (int k = 1; k < lead->length; ++k) {
      const auto next = static_cast<uint8_t>(bytes[i + static_cast<size_t>(k)]);
      const uint8_t min = k == 1 ? lead->second_min : 0x80, max = k == 1 ? lead->second_max : 0xBF;
      if (next < min || next > max) return false;
    }
    i += static_cast<size_t>(lead->length);
  }
  return true;
}

namespace {

// `field` (e.g. "'allowed_token_ids[3]'") holds `id`: OK when it is in the vocabulary.
Status CheckTokenId(const std::string& field, uint32_t id, int32_t vocab_size) {
  if (id < static_cast<uint32_t>(vocab_size)) return Status::Ok();
  return InvalidArgument(field + " is " + std::to_string(id) + ", outside the vocabulary [0, " +
                         std::to_string(vocab_size) + ")");
}

Status ValidateTokenBans(const proto::SamplingParams& params, int32_t vocab_size) {
  if (params.allowed_token_ids.size() > kMaxAllowedTokenIds) {
    return InvalidArgument("'allowed_token_ids' holds " + std::to_string(params.allowed_token_ids.size()) +
                           " ids; at most " + std::to_string(kMaxAllowedTokenIds) + " are allowed");
  }
  for (size_t i = 0; i < params.allowed_token_ids.size(); ++i) {
    BMAD_RETURN_IF_ERROR(CheckTokenId("'allowed_token_ids[" + std::to_string(i) + "]'",
                                      params.allowed_token_ids[i], vocab_size));
  }
  if (params.bad_words.size() > kMaxBadWordSequences) {
    return InvalidArgument("'bad_words' make " + std::to_string(params.bad_words.size()) +
                           " token sequences; at most " + std::to_string(kMaxBadWordSequences) +
                           " are allowed");
  }
  for (size_t i = 0; i < params.bad_words.size(); ++i) {
    const std::vector<uint32_t>& word = params.bad_words[i];
    const std::string field = "'bad_words' sequence " + std::to_string(i);
    if (word.empty() || word.size() > kMaxBadWordTokens) {
      return InvalidArgument(field + " holds " + std::to_string(word.size()) + " tokens; 1 to " +
                             std::to_string(kMaxBadWordTokens) + " are allowed");
    }
    for (size_t j = 0; j < word.size(); ++j) {
      BMAD_RETURN_IF_ERROR(CheckTokenId(field + " token " + std::to_string(j), word[j], vocab_size));
    }
  }
  return Status::Ok();
}

// The reasoning block's tokens: ids in the vocabulary, distinct, a start only with an end, and
// both only with a response format, which is what they gate.
Status ValidateReasoningGate(const proto::SamplingParams& params, int32_t vocab_size) {
  const int32_t end = params.reasoning_end_token;
  const int32_t start = params.reasoning_start_token;
  for (const auto& [id, field] : {std::pair{end, "'reasoning_end_token'"}, std::pair{start, "'reasoning_start_token'"}}) {
    if (id < -1) return InvalidArgument(std::string(field) + " is " + std::to_string(id) + "; -1 means none");
    if (id >= 0) BMAD_RETURN_IF_ERROR(CheckTokenId(field, static_cast<uint32_t>(id), vocab_size));
  }
  if (start >= 0 && end < 0) {
    return InvalidArgument("'reasoning_start_token' is set without 'reasoning_end_token', the block's end");
  }
  if (start >= 0 && start == end) {
    return InvalidArgument("'reasoning_start_token' and 'reasoning_end_token' are both " + std::to_string(end));
  }
  if (end >= 0 && params.response_format == proto::ResponseFormat::kText) {
    return InvalidArgument("'reasoning_end_token' is set, but response_format is \"text\": it delays a format");
  }
  if (end < 0) return Status::Ok();
  // A block that can be open must be able to close, or the format would never begin.
  auto stops_at = [&](int32_t id) {
    return std::find(params.stop_token_ids.begin(), params.stop_token_ids.end(), static_cast<uint32_t>(id)) !=
           params.stop_token_ids.end();
  };
  // The field that keeps `id` from ever being drawn, or "".
  auto banned_by = [&](int32_t id) -> std::string {
    const auto& allowed = params.allowed_token_ids;
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), static_cast<uint32_t>(id)) == allowed.end()) {
      return "'allowed_token_ids' leaves out";
    }
    const bool bad = std::any_of(params.bad_words.begin(), params.bad_words.end(), [&](const auto& word) {
      return word.size() == 1 && word[0] == static_cast<uint32_t>(id);
    });
    return bad ? "'bad_words' bans" : "";
  };
  if (start >= 0 && (stops_at(start) || !banned_by(start).empty())) return Status::Ok();  // no block can open
  const std::string why = " the token that ends the model's reasoning (" + std::to_string(end) +
                          "), after which the response format applies: the formatted output could never begin";
  if (stops_at(end)) return InvalidArgument("'stop_token_ids' holds" + why);
  if (const std::string field = banned_by(end); !field.empty()) return InvalidArgument(field + why);
  return Status::Ok();
}

}  // namespace

Status ValidateSamplingParams(const proto::SamplingParams& params, int32_t vocab_size,
                              std::string_view constraint_field) {
  if (vocab_size <= 0) {
    return InvalidArgument("vocab_size must be positive; got " + std::to_string(vocab_size));
  }
  if (!InClosed(params.temperature, 0.0f, kMaxTemperature)) {
    return BadNumber("temperature", "[0, 2]", params.temperature);
  }
  if (params.top_k < 0) {
    return InvalidArgument("'top_k' must be >= 0 (0 disables it); got " +
                           std::to_string(params.top_k));
  }
  if (!(std::isfinite(params.top_p) && params.top_p > 0.0f && params.top_p <= 1.0f)) {
    return BadNumber("top_p", "(0, 1]", params.top_p);
  }
  if (!InClosed(params.min_p, 0.0f, 1.0f)) {
    return BadNumber("min_p", "[0, 1]", params.min_p);
  }
  if (!(std::isfinite(params.repetition_penalty) && params.repetition_penalty > 0.0f)) {
    return BadNumber("repetition_penalty", "(0, inf)", params.repetition_penalty);
  }
  if (!InClosed(params.presence_penalty, -kMaxAbsPresenceFrequencyPenalty,
                kMaxAbsPresenceFrequencyPenalty)) {
    return BadNumber("presence_penalty", "[-2, 2]", params.presence_penalty);
  }
  if (!InClosed(params.frequency_penalty, -kMaxAbsPresenceFrequencyPenalty,
                kMaxAbsPresenceFrequencyPenalty)) {
    return BadNumber("frequency_penalty", "[-2, 2]", params.frequency_penalty);
  }
  if (params.max_tokens < 1) {
    return InvalidArgument("'max_tokens' must be >= 1; got 0");
  }
  if (params.top_logprobs > kMaxTopLogprobs) {
    return InvalidArgument("'top_logprobs' must be at most " + std::to_string(kMaxTopLogprobs) +
                           "; got " + std::to_string(params.top_logprobs));
  }
  if (params.top_logprobs > 0 && !params.logprobs) {
    return InvalidArgument("'top_logprobs' needs 'logprobs'");
  }
  if (params.cache_salt.size() > kMaxCacheSaltBytes) {
    return InvalidArgument("'cache_salt' holds " + std::to_string(params.cache_salt.size()) + " bytes; at most " +
                           std::to_string(kMaxCacheSaltBytes) + " are allowed");
  }
  if (params.prompt_logprobs < -1 || params.prompt_logprobs > static_cast<int32_t>(kMaxTopLogprobs)) {
    return InvalidArgument("'prompt_logprobs' must be in [0, " + std::to_string(kMaxTopLogprobs) + "]; got " +
                           std::to_string(params.prompt_logprobs));
  }
  if (params.stop_token_ids.size() > kMaxStopTokenIds) {
    return InvalidArgument("'stop_token_ids' holds " +
                           std::to_string(params.stop_token_ids.size()) + " ids; at most " +
                           std::to_string(kMaxStopTokenIds) + " are allowed");
  }
  for (size_t i = 0; i < params.stop_token_ids.size(); ++i) {
    BMAD_RETURN_IF_ERROR(
        CheckTokenId("'stop_token_ids[" + std::to_string(i) + "]'", params.stop_token_ids[i], vocab_size));
  }
  if (params.stop_strings.size() > kMaxStopStrings) {
    return InvalidArgument("'stop' holds " + std::to_string(params.stop_strings.size()) +
                           " strings; at most " + std::to_string(kMaxStopStrings) +
                           " are allowed");
  }
  for (size_t i = 0; i < params.stop_strings.size(); ++i) {
    const std::string& stop = params.stop_strings[i];
    const std::string field = "'stop[" + std::to_string(i) + "]'";
    if (stop.empty()) return InvalidArgument(field + " is empty; stop strings must be non-empty");
    if (stop.size() > kMaxStopStringBytes) {
      return InvalidArgument(field + " is " + std::to_string(stop.size()) + " bytes; at most " +
                             std::to_string(kMaxStopStringBytes) + " are allowed");
    }
    if (!IsValidUtf8(stop)) return InvalidArgument(field + " is not valid UTF-8");
  }
  if (params.min_tokens > params.max_tokens) {
    return InvalidArgument("'min_tokens' (" + std::to_string(params.min_tokens) +
                           ") must be at most 'max_tokens' (" +
                           std::to_string(params.max_tokens) + ")");
  }
  if (params.response_format != proto::ResponseFormat::kText) {
    // The value's end is the output's end: the sampler allows nothing but an ending token then.
    for (const auto& [set, field] : {std::pair{params.min_tokens > 0, "'min_tokens'"},
                                     std::pair{params.ignore_eos, "'ignore_eos'"}}) {
      if (set) {
        return InvalidArgument(std::string(field) + " cannot be used with response_format \"" +
                               std::string(proto::ResponseFormatName(params.response_format)) +
                               (params.response_format == proto::ResponseFormat::kRegex
                                    ? "\": the output ends when the pattern allows nothing more"
                                    : "\": the output ends when the JSON value does"));
      }
    }
  }
  if (params.response_format == proto::ResponseFormat::kRegex) {
    const std::string_view field = constraint_field.empty() ? "regex" : constraint_field;
    if (params.regex.size() > kMaxRegexBytes) {
      return InvalidArgument("'" + std::string(field) + "' is " + std::to_string(params.regex.size()) +
                             " bytes; at most " + std::to_string(kMaxRegexBytes) + " are allowed");
    }
    Result<std::shared_ptr<const RegexNfa>> pattern = RegexNfa::Compile(params.regex);
    if (!pattern.ok()) return InvalidArgument("'" + std::string(field) + "': " + pattern.status().message());
  } else if (!params.regex.empty()) {
    return InvalidArgument("'regex' is set, but response_format is \"" +
                           std::string(proto::ResponseFormatName(params.response_format)) + "\", not \"regex\"");
  }
  BMAD_RETURN_IF_ERROR(ValidateReasoningGate(params, vocab_size));
  if (params.response_format == proto::ResponseFormat::kJsonSchema) {
    const std::string_view field = constraint_field.empty() ? "response_format.json_schema.schema" : constraint_field;
    Result<std::shared_ptr<const JsonSchema>> schema = JsonSchema::Compile(params.json_schema);
    if (!schema.ok()) {
      return InvalidArgument("'" + std::string(field) + "' " + schema.status().message());
    }
  } else if (!params.json_schema.empty()) {
    return InvalidArgument("'json_schema' is set, but response_format is \"" +
                           std::string(proto::ResponseFormatName(params.response_format)) +
                           "\", not \"json_schema\"");
  }
  if (params.logit_bias.size() > kMaxLogitBias) {
    return InvalidArgument("'logit_bias' holds " + std::to_string(params.logit_bias.size()) +
                           " tokens; at most " + std::to_string(kMaxLogitBias) +
                           " are allowed");
  }
  std::unordered_set<uint32_t> biased;
  for (const proto::LogitBias& entry : params.logit_bias) {
    const std::string field = "'logit_bias' for token " + std::to_string(entry.token_id);
    if (entry.token_id >= static_cast<uint32_t>(vocab_size)) {
      return InvalidArgument(field + ": the token is outside the vocabulary [0, " +
                             std::to_string(vocab_size) + ")");
    }
    if (!InClosed(entry.bias, -kMaxAbsLogitBias, kMaxAbsLogitBias)) {
      return InvalidArgument(field + " must be a finite number in [-100, 100]; got " +
                             FormatFloat(entry.bias));
    }
    if (!biased.insert(entry.token_id).second) {
      return InvalidArgument(field + " is given twice");
    }
  }
  return ValidateTokenBans(params, vocab_size);
}

}  // namespace bmad::sampling
