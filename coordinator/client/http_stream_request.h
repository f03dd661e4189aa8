// One streaming request to an OpenAI-compatible server, timed the way serving benchmarks time
// it: time to the first content-bearing event, the gaps between content-bearing events, and the
// whole request; tokens counted by the server's usage report when it sends one, else by events.
// Every failure (no connection, an HTTP error status, an error event, a malformed or truncated
// stream, the deadline) ends up in the outcome, never as an exception or a hang.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "coordinator/client/request_watchdog.h"

namespace bmad::client {

// Where the server is: "http://host:port" plus an optional base path. A trailing "/v1" in the
// URL is accepted and dropped, since request paths start with "/v1/".
struct HttpTarget {
  std::string scheme_host_port;  // "http://127.0.0.1:8000"
  std::string base_path;         // "" or "/some/prefix" (no trailing slash)

  // kInvalidArgument for anything but http:// or https:// with a host.
  static Result<HttpTarget> Parse(const std::string& url);
};

struct StreamRequest {
  std::string path;       // e.g. "/v1/completions" (the base path is prepended)
  std::string body;       // JSON
  std::string api_key;    // sent as a bearer token when not empty
  double timeout_s = 60;  // the whole request, connect to last byte
};

struct StreamOutcome {
  bool ok = false;
  int http_status = 0;          // 0: no HTTP answer (no connection, timed out before headers)
  std::string error;            // why it failed, e.g. "HTTP 429: rate limited"
  double ttft_s = -1;           // start → first content-bearing event; -1: none came
  double e2e_s = 0;             // start → end of the stream
  std::vector<double> itl_s;    // gaps between consecutive content-bearing events
  int64_t content_events = 0;
  int64_t output_tokens = 0;    // usage.completion_tokens when reported, else content_events
  int64_t prompt_tokens = 0;    // usage.prompt_tokens (0 when not reported)
  bool usage_reported = false;
};

// Sends the request and reads the stream to its end. `watchdog` (may be null) enforces the
// deadline when httplib's per-read timeouts alone would not.
StreamOutcome RunStreamRequest(const HttpTarget& target, const StreamRequest& request,
                               RequestWatchdog* watchdog);

// GET {base}/v1/models and the first model id (the default model of servers that serve one).
Result<std::string> FetchFirstModelId(const HttpTarget& target, const std::string& api_key,
                                      double timeout_s);

}  // namespace bmad::client
