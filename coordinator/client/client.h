// A client of the coordinator's client endpoint: a ZeroMQ DEALER speaking the protocol in
// common/proto (Submit → Accepted → TokenChunk… with a finish reason; StatusQuery →
// ClusterStatus; Cancel).
//
// Every wait is bounded: Generate's timeout is a *silence* bound (the longest the coordinator
// may stay quiet about the request), QueryStatus's is a total bound. Whatever the coordinator
// sends — garbage, answers for other requests, chunks out of order, an endless stream — ends as
// a Status, never as a crash or a hang.
//
// Thread-safety: one Client is used by one thread at a time, and runs one Generate at a time
// (concurrent requests need one Client each). Messages left over from an earlier call that
// timed out (late chunks, a late ClusterStatus) are recognised by their request ids and
// dropped; only a late ClusterStatus cannot be told apart from a fresh one.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/proto/messages.h"
#include "common/status.h"

namespace bmad::client {

struct GenerateResult {
  std::string client_request_id;   // the Submit's, or the one Generate made up
  uint64_t request_id = 0;         // the coordinator's id (0 if it never sent Accepted)
  uint32_t prompt_tokens = 0;      // from Accepted
  std::vector<uint32_t> token_ids;
  std::string text;
  std::vector<float> logprobs;
  std::vector<uint32_t> top_token_ids;  // with sampling.top_logprobs: each token's alternatives
  std::vector<float> top_logprobs;
  proto::FinishReason finish_reason = proto::FinishReason::kNone;
  proto::Usage usage;              // from the last chunk
  uint32_t chunks = 0;
  uint32_t ignored_frames = 0;     // undecodable frames and messages for other requests
  double first_token_s = -1;       // Submit sent → first chunk with tokens or text; -1: none
  double total_s = 0;              // Submit sent → last chunk
};

// Called with each chunk of the request, in sequence order, the last one included.
using ChunkCallback = std::function<void(const proto::TokenChunk& chunk)>;

class Client {
 public:
  // Connects a DEALER to `endpoint` ("tcp://host:port", "ipc://path"; a bare "host:port" means
  // tcp). ZeroMQ connects in the background, so an endpoint nobody listens on is only noticed
  // by the first call (kUnavailable). kInvalidArgument for an endpoint ZeroMQ cannot parse.
  static Result<std::unique_ptr<Client>> Connect(const std::string& endpoint);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Sends `submit` (with a made-up client_request_id when it has none) and collects the
  // answer, calling `on_chunk` (may be empty) as chunks arrive. Returns when a chunk carries a
  // finish reason. Errors:
  //   the coordinator's Error for this request   its code and message (kResourceExhausted is
  //                                              "overloaded"; retry_after_ms is in the text)
  //   a chunk finishing with reason "error" and  kInternal
  //   no Error message
  //   no message about the request for `timeout` kDeadlineExceeded (a Cancel is sent)
  //   `*cancel` became true                      kCancelled (a Cancel is sent)
  //   chunks out of sequence, token offsets that kDataLoss (a Cancel is sent)
  //   skip, more tokens than max_tokens
  //   no connection within min(timeout, 5 s)     kUnavailable
  // Undecodable frames and messages about other requests are skipped (counted in
  // ignored_frames; the timeout message says how many when nothing useful came).
  Result<GenerateResult> Generate(const proto::Submit& submit, const ChunkCallback& on_chunk,
                                  std::chrono::milliseconds timeout,
                                  const std::atomic<bool>* cancel = nullptr);

  // Asks the coordinator to stop a request (by its id when non-zero, else by the client id).
  // Only the send can fail (kUnavailable); the coordinator does not acknowledge.
  Status Cancel(const std::string& client_request_id, uint64_t request_id = 0);

  // StatusQuery → ClusterStatus within `timeout` (total). An Error answer comes back as its
  // Status; silence as kDeadlineExceeded. (Named QueryStatus, not Status, so that the name
  // `Status` keeps meaning bmad::Status inside this class.)
  Result<proto::ClusterStatus> QueryStatus(std::chrono::milliseconds timeout);

  const std::string& endpoint() const;

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace bmad::client
