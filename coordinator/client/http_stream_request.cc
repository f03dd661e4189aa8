#include "coordinator/client/http_stream_request.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include <httplib.h>

#include "coordinator/client/openai_wire.h"
#include "coordinator/client/sse_parser.h"

namespace bmad::client {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxErrorBodyBytes = 64u << 10;   // enough for any real error message
constexpr size_t kMaxModelListBytes = 4u << 20;
// Also how long the watchdog may block on a request that is still connecting (httplib's
// stop() waits for a connect in progress).
constexpr double kMaxConnectTimeoutS = 10;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

Clock::time_point DeadlineAfter(Clock::time_point start, double seconds) {
  return start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

void SetTimeouts(httplib::Client& client, double timeout_s) {
  auto split = [](double s, auto set) {
    const auto us = static_cast<int64_t>(s * 1e6);
    set(static_cast<time_t>(us / 1000000), static_cast<time_t>(us % 1000000));
  };
  split(std::min(timeout_s, kMaxConnectTimeoutS),
        [&](time_t s, time_t us) { client.set_connection_timeout(s, us); });
  split(timeout_s, [&](time_t s, time_t us) { client.set_read_timeout(s, us); });
  split(timeout_s, [&](time_t s, time_t us) { client.set_write_timeout(s, us); });
}

httplib::Headers RequestHeaders(const std::string& api_key) {
  httplib::Headers headers = {{"Accept", "text/event-stream"}};
  if (!api_key.empty()) headers.emplace("Authorization", "Bearer " + api_key);
  return headers;
}

// httplib's error names ("Connection", "Read") say little on their own.
std::string TransportError(httplib::Error error) {
  switch (error) {
    case httplib::Error::Connection: return "cannot connect (refused or unreachable)";
    case httplib::Error::Read: return "reading the response failed (the connection closed)";
    case httplib::Error::Write: return "sending the request failed (the connection closed)";
    case httplib::Error::ConnectionTimeout: return "timed out connecting";
    default: return httplib::to_string(error);
  }
}

std::string FormatSeconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g s", s);
  return buf;
}

// The stream as seen so far: timings, token counts, and whether it ended properly.
struct StreamState {
  Clock::time_point start;
  Clock::time_point last_content;
  bool saw_done = false;
  bool saw_finish = false;
  std::string error;  // the first malformed or error event

  void OnEvent(const SseEvent& event, StreamOutcome* out) {
    if (!error.empty()) return;
    if (event.type == "error") {
      error = "error event: " + ErrorBodyMessage(event.data);
      return;
    }
    Result<StreamDelta> delta = ParseStreamData(event.data);
    if (!delta.ok()) {
      error = delta.status().code() == StatusCode::kDataLoss
                  ? delta.status().message()
                  : "error event: " + delta.status().message();
      return;
    }
    if (delta->done) saw_done = true;
    if (!delta->finish_reason.empty()) saw_finish = true;
    if (delta->has_usage) {
      out->usage_reported = true;
      out->prompt_tokens = delta->prompt_tokens;
      out->output_tokens = delta->completion_tokens;
    }
    if (delta->content.empty()) return;
    const Clock::time_point now = Clock::now();
    if (out->content_events == 0) {
      out->ttft_s = Seconds(now - start);
    } else {
      out->itl_s.push_back(Seconds(now - last_content));
    }
    last_content = now;
    ++out->content_events;
  }
};

}  // namespace

Result<HttpTarget> HttpTarget::Parse(const std::string& url) {
  const size_t scheme_end = url.find("://");
  const std::string scheme = scheme_end == std::string::npos ? "" : url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") {
    return InvalidArgument("--url must start with http:// or https://, got '" + url + "'");
  }
  const size_t host_start = scheme_end + 3;
  const size_t path_start = std::min(url.find_first_of("/?#", host_start), url.size());
  HttpTarget t;
  t.scheme_host_port = url.substr(0, path_start);
  if (path_start == host_start || url[host_start] == ':') {
    return InvalidArgument("--url has no host: '" + url + "'");
  }
  // host, [v6 host] or either with :port (digits, 1 to 65535).
  const std::string authority = url.substr(host_start, path_start - host_start);
  const size_t v6_end = authority.starts_with('[') ? authority.find(']') : 0;
  if (v6_end == std::string::npos || authority.find_first_of(" \t@") != std::string::npos) {
    return InvalidArgument("--url has a malformed host: '" + url + "'");
  }
  if (const size_t colon = authority.find(':', v6_end); colon != std::string::npos) {
    const std::string port = authority.substr(colon + 1);
    const bool digits = !port.empty() && port.size() <= 5 &&
                        port.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || std::stoi(port) < 1 || std::stoi(port) > 65535) {
      return InvalidArgument("--url has a bad port '" + port + "' (1 to 65535): '" + url + "'");
    }
  } else if (v6_end != 0 && v6_end + 1 != authority.size()) {
    return InvalidArgument("--url has a malformed host: '" + url + "'");
  }
  t.base_path = url.substr(path_start);
  while (!t.base_path.empty() && t.base_path.back() == '/') t.base_path.pop_back();
  if (t.base_path.ends_with("/v1")) t.base_path.resize(t.base_path.size() - 3);
  if (t.base_path.find_first_of("?# ") != std::string::npos) {
    return InvalidArgument("--url must be a base address without query or fragment, got '" +
                           url + "'");
  }
  return t;
}

StreamOutcome RunStreamRequest(const HttpTarget& target, const StreamRequest& request,
                               RequestWatchdog* watchdog) {
  StreamOutcome out;
  StreamState state;
  state.start = Clock::now();
  const Clock::time_point deadline = DeadlineAfter(state.start, request.timeout_s);
  httplib::Client client(target.scheme_host_port);
  if (!client.is_valid()) {
    out.error = "invalid server address " + target.scheme_host_port;
    return out;
  }
  SetTimeouts(client, request.timeout_s);
  client.set_keep_alive(false);

  std::string error_body;
  SseParser parser([&](const SseEvent& event) { state.OnEvent(event, &out); });
  httplib::Request req;
  req.method = "POST";
  req.path = target.base_path + request.path;
  req.headers = RequestHeaders(request.api_key);
  req.headers.emplace("Content-Type", "application/json");
  req.body = request.body;
  req.response_handler = [&](const httplib::Response& response) {
    out.http_status = response.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    if (Clock::now() >= deadline) return false;
    if (out.http_status != 200) {
      error_body.append(data, std::min(size, kMaxErrorBodyBytes - error_body.size()));
      return error_body.size() < kMaxErrorBodyBytes;
    }
    if (Status s = parser.Feed(std::string_view(data, size)); !s.ok() && state.error.empty()) {
      state.error = s.message();
    }
    return state.error.empty();
  };
  httplib::Error transport_error = httplib::Error::Success;
  {
    WatchdogRegistration registration(watchdog, deadline, [&client] { client.stop(); });
    transport_error = client.send(req).error();
  }
  const Clock::time_point end = Clock::now();
  out.e2e_s = Seconds(end - state.start);
  if (out.http_status == 200 && state.error.empty()) {
    if (Status s = parser.Finish(); !s.ok()) state.error = s.message();
  }
  if (!out.usage_reported) out.output_tokens = out.content_events;

  if (out.http_status != 0 && out.http_status != 200) {
    out.error = "HTTP " + std::to_string(out.http_status) + ": " + ErrorBodyMessage(error_body);
  } else if (!state.error.empty()) {
    out.error = "malformed stream: " + state.error;
    if (state.error.starts_with("error event: ")) out.error = state.error;
  } else if (state.saw_done || state.saw_finish) {
    out.ok = true;  // a transport error after the end of the stream does not matter
  } else if (end >= deadline) {
    out.error = "timed out after " + FormatSeconds(request.timeout_s);
  } else if (out.http_status == 0) {
    out.error = "no response: " + TransportError(transport_error);
  } else if (transport_error != httplib::Error::Success) {
    out.error = "stream broken: " + TransportError(transport_error);
  } else {
    out.error = "the stream ended without a finish reason or [DONE]";
  }
  return out;
}

Result<std::string> FetchFirstModelId(const HttpTarget& target, const std::string& api_key,
                                      double timeout_s) {
  httplib::Client client(target.scheme_host_port);
  if (!client.is_valid()) return InvalidArgument("invalid server address " + target.scheme_host_port);
  SetTimeouts(client, timeout_s);
  const Clock::time_point deadline = DeadlineAfter(Clock::now(), timeout_s);
  const std::string path = target.base_path + "/v1/models";
  std::string body;
  httplib::Result res = client.Get(path, RequestHeaders(api_key), [&](const char* data, size_t size) {
    body.append(data, std::min(size, kMaxModelListBytes - body.size()));
    return body.size() < kMaxModelListBytes && Clock::now() < deadline;
  });
  const std::string where = "GET " + target.scheme_host_port + path;
  if (!res) return Unavailable(where + ": " + TransportError(res.error()));
  if (res->status != 200) {
    return Unavailable(where + ": HTTP " + std::to_string(res->status) + ": " + ErrorBodyMessage(body));
  }
  return FirstModelId(body);
}

}  // namespace bmad::client
