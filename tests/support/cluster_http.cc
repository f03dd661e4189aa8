#include "tests/support/cluster_http.h"

#include <httplib.h>

namespace bmad::testing {

HttpResult Post(int port, const std::string& path, const std::string& body) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60, 0);
  auto res = c.Post(path.c_str(), body, "application/json");
  if (!res) return {};
  return {res->status, res->body};
}

StreamResult Stream(int port, const nlohmann::json& body, std::atomic<int>* events_seen, int stop_after_events) {
  return StreamCompletion(port, "/v1/completions", body, events_seen, stop_after_events);
}

nlohmann::json Completion(const std::string& prompt, int max_tokens, bool stream, bool ignore_eos) {
  nlohmann::json b = {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"stream", stream}};
  if (ignore_eos) b["ignore_eos"] = true;
  if (stream) b["stream_options"] = {{"include_usage", true}};
  return b;
}

}  // namespace bmad::testing
