#include "tests/coordinator/server/fake_replica.h"

#include "common/proto/frames.h"

namespace bmad::coord {

FakeReplica::FakeReplica(zmq::context_t& context, const std::string& worker_endpoint, std::string replica_id,
                         uint64_t incarnation)
    : replica_id_(std::move(replica_id)),
      incarnation_(incarnation),
      socket_(std::make_unique<zmq::socket_t>(context, zmq::socket_type::dealer)) {
  socket_->set(zmq::sockopt::linger, 0);
  socket_->set(zmq::sockopt::routing_id, replica_id_ + "/fake" + std::to_string(incarnation_));
  socket_->connect(worker_endpoint);
}

bool FakeReplica::Register(uint32_t context_length, ReplicaPool pool, const std::string& model_name) {
  proto::ReplicaInfo info;
  info.replica_id = replica_id_;
  info.pool = pool;
  info.kv_blocks = 64;
  info.block_size = 16;
  info.max_seqs = 8;
  info.model_name = model_name;
  info.context_length = context_length;
  Send(proto::Register{info, incarnation_});
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < give_up) {
    const size_t before = received_.size();
    Receive(std::chrono::milliseconds(100));
    for (size_t i = before; i < received_.size(); ++i) {
      if (const auto* ack = std::get_if<proto::RegisterAck>(&received_[i])) return ack->accepted;
      if (std::holds_alternative<proto::ErrorMessage>(received_[i])) return false;
    }
  }
  return false;
}

void FakeReplica::Receive(std::chrono::milliseconds wait) {
  if (!socket_) return;
  socket_->set(zmq::sockopt::rcvtimeo, static_cast<int>(wait.count()));
  while (auto in = proto::ReceiveMessage(*socket_, /*routed=*/false)) {
    if (in->message.ok()) received_.push_back(std::move(*in->message));
    socket_->set(zmq::sockopt::rcvtimeo, 0);
  }
}

std::vector<uint64_t> FakeReplica::Assigned() const {
  std::vector<uint64_t> ids;
  for (const proto::Message& m : received_) {
    if (const auto* a = std::get_if<proto::Assign>(&m)) ids.push_back(a->request_id);
  }
  return ids;
}

void FakeReplica::Send(const proto::Message& message) {
  if (socket_) (void)proto::SendMessage(*socket_, message);
}

void FakeReplica::Vanish() { socket_.reset(); }

}  // namespace bmad::coord
