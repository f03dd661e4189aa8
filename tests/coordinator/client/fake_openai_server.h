// A stand-in OpenAI-compatible server for `bench http` tests: httplib on 127.0.0.1 (a free
// port) streaming SSE with known timing. The request's "model" picks the behaviour:
//   "steady"        first content after 40 ms, then one content event per max_tokens every
//                   10 ms, a finish event, usage (prompt = the prompt's length), [DONE]
//   "no-usage"      like steady without usage
//   "usage-more"    two content events, but usage reports max_tokens + 5 tokens
//   "stops-early"   two content events and usage of 2 tokens, whatever max_tokens (an end token
//                   honoured in spite of ignore_eos)
//   "bunched"       two content events and no usage (a server sending several tokens an event)
//   "every-3rd-429" steady, but every third request of the run gets HTTP 429
//   "malformed"     steady, but every fourth request's stream carries a broken event
//   "truncated"     content events, then the stream ends with no finish and no [DONE]
//   "hang"          only keep-alive comments until the client goes away (bounded)
//   "error-event"   an {"error": ...} event in the stream
//   "error-field"   llama.cpp's way: an "error: {json}" line in the stream
// GET /v1/models lists "steady" first.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

namespace bmad::client::testing {

class FakeOpenAiServer {
 public:
  FakeOpenAiServer();
  ~FakeOpenAiServer();  // stops the server; streams in progress end within ~10 ms

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int requests() const { return requests_.load(); }
  std::vector<std::string> bodies() const;  // every POST body received, in arrival order

 private:
  void Handle(const httplib::Request& req, httplib::Response& res, bool chat);

  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> requests_{0};
  mutable std::mutex mu_;
  std::vector<std::string> bodies_;
};

}  // namespace bmad::client::testing
