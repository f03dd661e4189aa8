// A replica as the coordinator sees one, without a model: a ZeroMQ DEALER on the worker
// endpoint that registers and records what it is sent. Tests make it answer, or vanish.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "common/proto/messages.h"

namespace bmad::coord {

class FakeReplica {
 public:
  // `incarnation` tells processes under one replica id apart (and names the connection).
  FakeReplica(zmq::context_t& context, const std::string& worker_endpoint, std::string replica_id,
              uint64_t incarnation = 1);

  // Registers (64 blocks of 16, 8 sequences, the given context length, pool and model name) and
  // waits for the answer: true when accepted within 10 s; false when refused, or answered with an
  // error (received() has it).
  bool Register(uint32_t context_length = 512, ReplicaPool pool = ReplicaPool::kNormal,
                const std::string& model_name = "stories260K");
  // Reads what has arrived, waiting up to `wait` for the first message; keeps it all in received().
  void Receive(std::chrono::milliseconds wait);
  // The ids of the requests assigned to it so far.
  std::vector<uint64_t> Assigned() const;
  void Send(const proto::Message& message);
  // The process is gone: the connection closes without a word.
  void Vanish();

  const std::vector<proto::Message>& received() const { return received_; }

 private:
  std::string replica_id_;
  uint64_t incarnation_;
  std::unique_ptr<zmq::socket_t> socket_;
  std::vector<proto::Message> received_;
};

}  // namespace bmad::coord
