#include "tests/coordinator/client/fake_openai_server.h"

#include <chrono>

#include <nlohmann/json.hpp>

namespace bmad::client::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// A stream never lasts longer than this, whatever the client does.
constexpr auto kMaxStream = 10s;

std::string Event(const json& j) { return "data: " + j.dump() + "\n\n"; }

json ContentEvent(bool chat, const std::string& text) {
  if (chat) return {{"choices", json::array({{{"index", 0}, {"delta", {{"content", text}}}}})}};
  return {{"choices", json::array({{{"index", 0}, {"text", text}, {"finish_reason", nullptr}}})}};
}

json FinishEvent(bool chat) {
  if (chat) return {{"choices", json::array({{{"index", 0}, {"delta", json::object()}, {"finish_reason", "length"}}})}};
  return {{"choices", json::array({{{"index", 0}, {"text", ""}, {"finish_reason", "length"}}})}};
}

json UsageEvent(int64_t prompt, int64_t completion) {
  return {{"choices", json::array()},
          {"usage", {{"prompt_tokens", prompt}, {"completion_tokens", completion}}}};
}

}  // namespace

FakeOpenAiServer::FakeOpenAiServer() {
  server_.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"object":"list","data":[{"id":"steady"},{"id":"no-usage"}]})",
                    "application/json");
  });
  server_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    Handle(req, res, /*chat=*/false);
  });
  server_.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    Handle(req, res, /*chat=*/true);
  });
  port_ = server_.bind_to_any_port("127.0.0.1");
  thread_ = std::thread([this] { server_.listen_after_bind(); });
}

FakeOpenAiServer::~FakeOpenAiServer() {
  stopping_.store(true);
  server_.stop();
  thread_.join();
}

std::vector<std::string> FakeOpenAiServer::bodies() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bodies_;
}

void FakeOpenAiServer::Handle(const httplib::Request& req, httplib::Response& res, bool chat) {
  const int n = ++requests_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    bodies_.push_back(req.body);
  }
  const json body = json::parse(req.body, nullptr, false);
  if (!body.is_object()) {
    res.status = 400;
    res.set_content(R"({"error":{"message":"bad json"}})", "application/json");
    return;
  }
  const std::string model = body.value("model", "");
  const int64_t max_tokens = body.value("max_tokens", int64_t{1});
  const int64_t prompt = chat ? 0 : static_cast<int64_t>(body.value("prompt", json::array()).size());
  if (model == "every-3rd-429" && n % 3 == 0) {
    res.status = 429;
    res.set_content(R"({"error":{"message":"rate limited","type":"overloaded"}})", "application/json");
    return;
  }
  const bool broken = model == "malformed" && n % 4 == 0;
  res.set_chunked_content_provider(
      "text/event-stream", [this, chat, model, max_tokens, prompt, broken](size_t, httplib::DataSink& sink) {
        auto write = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
        const auto start = std::chrono::steady_clock::now();
        if (model == "hang") {
          while (!stopping_.load() && std::chrono::steady_clock::now() - start < kMaxStream) {
            if (!write(": waiting\n\n")) return false;
            std::this_thread::sleep_for(10ms);
          }
          return false;
        }
        if (model == "error-event") {
          write(Event({{"error", {{"message", "model crashed"}}}}));
          sink.done();
          return true;
        }
        if (model == "error-field") {
          write("error: {\"code\":500,\"message\":\"slot failed\",\"type\":\"server_error\"}\n\n");
          sink.done();
          return true;
        }
        std::this_thread::sleep_for(40ms);
        const int64_t events =
            model == "usage-more" || model == "stops-early" || model == "bunched" ? 2 : max_tokens;
        for (int64_t i = 0; i < events && !stopping_.load(); ++i) {
          if (i) std::this_thread::sleep_for(10ms);
          std::string text = "t";  // (not "t" + ...: g++ 12 warns falsely, -Wrestrict)
          text += std::to_string(i);
          if (!write(Event(ContentEvent(chat, text)))) return false;
          if (broken && i == 0) write("data: {\"choices\": [\n\n");
        }
        if (model == "truncated") {
          sink.done();
          return true;
        }
        write(Event(FinishEvent(chat)));
        if (model == "usage-more") write(Event(UsageEvent(prompt, max_tokens + 5)));
        else if (model == "stops-early") write(Event(UsageEvent(prompt, 2)));
        else if (model != "no-usage" && model != "bunched") write(Event(UsageEvent(prompt, max_tokens)));
        write("data: [DONE]\n\n");
        sink.done();
        return true;
      });
}

}  // namespace bmad::client::testing
