// A stand-in for the coordinator's client endpoint: a ROUTER on 127.0.0.1 (a free port) served
// by a helper thread that records every message and lets the test script the answers.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "common/proto/messages.h"

namespace bmad::client::testing {

class FakeCoordinator {
 public:
  // Called on the helper thread for each decoded message; answers with Send/SendRaw.
  using Handler = std::function<void(FakeCoordinator& fake, const std::string& peer,
                                     const proto::Message& message)>;

  explicit FakeCoordinator(Handler handler);
  ~FakeCoordinator();  // stops the thread (which also stops by itself after 60 s)

  const std::string& endpoint() const { return endpoint_; }

  // Only from the handler (the socket belongs to the helper thread).
  void Send(const std::string& peer, const proto::Message& message);
  void SendRaw(const std::string& peer, const std::vector<std::string>& frames);

  std::vector<proto::Message> Received() const;
  // True once a received message satisfies `match`; waits at most `timeout`.
  bool WaitFor(const std::function<bool(const proto::Message&)>& match,
               std::chrono::milliseconds timeout) const;

 private:
  void Loop();

  Handler handler_;
  zmq::context_t context_{1};
  zmq::socket_t router_{context_, zmq::socket_type::router};
  std::string endpoint_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::vector<proto::Message> received_;
  std::thread thread_;
};

// A TokenChunk for `submit` with the given sequence number, token offset, ids and text.
proto::TokenChunk ChunkFor(const proto::Submit& submit, uint64_t request_id, uint32_t sequence,
                           uint32_t token_offset, std::vector<uint32_t> ids, std::string text,
                           proto::FinishReason finish = proto::FinishReason::kNone);

}  // namespace bmad::client::testing
