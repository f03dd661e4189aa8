#include "coordinator/client/openai_wire.h"

#include <nlohmann/json.hpp>

namespace bmad::client {
namespace {

using nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r' || s.front() == '\n')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

std::string Excerpt(std::string_view s, size_t max_bytes) {
  s = Trim(s);
  s = s.substr(0, s.find('\n'));
  if (s.size() <= max_bytes) return std::string(s);
  return std::string(s.substr(0, max_bytes)) + "...";
}

// Parses without exceptions: hostile bodies are ordinary input here.
json ParseJson(std::string_view text) { return json::parse(text, nullptr, /*allow_exceptions=*/false); }

const json* Member(const json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

std::string StringMember(const json& object, const char* key) {
  const json* v = Member(object, key);
  return v && v->is_string() ? v->get<std::string>() : std::string();
}

int64_t CountMember(const json& object, const char* key) {
  const json* v = Member(object, key);
  if (!v || !v->is_number_integer()) return 0;
  const int64_t n = v->get<int64_t>();
  return n > 0 ? n : 0;
}

// The message of an error object in any of the shapes servers use: {"error": {"message"}},
// {"error": "text"}, vLLM's {"object": "error", "message"}, FastAPI's {"detail"}.
std::string ErrorMessageOf(const json& j) {
  // "error": null (or false, "", {}) says there is none, as the OpenAI SDK reads it.
  if (const json* e = Member(j, "error"); e && !e->is_null() && *e != false && *e != "" && *e != json::object()) {
    if (e->is_string()) return e->get<std::string>();
    std::string m = StringMember(*e, "message");
    return m.empty() ? Dump(*e) : m;
  }
  if (StringMember(j, "object") == "error") return StringMember(j, "message");
  if (const json* d = Member(j, "detail")) return d->is_string() ? d->get<std::string>() : Dump(*d);
  return {};
}

}  // namespace

std::string_view ApiPath(OpenAiApi api) {
  return api == OpenAiApi::kChat ? "/v1/chat/completions" : "/v1/completions";
}

std::string CompletionsRequestBody(const std::string& model, const std::vector<uint32_t>& prompt,
                                   int64_t max_tokens) {
  return Dump({{"model", model},
               {"prompt", prompt},
               {"max_tokens", max_tokens},
               {"temperature", 0},
               {"ignore_eos", true},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}});
}

std::string ChatRequestBody(const std::string& model, const std::string& prompt,
                            int64_t max_tokens) {
  return Dump({{"model", model},
               {"messages", json::array({{{"role", "user"}, {"content", prompt}}})},
               {"max_tokens", max_tokens},
               {"temperature", 0},
               {"ignore_eos", true},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}});
}

Result<StreamDelta> ParseStreamData(std::string_view data) {
  data = Trim(data);
  StreamDelta delta;
  if (data == "[DONE]") {
    delta.done = true;
    return delta;
  }
  const json j = ParseJson(data);
  if (!j.is_object()) return DataLoss("malformed stream event '" + Excerpt(data, 80) + "'");
  if (std::string error = ErrorMessageOf(j); !error.empty()) return Internal(error);
  if (const json* choices = Member(j, "choices"); choices && choices->is_array()) {
    for (const json& choice : *choices) {
      delta.content += StringMember(choice, "text");
      if (const json* d = Member(choice, "delta")) {
        delta.content += StringMember(*d, "content");
        // Reasoning models stream their thinking separately; it is generated text all the same.
        delta.content += StringMember(*d, "reasoning_content");
        delta.content += StringMember(*d, "reasoning");
      }
      if (std::string reason = StringMember(choice, "finish_reason"); !reason.empty()) {
        delta.finish_reason = std::move(reason);
      }
    }
  }
  if (const json* usage = Member(j, "usage"); usage && usage->is_object()) {
    delta.has_usage = true;
    delta.prompt_tokens = CountMember(*usage, "prompt_tokens");
    delta.completion_tokens = CountMember(*usage, "completion_tokens");
  }
  return delta;
}

Result<std::string> FirstModelId(std::string_view body) {
  const json j = ParseJson(body);
  const json* data = Member(j, "data");
  if (!data || !data->is_array()) {
    return DataLoss("the model list is not an OpenAI list: '" + Excerpt(body, 80) + "'");
  }
  if (data->empty()) return NotFound("the server lists no models");
  std::string id = StringMember(data->front(), "id");
  if (id.empty()) return DataLoss("the first model in the list has no id");
  return id;
}

std::string ErrorBodyMessage(std::string_view body) {
  const json j = ParseJson(body);
  if (std::string m = ErrorMessageOf(j); !m.empty()) return Excerpt(m, 200);
  // llama.cpp's server: {"code": 500, "message": "...", "type": "server_error"}.
  if (std::string m = StringMember(j, "message"); !m.empty()) return Excerpt(m, 200);
  std::string line = Excerpt(body, 200);
  return line.empty() ? "(empty body)" : line;
}

}  // namespace bmad::client
