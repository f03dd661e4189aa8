#include "coordinator/http/openai_request.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <utility>

#include "coordinator/http/json_fields.h"
#include "coordinator/http/output_constraint_fields.h"
#include "coordinator/http/tool_fields.h"

namespace bmad::http {
namespace {

using internal::AsInteger;
using internal::Json;
using internal::JsonFields;
using internal::MustBe;
using internal::NumberRange;
using internal::Quoted;

// vLLM's default bound on logprobs and top_logprobs (OpenAI's own is 5 and 20).
constexpr int64_t kMaxLogprobs = 20;
// Token ids are int32 in the tokenizer; the vocabulary check is the coordinator's.
constexpr int64_t kMaxTokenId = std::numeric_limits<int32_t>::max() - 1;
constexpr uint32_t kDefaultCompletionMaxTokens = 16;  // OpenAI's default for /v1/completions
constexpr std::string_view kTokenId = "a token id (an integer >= 0)";

std::string Count(size_t n) { return std::to_string(n); }

// An empty text is a prompt of the BOS token alone (unconditional generation), as in vLLM;
// without add_special_tokens it holds no token, which the coordinator refuses once it knows.
Status CheckPromptText(std::string_view name, const std::string& text,
                       const RequestLimits& limits) {
  if (text.size() > limits.max_prompt_bytes) {
    return InvalidArgument(Quoted(name) + " is " + Count(text.size()) + " bytes; at most " +
                           Count(limits.max_prompt_bytes) + " are allowed");
  }
  return Status::Ok();
}

Result<std::vector<uint32_t>> ReadTokenIds(const Json& array, std::string_view name,
                                           const RequestLimits& limits) {
  if (array.empty()) return InvalidArgument(Quoted(name) + " must not be empty");
  if (limits.max_model_len != 0 && array.size() > limits.max_model_len) {
    return OutOfRange(Quoted(name) + " holds " + Count(array.size()) +
                      " tokens, more than the model's context length of " +
                      Count(limits.max_model_len) + " tokens");
  }
  std::vector<uint32_t> ids;
  ids.reserve(array.size());
  for (size_t i = 0; i < array.size(); ++i) {
    const std::optional<int64_t> id = AsInteger(array[i]);
    if (!id || *id < 0 || *id > kMaxTokenId) {
      return MustBe(std::string(name) + "[" + Count(i) + "]", kTokenId, array[i]);
    }
    ids.push_back(static_cast<uint32_t>(*id));
  }
  return ids;
}

// /v1/completions' prompt: a string, token ids, or a list of either (a batch).
Status ReadPrompt(const JsonFields& body, const RequestLimits& limits, CompletionRequest& request) {
  const Json* prompt = body.Find("prompt");
  if (prompt == nullptr) return InvalidArgument("'prompt' is required");
  if (prompt->is_string()) {
    CompletionPrompt& p = request.prompts.emplace_back();
    p.text = prompt->get<std::string>();
    return CheckPromptText("prompt", p.text, limits);
  }
  if (!prompt->is_array()) {
    return MustBe("prompt", "a string or an array of token ids", *prompt);
  }
  if (prompt->empty()) return InvalidArgument("'prompt' must not be empty");
  const Json& first = prompt->front();
  if (!first.is_string() && !first.is_array()) {
    CompletionPrompt& p = request.prompts.emplace_back();
    BMAD_ASSIGN_OR_RETURN(p.tokens, ReadTokenIds(*prompt, "prompt", limits));
    p.is_tokens = true;
    return Status::Ok();
  }
  // A list of prompts: every element must be of the first one's kind.
  if (prompt->size() > kMaxBatchPrompts) {
    return InvalidArgument("'prompt' holds " + Count(prompt->size()) + " prompts; at most " +
                           Count(kMaxBatchPrompts) + " are allowed in one request");
  }
  size_t text_bytes = 0;
  for (size_t i = 0; i < prompt->size(); ++i) {
    const Json& element = (*prompt)[i];
    const std::string name = "prompt[" + Count(i) + "]";
    CompletionPrompt& p = request.prompts.emplace_back();
    if (first.is_string()) {
      if (!element.is_string()) return MustBe(name, "a string like 'prompt[0]'", element);
      p.text = element.get<std::string>();
      BMAD_RETURN_IF_ERROR(CheckPromptText(name, p.text, limits));
      text_bytes += p.text.size();
    } else {
      if (!element.is_array()) return MustBe(name, "an array of token ids like 'prompt[0]'", element);
      BMAD_ASSIGN_OR_RETURN(p.tokens, ReadTokenIds(element, name, limits));
      p.is_tokens = true;
    }
  }
  if (text_bytes > limits.max_prompt_bytes) {
    return InvalidArgument("'prompt' holds " + Count(text_bytes) + " bytes of text in all; at most " +
                           Count(limits.max_prompt_bytes) + " are allowed");
  }
  return Status::Ok();
}

Result<ChatRole> ReadRole(const JsonFields& message) {
  const std::string name = message.Name("role");
  const Json* role = message.Find("role");
  if (role == nullptr) return InvalidArgument(Quoted(name) + " is required");
  constexpr std::string_view kRoles = "one of 'system', 'developer', 'user', 'assistant', 'tool'";
  if (!role->is_string()) return MustBe(name, kRoles, *role);
  const std::string& text = role->get_ref<const std::string&>();
  // OpenAI's "developer" is the system message under a new name (o1 and later models).
  if (text == "system" || text == "developer") return ChatRole::kSystem;
  if (text == "user") return ChatRole::kUser;
  if (text == "assistant") return ChatRole::kAssistant;
  if (text == "tool") return ChatRole::kTool;
  if (text == "function") {
    return InvalidArgument(Quoted(name) + " 'function' (OpenAI's deprecated function calling) is not supported; "
                           "send tool results with role 'tool'");
  }
  return MustBe(name, kRoles, *role);
}

// A message's content: a string, or text parts joined with "\n" (as vLLM joins them).
Result<std::string> ReadContent(const JsonFields& message, ChatRole role) {
  const std::string name = message.Name("content");
  const Json* content = message.Find("content");
  if (content == nullptr) {
    // OpenAI allows an assistant turn without content (one that made tool calls): an empty
    // turn.
    if (role == ChatRole::kAssistant) return std::string();
    return InvalidArgument(Quoted(name) + " is required");
  }
  if (content->is_string()) return content->get<std::string>();
  if (!content->is_array()) {
    return MustBe(name, "a string or an array of content parts", *content);
  }
  std::string text;
  for (size_t j = 0; j < content->size(); ++j) {
    const std::string part_name = name + "[" + Count(j) + "]";
    const Json& part_json = (*content)[j];
    if (!part_json.is_object()) {
      return MustBe(part_name, "an object {\"type\": \"text\", \"text\": ...}", part_json);
    }
    const JsonFields part(part_json, part_name + ".");
    const Json* type = part.Find("type");
    if (type == nullptr) return InvalidArgument(Quoted(part.Name("type")) + " is required");
    if (!type->is_string() || *type != "text") {
      return MustBe(part.Name("type"), "\"text\" (only text content is supported)", *type);
    }
    BMAD_ASSIGN_OR_RETURN(const std::optional<std::string> part_text, part.String("text"));
    if (!part_text) return InvalidArgument(Quoted(part.Name("text")) + " is required");
    if (j > 0) text += '\n';
    text += *part_text;
  }
  return text;
}

Result<std::vector<ChatMessage>> ReadMessages(const JsonFields& body, const RequestLimits& limits) {
  const Json* messages = body.Find("messages");
  constexpr std::string_view kWhat = "a non-empty array";
  if (messages == nullptr) {
    return InvalidArgument("'messages' is required; it must be " + std::string(kWhat));
  }
  if (!messages->is_array()) return MustBe("messages", kWhat, *messages);
  if (messages->empty()) {
    return InvalidArgument("'messages' must be " + std::string(kWhat) + ", got []");
  }
  std::vector<ChatMessage> out;
  out.reserve(messages->size());
  size_t content_bytes = 0;
  for (size_t i = 0; i < messages->size(); ++i) {
    const std::string name = "messages[" + Count(i) + "]";
    const Json& message_json = (*messages)[i];
    if (!message_json.is_object()) return MustBe(name, "an object {role, content}", message_json);
    const JsonFields message(message_json, name + ".");
    ChatMessage m;
    BMAD_ASSIGN_OR_RETURN(m.role, ReadRole(message));
    if (const Json* call = message.Find("function_call"); call != nullptr) {
      return InvalidArgument(Quoted(message.Name("function_call")) +
                             " (OpenAI's deprecated function calling) is not supported; send 'tool_calls'");
    }
    if (m.role == ChatRole::kAssistant) {
      BMAD_ASSIGN_OR_RETURN(m.tool_calls, internal::ReadToolCalls(message));
    } else if (const Json* calls = message.Find("tool_calls"); calls != nullptr && !(calls->is_array() && calls->empty())) {
      return InvalidArgument(Quoted(message.Name("tool_calls")) + " is allowed only in an assistant message");
    }
    if (m.role == ChatRole::kTool) BMAD_RETURN_IF_ERROR(message.String("tool_call_id").status());
    BMAD_ASSIGN_OR_RETURN(m.content, ReadContent(message, m.role));
    content_bytes += m.content.size();
    if (content_bytes > limits.max_prompt_bytes) {
      return InvalidArgument("'messages' hold more than " + Count(limits.max_prompt_bytes) +
                             " bytes of content, the most allowed");
    }
    out.push_back(std::move(m));
  }
  return out;
}

// Reads the float parameter `key` into `target` when it is set (`target` keeps its default
// otherwise).
Status ReadFloat(const JsonFields& body, std::string_view key, NumberRange range,
                 std::string_view what, float& target) {
  BMAD_ASSIGN_OR_RETURN(const std::optional<double> value, body.Number(key, range, what));
  if (!value) return Status::Ok();
  // In range as a double may still round out of it as a float: 1e-50 becomes 0, which top_p's
  // (0, 1] excludes and the workers would refuse.
  const float narrowed = static_cast<float>(*value);
  if (!range.Contains(narrowed)) {
    return InvalidArgument(MustBe(body.Name(key), what, *body.Find(key)).message() +
                           ", which a 32-bit float reads as " + internal::DescribeJsonValue(Json(narrowed)));
  }
  target = narrowed;
  return Status::Ok();
}

Status ReadSampling(const JsonFields& body, proto::SamplingParams& s) {
  BMAD_RETURN_IF_ERROR(ReadFloat(body, "temperature", {0, sampling::kMaxTemperature},
                                 "a number in [0, 2]", s.temperature));
  BMAD_RETURN_IF_ERROR(ReadFloat(body, "top_p", {0, 1, true}, "a number in (0, 1]", s.top_p));
  BMAD_RETURN_IF_ERROR(ReadFloat(body, "min_p", {0, 1}, "a number in [0, 1]", s.min_p));
  BMAD_RETURN_IF_ERROR(ReadFloat(body, "repetition_penalty",
                                 {0, std::numeric_limits<float>::max(), true}, "a number > 0",
                                 s.repetition_penalty));
  constexpr float kPenalty = sampling::kMaxAbsPresenceFrequencyPenalty;
  BMAD_RETURN_IF_ERROR(ReadFloat(body, "presence_penalty", {-kPenalty, kPenalty},
                                 "a number in [-2, 2]", s.presence_penalty));
  BMAD_RETURN_IF_ERROR(ReadFloat(body, "frequency_penalty", {-kPenalty, kPenalty},
                                 "a number in [-2, 2]", s.frequency_penalty));
  // vLLM spells "no top-k" -1; the workers spell it 0.
  BMAD_ASSIGN_OR_RETURN(const std::optional<int64_t> top_k,
                        body.Integer("top_k", -1, std::numeric_limits<int32_t>::max(),
                                     "an integer >= -1 (-1 or 0: no limit)"));
  if (top_k) s.top_k = static_cast<int32_t>(std::max<int64_t>(*top_k, 0));
  BMAD_ASSIGN_OR_RETURN(const std::optional<int64_t> seed,
                        body.Integer("seed", std::numeric_limits<int64_t>::min(),
                                     std::numeric_limits<int64_t>::max(), "a 64-bit integer"));
  if (seed) {
    s.seed = static_cast<uint64_t>(*seed);  // any bit pattern seeds as well as another
    s.has_seed = true;
  }
  BMAD_ASSIGN_OR_RETURN(const std::optional<bool> ignore_eos, body.Bool("ignore_eos"));
  s.ignore_eos = ignore_eos.value_or(false);
  return Status::Ok();
}

Result<std::optional<uint32_t>> ReadMaxTokens(const JsonFields& body, std::string_view key,
                                              const RequestLimits& limits) {
  BMAD_ASSIGN_OR_RETURN(
      const std::optional<int64_t> value,
      body.Integer(key, 1, std::numeric_limits<int64_t>::max(), "a positive integer"));
  if (!value) return std::optional<uint32_t>();
  if (limits.max_model_len != 0 && *value > limits.max_model_len) {
    // OutOfRange, as a prompt and max_tokens past the context are: code context_length_exceeded.
    return OutOfRange(Quoted(key) + " is " + std::to_string(*value) +
                           ", more than the model's context length of " +
                           Count(limits.max_model_len) + " tokens");
  }
  if (*value > std::numeric_limits<uint32_t>::max()) {
    return InvalidArgument(Quoted(key) + " is " + std::to_string(*value) + "; at most " +
                           std::to_string(std::numeric_limits<uint32_t>::max()) + " is allowed");
  }
  return std::optional<uint32_t>(static_cast<uint32_t>(*value));
}

Result<std::vector<std::string>> ReadStop(const JsonFields& body, const RequestLimits& limits) {
  const Json* stop = body.Find("stop");
  if (stop == nullptr) return std::vector<std::string>();
  constexpr std::string_view kWhat = "a string or an array of strings";
  std::vector<std::string> strings;
  if (stop->is_string()) {
    strings.push_back(stop->get<std::string>());
  } else if (stop->is_array()) {
    if (stop->size() > limits.max_stop_strings) {
      return InvalidArgument("'stop' holds " + Count(stop->size()) + " strings; at most " +
                             Count(limits.max_stop_strings) + " are allowed");
    }
    for (size_t i = 0; i < stop->size(); ++i) {
      if (!(*stop)[i].is_string()) return MustBe("stop[" + Count(i) + "]", "a string", (*stop)[i]);
      strings.push_back((*stop)[i].get<std::string>());
    }
  } else {
    return MustBe("stop", kWhat, *stop);
  }
  for (size_t i = 0; i < strings.size(); ++i) {
    const std::string name = stop->is_string() ? "stop" : "stop[" + Count(i) + "]";
    if (strings[i].empty()) return InvalidArgument(Quoted(name) + " must not be empty");
    if (strings[i].size() > limits.max_stop_string_bytes) {
      return InvalidArgument(Quoted(name) + " is " + Count(strings[i].size()) + " bytes; at most " +
                             Count(limits.max_stop_string_bytes) + " are allowed");
    }
  }
  return strings;
}

// A list of token ids (stop_token_ids, allowed_token_ids): at most `max`; absent or null: none.
Result<std::vector<uint32_t>> ReadTokenIdList(const JsonFields& body, std::string_view key, size_t max) {
  const Json* ids = body.Find(key);
  if (ids == nullptr) return std::vector<uint32_t>();
  if (!ids->is_array()) return MustBe(key, "an array of token ids", *ids);
  if (ids->size() > max) {
    return InvalidArgument(Quoted(key) + " holds " + Count(ids->size()) + " ids; at most " + Count(max) +
                           " are allowed");
  }
  std::vector<uint32_t> out;
  out.reserve(ids->size());
  for (size_t i = 0; i < ids->size(); ++i) {
    const std::optional<int64_t> id = AsInteger((*ids)[i]);
    if (!id || *id < 0 || *id > kMaxTokenId) {
      return MustBe(std::string(key) + "[" + Count(i) + "]", kTokenId, (*ids)[i]);
    }
    out.push_back(static_cast<uint32_t>(*id));
  }
  return out;
}

// vLLM's bad_words: strings, each turned into token sequences by the coordinator.
Result<std::vector<std::string>> ReadBadWords(const JsonFields& body) {
  std::vector<std::string> words;
  const Json* list = body.Find("bad_words");
  if (list == nullptr) return words;
  if (!list->is_array()) return MustBe("bad_words", "an array of strings", *list);
  if (list->size() > kMaxBadWords) {
    return InvalidArgument("'bad_words' holds " + Count(list->size()) + " words; at most " + Count(kMaxBadWords) +
                           " are allowed");
  }
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& word = (*list)[i];
    const std::string name = "bad_words[" + Count(i) + "]";
    if (!word.is_string()) return MustBe(name, "a string", word);
    const std::string& text = word.get_ref<const std::string&>();
    if (text.find_first_not_of(" \t\n\r") == std::string::npos) {
      return InvalidArgument(Quoted(name) + " must hold more than whitespace");
    }
    if (text.size() > kMaxBadWordBytes) {
      return InvalidArgument(Quoted(name) + " is " + Count(text.size()) + " bytes; at most " +
                             Count(kMaxBadWordBytes) + " are allowed");
    }
    words.push_back(text);
  }
  return words;
}

// OpenAI's logit_bias: an object from token ids (JSON keys, so decimal strings) to biases.
Result<std::vector<proto::LogitBias>> ReadLogitBias(const JsonFields& body) {
  std::vector<proto::LogitBias> out;
  const Json* bias = body.Find("logit_bias");
  if (bias == nullptr) return out;
  if (!bias->is_object()) return MustBe("logit_bias", "an object from token ids to biases", *bias);
  if (bias->size() > sampling::kMaxLogitBias) {
    return InvalidArgument("'logit_bias' holds " + Count(bias->size()) + " tokens; at most " +
                           Count(sampling::kMaxLogitBias) + " are allowed");
  }
  const JsonFields entries(*bias, "logit_bias.");
  for (auto it = bias->begin(); it != bias->end(); ++it) {
    const std::string& key = it.key();
    if (key.empty() || key.find_first_not_of("0123456789") != std::string::npos) {
      return InvalidArgument("'logit_bias' keys must be token ids (decimal integers >= 0), got " +
                             internal::DescribeJsonValue(Json(key)));
    }
    // Leading zeros are allowed ("007" is token 7); the value must fit a token id.
    const size_t first = std::min(key.find_first_not_of('0'), key.size() - 1);
    const int64_t id = key.size() - first > 10 ? -1 : std::stoll(key.substr(first));
    if (id < 0 || id > kMaxTokenId) {
      return InvalidArgument("'logit_bias' key " + internal::DescribeJsonValue(Json(key)) +
                             " is not a token id: the largest is " + std::to_string(kMaxTokenId));
    }
    BMAD_ASSIGN_OR_RETURN(const std::optional<double> value,
                          entries.Number(key, NumberRange{-100, 100}, "a number in [-100, 100]"));
    if (!value) continue;  // null: no bias
    out.push_back(proto::LogitBias{static_cast<uint32_t>(id), static_cast<float>(*value)});
  }
  return out;
}

// Completions ask with an integer (how many alternatives); chat with a boolean plus
// top_logprobs.
Status ReadLogprobs(const JsonFields& body, bool chat, CompletionRequest& request) {
  const std::string range = "an integer in [0, " + std::to_string(kMaxLogprobs) + "]";
  if (!chat) {
    // Chat's parameter, which OpenAI refuses here: ignored, a client would get no logprobs
    // without learning why. 0 asks for nothing and passes.
    if (const Json* top = body.Find("top_logprobs"); top != nullptr && !top->is_null() && *top != 0) {
      return InvalidArgument("'top_logprobs' is a chat completions parameter; /v1/completions takes "
                             "'logprobs', the number of alternatives");
    }
    BMAD_ASSIGN_OR_RETURN(const std::optional<int64_t> n,
                          body.Integer("logprobs", 0, kMaxLogprobs, range));
    request.sampling.logprobs = n.has_value();
    request.top_logprobs = static_cast<uint32_t>(n.value_or(0));
    request.sampling.top_logprobs = request.top_logprobs;
    return Status::Ok();
  }
  BMAD_ASSIGN_OR_RETURN(const std::optional<bool> logprobs, body.Bool("logprobs"));
  BMAD_ASSIGN_OR_RETURN(const std::optional<int64_t> top,
                        body.Integer("top_logprobs", 0, kMaxLogprobs, range));
  request.sampling.logprobs = logprobs.value_or(false);
  request.top_logprobs = static_cast<uint32_t>(top.value_or(0));
  if (request.top_logprobs > 0 && !request.sampling.logprobs) {
    return InvalidArgument("'top_logprobs' needs 'logprobs' set to true");
  }
  request.sampling.top_logprobs = request.top_logprobs;
  return Status::Ok();
}

Status ReadStreaming(const JsonFields& body, CompletionRequest& request) {
  BMAD_ASSIGN_OR_RETURN(const std::optional<bool> stream, body.Bool("stream"));
  request.stream = stream.value_or(false);
  const Json* options = body.Find("stream_options");
  if (options == nullptr) return Status::Ok();
  if (!options->is_object()) return MustBe("stream_options", "an object", *options);
  // An empty object asks for nothing (vLLM too refuses only a non-empty one): clients that
  // always send one are served.
  if (!request.stream && !options->empty()) {
    return InvalidArgument("'stream_options' is only allowed when 'stream' is true");
  }
  const JsonFields fields(*options, "stream_options.");
  BMAD_ASSIGN_OR_RETURN(const std::optional<bool> include_usage, fields.Bool("include_usage"));
  request.include_usage = include_usage.value_or(false);
  BMAD_ASSIGN_OR_RETURN(const std::optional<bool> continuous, fields.Bool("continuous_usage_stats"));
  request.continuous_usage = request.include_usage && continuous.value_or(false);
  return Status::Ok();
}

// vLLM's truncate_prompt_tokens: -1 (the context length) or k >= 1, at most the context length.
Result<std::optional<int64_t>> ReadTruncatePromptTokens(const JsonFields& body, const RequestLimits& limits) {
  BMAD_ASSIGN_OR_RETURN(const std::optional<int64_t> keep,
                        body.Integer("truncate_prompt_tokens", -1, std::numeric_limits<int32_t>::max(),
                                     "-1 (the context length) or a positive integer"));
  if (keep && *keep == 0) {
    return InvalidArgument("'truncate_prompt_tokens' must be -1 (the context length) or a positive "
                           "integer, got 0: a prompt needs a token");
  }
  if (keep && limits.max_model_len != 0 && *keep > limits.max_model_len) {
    return OutOfRange("'truncate_prompt_tokens' is " + std::to_string(*keep) +
                      ", more than the model's context length of " + Count(limits.max_model_len) + " tokens");
  }
  return keep;
}

// n choices (each generated as its own request); best_of may only repeat n, since ranking
// candidates by likelihood is not done; echo (both endpoints, CompletionRequest::echo).
Status ReadChoiceShape(const JsonFields& body, CompletionRequest& request) {
  BMAD_ASSIGN_OR_RETURN(const std::optional<int64_t> n,
                        body.Integer("n", 1, kMaxChoices,
                                     "an integer in [1, " + std::to_string(kMaxChoices) + "]"));
  request.n = static_cast<uint32_t>(n.value_or(1));
  // vLLM takes best_of on chat requests too (an extension there).
  BMAD_ASSIGN_OR_RETURN(const std::optional<int64_t> best_of,
                        body.Integer("best_of", 1, kMaxChoices,
                                     "an integer in [1, " + std::to_string(kMaxChoices) + "]"));
  if (best_of && *best_of != request.n) {
    return InvalidArgument("'best_of' must equal 'n' (" + std::to_string(request.n) + "), got " +
                           std::to_string(*best_of) +
                           ": every generated choice is returned; none are ranked and dropped");
  }
  BMAD_ASSIGN_OR_RETURN(const std::optional<bool> echo, body.Bool("echo"));
  request.echo = echo.value_or(false);
  return Status::Ok();
}

// The prompt's own log-probabilities: vLLM's prompt_logprobs (N alternatives per position),
// and completions' echo with logprobs (the echoed prompt's tokens lead the logprobs, the first
// with null, as vLLM and OpenAI's legacy API give them). Neither while streaming, as vLLM.
Status ReadPromptScoring(const JsonFields& body, bool chat, CompletionRequest& request) {
  BMAD_ASSIGN_OR_RETURN(const std::optional<int64_t> n,
                        body.Integer("prompt_logprobs", 0, kMaxLogprobs,
                                     "an integer in [0, " + std::to_string(kMaxLogprobs) + "]"));
  request.vllm_prompt_logprobs = n ? static_cast<int32_t>(*n) : -1;
  request.echo_logprobs = !chat && request.echo && request.sampling.logprobs;
  if (!n && !request.echo_logprobs) return Status::Ok();
  if (request.stream) {
    return InvalidArgument(n ? "'prompt_logprobs' is not available with 'stream': the prompt's "
                               "log-probabilities come with the whole response"
                             : "'echo' with 'logprobs' is not available with 'stream': the echoed "
                               "prompt's log-probabilities come with the whole response");
  }
  const int64_t alternatives = std::max<int64_t>(n.value_or(0), request.echo_logprobs ? request.top_logprobs : 0);
  request.sampling.prompt_logprobs = static_cast<int32_t>(alternatives);
  return Status::Ok();
}

// Chat: how the template closes the conversation (add_generation_prompt, vLLM's
// continue_final_message) and chat_template_kwargs.
Status ReadChatPromptOptions(const JsonFields& body, CompletionRequest& request) {
  BMAD_ASSIGN_OR_RETURN(const std::optional<bool> add_generation_prompt, body.Bool("add_generation_prompt"));
  BMAD_ASSIGN_OR_RETURN(const std::optional<bool> continue_final, body.Bool("continue_final_message"));
  request.continue_final_message = continue_final.value_or(false);
  // vLLM's default for add_generation_prompt is true, and it refuses the two together; a client
  // that continues the final message asks for no new turn, so unset means false then.
  request.add_generation_prompt = add_generation_prompt.value_or(!request.continue_final_message);
  BMAD_ASSIGN_OR_RETURN(const std::optional<bool> include_reasoning, body.Bool("include_reasoning"));
  request.include_reasoning = include_reasoning.value_or(true);
  if (request.continue_final_message && request.add_generation_prompt) {
    return InvalidArgument("'continue_final_message' and 'add_generation_prompt' cannot both be true: "
                           "the one continues the final message, the other opens a new one");
  }
  const Json* kwargs = body.Find("chat_template_kwargs");
  if (kwargs == nullptr) return Status::Ok();
  if (!kwargs->is_object()) return internal::MustBe("chat_template_kwargs", "an object", *kwargs);
  const JsonFields fields(*kwargs, "chat_template_kwargs.");
  for (const auto& [key, value] : kwargs->items()) {
    if (key == "enable_thinking") {
      BMAD_ASSIGN_OR_RETURN(request.enable_thinking, fields.Bool(key));
      continue;
    }
    // The templates are built in (chat_template.h): a variable a Jinja template would read
    // cannot reach them, and ignoring it would give another prompt than the one asked for.
    return InvalidArgument(Quoted(fields.Name(key)) + " is not supported: the chat templates are built "
                           "in and read only 'enable_thinking'");
  }
  return Status::Ok();
}

Status ReadSchedulingHints(const JsonFields& body, const RequestLimits& limits,
                           CompletionRequest& request) {
  const int64_t last_class = std::max<int64_t>(limits.priority_classes, 1) - 1;
  BMAD_ASSIGN_OR_RETURN(const std::optional<int64_t> priority,
                        body.Integer("priority", 0, last_class,
                                     "an integer in [0, " + std::to_string(last_class) +
                                         "] (0 is the most urgent class)"));
  if (priority) request.priority = static_cast<int32_t>(*priority);
  BMAD_ASSIGN_OR_RETURN(const std::optional<int64_t> slo_ms,
                        body.Integer("slo_ms", 0, std::numeric_limits<uint32_t>::max(),
                                     "an integer >= 0 (milliseconds; 0: none)"));
  request.slo_ms = static_cast<uint32_t>(slo_ms.value_or(0));
  return Status::Ok();
}

// vLLM's cache_salt: the request shares prefix-cache blocks only with requests of the same salt.
// As vLLM, a given salt must be a non-empty string (null is none).
Status ReadCacheSalt(const JsonFields& body, CompletionRequest& request) {
  BMAD_ASSIGN_OR_RETURN(const std::optional<std::string> salt, body.String("cache_salt"));
  if (!salt) return Status::Ok();
  if (salt->empty()) {
    return InvalidArgument("'cache_salt' must be a non-empty string when given (null for none)");
  }
  request.sampling.cache_salt = *salt;
  return Status::Ok();
}

// OpenAI parameters whose effect this server cannot give: ignoring them would silently return
// something other than what was asked for. Their neutral values (null, empty) pass.
Status RejectUnsupported(const JsonFields& body, bool chat) {
  if (const Json* suffix = body.Find("suffix"); !chat && suffix != nullptr && *suffix != "") {
    return InvalidArgument("'suffix' is not supported");
  }
  // OpenAI's deprecated function calling; tools replace it.
  if (const Json* functions = body.Find("functions"); functions != nullptr && !functions->empty()) {
    return InvalidArgument("'functions' (OpenAI's deprecated function calling) is not supported; send 'tools'");
  }
  if (const Json* call = body.Find("function_call"); call != nullptr && *call != "none") {
    return InvalidArgument("'function_call' (OpenAI's deprecated function calling) is not supported; send "
                           "'tool_choice'");
  }
  // Tools are chat's (ReadTools).
  for (const std::string_view key : {"tools", "tool_choice"}) {
    if (const Json* value = body.Find(key); !chat && value != nullptr && !value->empty() && *value != "none") {
      return InvalidArgument(Quoted(key) + " is a chat completions parameter; /v1/completions takes no tools");
    }
  }
  // vLLM's extensions that change what is generated: refused rather than ignored, so that a
  // client relying on one learns it has no effect here. Their "off" values pass.
  for (const std::string_view key : {"use_beam_search"}) {
    if (const Json* flag = body.Find(key); flag != nullptr && *flag != false && !flag->is_null()) {
      return InvalidArgument(Quoted(key) + " is not supported");
    }
  }
  // Special tokens' text is always left out of the output, as vLLM does by default.
  for (const std::string_view key : {"skip_special_tokens", "spaces_between_special_tokens"}) {
    if (const Json* flag = body.Find(key); flag != nullptr && *flag != true && !flag->is_null()) {
      return InvalidArgument(Quoted(key) + " is not supported except as true: special tokens "
                             "never appear in the output text");
    }
  }
  // Empty values ({}, [], "") ask for nothing, as null does: clients that always send the
  // field pass.
  auto neutral = [](const Json& v) {
    return v.is_null() || ((v.is_object() || v.is_array()) && v.empty()) ||
           (v.is_string() && v.get_ref<const std::string&>().empty());
  };
  for (const std::string_view key : {"guided_grammar", "guided_whitespace_pattern", "chat_template",
                                     "logits_processors", "prompt_embeds", "documents"}) {
    if (const Json* value = body.Find(key); value != nullptr && !neutral(*value)) {
      return InvalidArgument(Quoted(key) + " is not supported");
    }
  }
  // OpenAI's parameters for outputs this server cannot give: audio, web search, a reasoning
  // budget, predicted outputs. Text is the only modality.
  for (const std::string_view key : {"audio", "web_search_options", "reasoning_effort", "prediction"}) {
    if (const Json* value = body.Find(key); value != nullptr && !neutral(*value)) {
      return InvalidArgument(Quoted(key) + " is not supported");
    }
  }
  if (const Json* modalities = body.Find("modalities"); modalities != nullptr && !neutral(*modalities) &&
                                                        *modalities != Json::array({"text"})) {
    return InvalidArgument("'modalities' must be [\"text\"]: this server generates text only");
  }
  return Status::Ok();
}

Result<CompletionRequest> ReadRequest(const Json& json, bool chat, const RequestLimits& limits) {
  const JsonFields body(json, "");
  CompletionRequest request;
  request.chat = chat;
  BMAD_ASSIGN_OR_RETURN(const std::optional<std::string> model, body.String("model"));
  request.model = model.value_or("");

  BMAD_ASSIGN_OR_RETURN(request.truncate_prompt_tokens, ReadTruncatePromptTokens(body, limits));
  BMAD_ASSIGN_OR_RETURN(const std::optional<bool> tokens_as_ids, body.Bool("return_tokens_as_token_ids"));
  request.return_tokens_as_token_ids = tokens_as_ids.value_or(false);
  BMAD_ASSIGN_OR_RETURN(const std::optional<bool> token_ids, body.Bool("return_token_ids"));
  request.return_token_ids = token_ids.value_or(false);
  // A token-id prompt longer than the context is cut to fit, not refused, when truncating.
  RequestLimits prompt_limits = limits;
  if (request.truncate_prompt_tokens) prompt_limits.max_model_len = 0;
  if (chat) {
    BMAD_ASSIGN_OR_RETURN(request.messages, ReadMessages(body, limits));
    BMAD_RETURN_IF_ERROR(ReadChatPromptOptions(body, request));
  } else {
    BMAD_RETURN_IF_ERROR(ReadPrompt(body, prompt_limits, request));
  }

  if (!chat) {
    BMAD_ASSIGN_OR_RETURN(const std::optional<bool> add_special, body.Bool("add_special_tokens"));
    request.add_special_tokens = add_special.value_or(true);
  }

  // max_tokens 0 with echo (completions) asks for the prompt alone, as OpenAI's legacy API
  // took it: one token is generated and left out of the response, as vLLM does.
  if (const Json* max = body.Find("max_tokens"); !chat && max != nullptr && AsInteger(*max) == 0) {
    BMAD_ASSIGN_OR_RETURN(const std::optional<bool> echo, body.Bool("echo"));
    if (!echo.value_or(false)) {
      return InvalidArgument("'max_tokens' must be a positive integer, got 0 (0 is taken only with "
                             "'echo': the prompt alone)");
    }
    request.echo_only = true;
    request.max_tokens = 1;
  } else {
    BMAD_ASSIGN_OR_RETURN(request.max_tokens, ReadMaxTokens(body, "max_tokens", limits));
  }
  if (chat) {
    // OpenAI's newer name; it wins when a client sends both.
    BMAD_ASSIGN_OR_RETURN(const std::optional<uint32_t> max_completion_tokens,
                          ReadMaxTokens(body, "max_completion_tokens", limits));
    if (max_completion_tokens) request.max_tokens = max_completion_tokens;
  } else {
    // Chat's newer name, which OpenAI refuses here: ignored, the default length would come out.
    if (const Json* max = body.Find("max_completion_tokens"); max != nullptr && !max->is_null()) {
      return InvalidArgument("'max_completion_tokens' is a chat completions parameter; "
                             "/v1/completions takes 'max_tokens'");
    }
    if (!request.max_tokens) request.max_tokens = kDefaultCompletionMaxTokens;
  }
  request.sampling.max_tokens = request.max_tokens.value_or(0);

  BMAD_RETURN_IF_ERROR(ReadSampling(body, request.sampling));
  BMAD_ASSIGN_OR_RETURN(request.sampling.stop_strings, ReadStop(body, limits));
  BMAD_ASSIGN_OR_RETURN(const std::optional<bool> include_stop, body.Bool("include_stop_str_in_output"));
  request.sampling.include_stop_str_in_output = include_stop.value_or(false);
  BMAD_ASSIGN_OR_RETURN(request.sampling.stop_token_ids,
                        ReadTokenIdList(body, "stop_token_ids", sampling::kMaxStopTokenIds));
  BMAD_ASSIGN_OR_RETURN(request.sampling.allowed_token_ids,
                        ReadTokenIdList(body, "allowed_token_ids", sampling::kMaxAllowedTokenIds));
  BMAD_ASSIGN_OR_RETURN(request.bad_words, ReadBadWords(body));
  BMAD_ASSIGN_OR_RETURN(request.sampling.logit_bias, ReadLogitBias(body));
  BMAD_ASSIGN_OR_RETURN(const std::optional<int64_t> min_tokens,
                        body.Integer("min_tokens", 0, std::numeric_limits<uint32_t>::max(),
                                     "an integer in [0, 4294967295]"));
  request.sampling.min_tokens = static_cast<uint32_t>(min_tokens.value_or(0));
  BMAD_RETURN_IF_ERROR(ReadLogprobs(body, chat, request));
  BMAD_RETURN_IF_ERROR(ReadChoiceShape(body, request));
  BMAD_RETURN_IF_ERROR(ReadStreaming(body, request));
  BMAD_RETURN_IF_ERROR(ReadPromptScoring(body, chat, request));
  BMAD_RETURN_IF_ERROR(ReadSchedulingHints(body, limits, request));
  BMAD_RETURN_IF_ERROR(ReadCacheSalt(body, request));
  BMAD_ASSIGN_OR_RETURN(std::string constraint_field, internal::ReadOutputConstraint(body, request.sampling));
  if (chat) {
    BMAD_ASSIGN_OR_RETURN(const std::string tools_field, internal::ReadTools(body, constraint_field, request));
    if (!tools_field.empty()) constraint_field = tools_field;
  }
  BMAD_RETURN_IF_ERROR(RejectUnsupported(body, chat));
  // Read by nothing here (OpenAI's end-user id for abuse monitoring), but typed as OpenAI and
  // vLLM type it: a client sending a number learns it now, not from another server later.
  BMAD_RETURN_IF_ERROR(body.String("user").status());

  // The workers' own admission check, so nothing accepted here is refused there. The vocabulary
  // is not known here: the largest one lets every id through (the coordinator checks ids).
  proto::SamplingParams worker_view = request.sampling;
  if (worker_view.max_tokens == 0) {  // filled in by the coordinator, which checks min_tokens
    worker_view.max_tokens = std::max<uint32_t>(1, worker_view.min_tokens);
  }
  // A schema's or a pattern's error names the field it came in.
  BMAD_RETURN_IF_ERROR(sampling::ValidateSamplingParams(worker_view, std::numeric_limits<int32_t>::max(),
                                                        constraint_field));
  return request;
}

}  // namespace

Result<CompletionRequest> ParseCompletionRequest(std::string_view body, bool chat,
                                                 const RequestLimits& limits) {
  BMAD_ASSIGN_OR_RETURN(const Json json, internal::ParseJsonObject(body, limits.max_body_bytes));
  // Every access above checks types first, so nothing here should throw; should a mistake slip
  // through, the client gets an error and the coordinator keeps running.
  try {
    return ReadRequest(json, chat, limits);
  } catch (const Json::exception& e) {
    return Internal(std::string("reading the request body failed: ") + e.what());
  }
}

}  // namespace bmad::http
