#include "tests/support/cluster_http.h"

#include <gtest/gtest.h>
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

nlohmann::json ParsedOk(const HttpResult& r) {
  EXPECT_EQ(r.status, 200) << r.body;
  return r.status == 200 ? nlohmann::json::parse(r.body) : nlohmann::json::object();
}

CompletionAnswer Answer(int port, const nlohmann::json& body) {
  if (body.value("stream", false)) {
    StreamResult s = Stream(port, body);
    EXPECT_TRUE(s.done) << s.error;
    return {s.text, s.finish_reason};
  }
  HttpResult r = Post(port, "/v1/completions", body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  if (r.status != 200) return {};
  const nlohmann::json answer = nlohmann::json::parse(r.body);
  return {answer["choices"][0]["text"], answer["choices"][0]["finish_reason"]};
}

nlohmann::json Completion(const std::string& prompt, int max_tokens, bool stream, bool ignore_eos) {
  nlohmann::json b = {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"stream", stream}};
  if (ignore_eos) b["ignore_eos"] = true;
  if (stream) b["stream_options"] = {{"include_usage", true}};
  return b;
}

}  // namespace bmad::testing
