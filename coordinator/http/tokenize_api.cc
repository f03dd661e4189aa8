#include "coordinator/http/tokenize_api.h"

#include <limits>

#include <nlohmann/json.hpp>

#include "coordinator/http/json_fields.h"

namespace bmad::http {
namespace {

using internal::Json;
using internal::JsonFields;

std::string Dump(const Json& json) { return json.dump(-1, ' ', false, Json::error_handler_t::replace); }

}  // namespace

Result<TokenizeRequest> ParseTokenizeRequest(std::string_view body, const RequestLimits& limits) {
  BMAD_ASSIGN_OR_RETURN(const Json json, internal::ParseJsonObject(body, limits.max_body_bytes));
  const JsonFields fields(json, "");
  TokenizeRequest request;
  const Json* messages = fields.Find("messages");
  const Json* prompt = fields.Find("prompt");
  const bool chat = messages != nullptr && !messages->is_null();  // null: not given
  if (chat && prompt != nullptr && !prompt->is_null()) {
    return InvalidArgument("'prompt' and 'messages' cannot both be given: /tokenize counts one prompt");
  }
  // Counting tokens is what a client does to learn whether a prompt fits: one longer than the
  // context is counted (as a text one always was), not refused.
  RequestLimits counting = limits;
  counting.max_model_len = 0;
  BMAD_ASSIGN_OR_RETURN(request.prompt, ParseCompletionRequest(body, chat, counting));
  if (request.prompt.prompts.size() > 1) {
    return InvalidArgument("'prompt' must be one prompt for /tokenize, not a batch of " +
                           std::to_string(request.prompt.prompts.size()));
  }
  BMAD_ASSIGN_OR_RETURN(const std::optional<bool> add_special, fields.Bool("add_special_tokens"));
  request.add_special_tokens = add_special.value_or(true);
  BMAD_ASSIGN_OR_RETURN(const std::optional<bool> token_strs, fields.Bool("return_token_strs"));
  request.return_token_strs = token_strs.value_or(false);
  return request;
}

Result<DetokenizeRequest> ParseDetokenizeRequest(std::string_view body, const RequestLimits& limits) {
  BMAD_ASSIGN_OR_RETURN(const Json json, internal::ParseJsonObject(body, limits.max_body_bytes));
  const JsonFields fields(json, "");
  DetokenizeRequest request;
  BMAD_ASSIGN_OR_RETURN(const std::optional<std::string> model, fields.String("model"));
  request.model = model.value_or("");
  const Json* tokens = fields.Find("tokens");
  if (tokens == nullptr) return InvalidArgument("'tokens' is required: an array of token ids");
  if (!tokens->is_array()) return internal::MustBe("tokens", "an array of token ids", *tokens);
  request.tokens.reserve(tokens->size());
  for (size_t i = 0; i < tokens->size(); ++i) {
    const std::optional<int64_t> id = internal::AsInteger((*tokens)[i]);
    if (!id || *id < 0 || *id > std::numeric_limits<int32_t>::max()) {
      return internal::MustBe("tokens[" + std::to_string(i) + "]", "a token id (an integer >= 0)",
                              (*tokens)[i]);
    }
    request.tokens.push_back(static_cast<uint32_t>(*id));
  }
  return request;
}

std::string RenderTokenize(std::span<const uint32_t> tokens, uint32_t max_model_len,
                           const std::vector<std::string>* token_strs) {
  Json out{{"count", tokens.size()},
           {"max_model_len", max_model_len},
           {"tokens", Json(std::vector<uint32_t>(tokens.begin(), tokens.end()))},
           {"token_strs", token_strs ? Json(*token_strs) : Json(nullptr)}};
  return Dump(out);
}

std::string RenderDetokenize(std::string_view text) { return Dump(Json{{"prompt", std::string(text)}}); }

}  // namespace bmad::http
