#include "tests/support/sse_completion.h"

#include <httplib.h>

namespace bmad::testing {

SseCompletion StreamCompletion(int port, const std::string& path, const nlohmann::json& body,
                               std::atomic<int>* events_seen, int disconnect_after,
                               int read_timeout_s) {
  SseCompletion out;
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(read_timeout_s, 0);
  std::string buffer;
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    buffer.append(data, n);
    for (size_t pos; (pos = buffer.find("\n\n")) != std::string::npos;) {
      const std::string event = buffer.substr(0, pos);
      buffer.erase(0, pos + 2);
      if (event.rfind("data: ", 0) != 0) continue;
      const std::string payload = event.substr(6);
      if (payload == "[DONE]") {
        out.done = true;
        continue;
      }
      nlohmann::json j = nlohmann::json::parse(payload, nullptr, false);
      if (j.is_discarded()) continue;
      ++out.events;
      if (events_seen) ++*events_seen;
      if (j.contains("error")) out.error = j.dump();
      if (j.contains("choices") && j["choices"].is_array() && !j["choices"].empty()) {
        const nlohmann::json& choice = j["choices"][0];
        const int64_t index = choice.value("index", int64_t{-1});
        if (choice.contains("text") && choice["text"].is_string()) {
          out.text += choice["text"].get<std::string>();
          out.texts[index] += choice["text"].get<std::string>();
        }
        if (choice.contains("delta") && choice["delta"].contains("content") &&
            choice["delta"]["content"].is_string()) {
          out.text += choice["delta"]["content"].get<std::string>();
          out.texts[index] += choice["delta"]["content"].get<std::string>();
        }
        if (choice.contains("delta") && choice["delta"].contains("reasoning")) {
          const nlohmann::json& delta = choice["delta"];
          out.reasonings[index] += delta["reasoning"].get<std::string>();
          out.reasoning_content_alike = out.reasoning_content_alike &&
                                        delta.contains("reasoning_content") &&
                                        delta["reasoning_content"] == delta["reasoning"];
        }
        if (choice.contains("delta") && choice["delta"].contains("tool_calls")) {
          // A call's first piece holds its id, type and name; later ones more of its arguments.
          std::vector<nlohmann::json>& calls = out.tool_calls[index];
          for (const nlohmann::json& piece : choice["delta"]["tool_calls"]) {
            const size_t call = piece["index"].get<size_t>();
            if (call == calls.size()) {
              calls.push_back(piece);
              calls.back().erase("index");
            } else if (call < calls.size()) {
              calls[call]["function"]["arguments"] = calls[call]["function"]["arguments"].get<std::string>() +
                                                     piece["function"]["arguments"].get<std::string>();
            } else {
              out.tool_calls_in_order = false;
            }
          }
        }
        if (choice.contains("delta") && choice["delta"].contains("role")) ++out.role_chunks[index];
        if (choice.contains("token_ids") && choice["token_ids"].is_array()) {
          for (const auto& id : choice["token_ids"]) out.token_ids[index].push_back(id.get<int64_t>());
        }
        for (const nlohmann::json* holder : {&choice, static_cast<const nlohmann::json*>(&j)}) {
          if (holder->contains("prompt_token_ids") && !(*holder)["prompt_token_ids"].is_null()) {
            out.prompt_token_ids[index].push_back((*holder)["prompt_token_ids"]);
          }
        }
        if (choice.contains("logprobs") && choice["logprobs"].is_object() &&
            choice["logprobs"].contains("text_offset")) {
          for (const auto& o : choice["logprobs"]["text_offset"]) out.text_offsets.push_back(o.get<int64_t>());
        }
        if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) {
          out.finish_reason = choice["finish_reason"];
          out.finish_reasons[index] = choice["finish_reason"];
        }
      }
      if (j.contains("usage") && j["usage"].is_object()) {
        if (j.contains("choices") && j["choices"].is_array() && !j["choices"].empty()) {
          out.usage_so_far[j["choices"][0].value("index", int64_t{-1})].push_back(j["usage"]);
        } else {
          out.completion_tokens = j["usage"]["completion_tokens"];
          out.usage = j["usage"];
          ++out.usage_chunks;
        }
      }
      if (disconnect_after > 0 && out.events >= disconnect_after) return false;
    }
    return true;
  };
  httplib::Response res;
  httplib::Error err;
  c.send(req, res, err);
  return out;
}

}  // namespace bmad::testing
