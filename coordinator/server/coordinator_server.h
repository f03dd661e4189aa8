// bmad-coordinator: takes requests on a ZeroMQ socket (Cap'n Proto protocol) and an
// OpenAI-compatible HTTP API, tokenizes them, routes each to a live worker replica, streams the
// replica's token chunks back, and moves a dead replica's requests to another one.
//
// One event-loop thread owns all state (request table, replica registry, router, both sockets);
// HTTP handler threads talk to it through an inbox and a per-request stream.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "common/config/config.h"
#include "common/status.h"

namespace bmad::coord {

struct CoordinatorRunOptions {
  int64_t max_run_ms = 0;  // stop by itself after this long (tests); 0: run until told
  // Socket-door text prompts longer than this are tokenized on a thread of their own
  // (TokenizerThread), off the event loop; shorter ones inline, where they take microseconds.
  size_t tokenize_inline_max_bytes = 4096;
  // Tests: called on the tokenizer thread before each prompt it tokenizes.
  std::function<void()> before_tokenize;
  // /health and /ready answer 503 once the event loop has not turned for this long (a wedged
  // coordinator is restarted by its liveness probe and leaves its Service; nothing else would
  // report it). Rounds take milliseconds.
  int64_t loop_stall_limit_ms = 10'000;
  // Tests: called on the event loop once per round.
  std::function<void()> on_loop_round;
};

class CoordinatorServer {
 public:
  class Core;  // the event loop and its state (coordinator_core.h; internal)

  // Loads the vocabulary, binds the sockets and the HTTP port. Errors name what failed (model
  // file, an endpoint or port in use).
  static Result<std::unique_ptr<CoordinatorServer>> Create(const ServerConfig& config,
                                                           const CoordinatorRunOptions& options);
  ~CoordinatorServer();

  // Runs until RequestStop() (then drains: refuses new requests, lets running ones finish for
  // up to a few seconds) or max_run_ms.
  Status Run();
  void RequestStop();  // thread- and signal-safe

  int http_port() const;
  int metrics_port() const;
  std::string client_endpoint() const;  // as bound (a tcp://...:* endpoint resolved)
  std::string worker_endpoint() const;

 private:
  explicit CoordinatorServer(std::unique_ptr<Core> core);
  std::unique_ptr<Core> core_;
};

}  // namespace bmad::coord
