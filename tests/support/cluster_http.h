// Requests a test sends to a local cluster's HTTP API: a POST and its answer, a streamed
// completion, and the body of a greedy completion.
#pragma once

#include <atomic>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/support/sse_completion.h"

namespace bmad::testing {

struct HttpResult {
  int status = 0;  // 0: no answer within 60 s
  std::string body;
};

// POSTs `body` (JSON) to 127.0.0.1:port/path.
HttpResult Post(int port, const std::string& path, const std::string& body);

// The body of a 200 answer, parsed; a test failure (and an empty object) for any other.
nlohmann::json ParsedOk(const HttpResult& r);

using StreamResult = SseCompletion;

// A streamed /v1/completions request (see StreamCompletion).
StreamResult Stream(int port, const nlohmann::json& body, std::atomic<int>* events_seen = nullptr,
                    int stop_after_events = -1);

// A /v1/completions body's text and finish reason, streamed when the body says so; a failure
// is a test failure (and an empty answer).
struct CompletionAnswer {
  std::string text;
  std::string finish;
};
CompletionAnswer Answer(int port, const nlohmann::json& body);

// {"prompt", "max_tokens", "temperature": 0, "stream"}, with "ignore_eos" when asked and, when
// streaming, stream_options.include_usage.
nlohmann::json Completion(const std::string& prompt, int max_tokens, bool stream, bool ignore_eos = false);

}  // namespace bmad::testing
