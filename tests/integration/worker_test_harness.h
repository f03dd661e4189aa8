// The real bmad-worker process under test: a fake coordinator (a ZeroMQ ROUTER in the test,
// speaking the protocol), the worker's config, and helpers to start it and read what it sends.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "common/proto/frames.h"
#include "common/proto/messages.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"
#include "tests/support/synth_model.h"

namespace bmad::testing {

inline const std::vector<uint32_t> kPrompt = {1, 403, 407, 261, 378};  // "Once upon a time"
inline const std::vector<uint32_t> kGreedy32 = {432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426,
                                         338, 401, 396, 267, 337, 410, 408, 419, 292, 411, 322,
                                         265, 282, 295, 433, 426, 385, 328, 432, 358, 394};

class FakeCoordinator {
 public:
  FakeCoordinator() {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.set(zmq::sockopt::rcvtimeo, 100);
    socket_.set(zmq::sockopt::router_mandatory, 1);
    socket_.bind("tcp://127.0.0.1:*");
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
  }
  const std::string& endpoint() const { return endpoint_; }

  // Next message of type T within `timeout` (others are collected in `seen`).
  template <typename T>
  std::optional<T> Expect(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      auto in = proto::ReceiveMessage(socket_, true);
      if (!in || !in->message.ok()) continue;
      worker_id_ = in->routing_id;
      // Every heartbeat is recorded, the one asked for too: a wait on last_heartbeat_ must see
      // the newest (it only ever saw those that came while another type was awaited).
      if (auto* hb = std::get_if<proto::Heartbeat>(&*in->message)) last_heartbeat_ = *hb;
      if (auto* m = std::get_if<T>(&*in->message)) return *m;
    }
    return std::nullopt;
  }
  // The next message of any type within `timeout`.
  std::optional<proto::Message> Next(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      auto in = proto::ReceiveMessage(socket_, true);
      if (!in || !in->message.ok()) continue;
      worker_id_ = in->routing_id;
      return std::move(*in->message);
    }
    return std::nullopt;
  }
  void Send(const proto::Message& m) { ASSERT_TRUE(proto::SendMessage(socket_, m, worker_id_).ok()); }
  void SendRaw(const std::string& bytes) {
    socket_.send(zmq::buffer(worker_id_), zmq::send_flags::sndmore);
    socket_.send(zmq::buffer(bytes), zmq::send_flags::none);
  }
  // Token chunks of one request until it finishes (checks sequence numbers and offsets).
  // Offsets count the whole output, so a migrated request's start after its earlier tokens.
  std::vector<proto::TokenChunk> Collect(uint64_t request_id, uint32_t first_offset = 0) {
    std::vector<proto::TokenChunk> chunks;
    uint32_t offset = first_offset;
    while (auto c = Expect<proto::TokenChunk>()) {
      if (c->request_id != request_id) continue;
      EXPECT_EQ(c->sequence, chunks.size());
      EXPECT_EQ(c->token_offset, offset);
      offset += static_cast<uint32_t>(c->token_ids.size());
      chunks.push_back(*c);
      if (c->finish_reason != proto::FinishReason::kNone) break;
    }
    return chunks;
  }
  proto::Heartbeat last_heartbeat_;

 private:
  zmq::context_t context_;
  zmq::socket_t socket_{context_, zmq::socket_type::router};
  std::string endpoint_;
  std::string worker_id_;
};

inline std::string WriteConfig(const std::string& dir, const std::string& endpoint,
                        const std::string& model = SharedModelsDir() + "/stories260K.gguf") {
  const std::string path = dir + "/worker.yaml";
  std::ofstream f(path);
  f << "model:\n  path: " << model << "\n"
    << "coordinator:\n  worker_endpoint: " << endpoint << "\n"
    << "  client_endpoint: tcp://127.0.0.1:1\n"
    << "worker:\n  replica_id: test-replica\n  heartbeat_ms: 50\n  threads: 1\n"
    << "cache:\n  block_size: 16\n  num_blocks: 64\n"
    << "metrics:\n  worker_port: 0\n";
  return path;
}

inline std::string Text(const std::vector<proto::TokenChunk>& chunks) {
  std::string t;
  for (const auto& c : chunks) t += c.text;
  return t;
}

inline std::vector<uint32_t> Ids(const std::vector<proto::TokenChunk>& chunks) {
  std::vector<uint32_t> ids;
  for (const auto& c : chunks) ids.insert(ids.end(), c.token_ids.begin(), c.token_ids.end());
  return ids;
}

inline proto::Assign Greedy(uint64_t id, std::vector<uint32_t> prompt, uint32_t max_tokens) {
  proto::Assign a;
  a.request_id = id;
  a.prompt_tokens = std::move(prompt);
  a.sampling.temperature = 0;
  a.sampling.max_tokens = max_tokens;
  return a;
}

// Starts bmad-worker against `coord` (model and --set values as given) and returns its
// registration, or nullopt after a failed expectation.
inline std::optional<proto::Register> StartWorker(ChildProcess& worker, FakeCoordinator& coord,
                                           const std::string& model = SharedModelsDir() + "/stories260K.gguf",
                                           const std::vector<std::string>& sets = {}) {
  const std::string dir = MakeTempDir("bmad-worker-");
  std::vector<std::string> args = {BinaryPath("bmad-worker"), "--config", WriteConfig(dir, coord.endpoint(), model),
                                   "--max-run-ms", "120000"};
  for (const std::string& set : sets) {
    args.push_back("--set");
    args.push_back(set);
  }
  EXPECT_TRUE(worker.Start(args, dir + "/worker.log")) << worker.error();
  auto reg = coord.Expect<proto::Register>();
  EXPECT_TRUE(reg.has_value()) << worker.ReadLog();
  return reg;
}

// A model slow enough to take seconds over 1900 prompt tokens, and about ten milliseconds a token.
inline std::string SlowModel() {
  return SynthModel("slow.gguf", {"--layers", "8", "--dim", "512", "--heads", "8", "--ffn", "1536",
                                  "--vocab", "512", "--ctx", "2048", "--dtype", "f32"});
}

}  // namespace bmad::testing
