#include "tests/coordinator/client/fake_coordinator.h"

#include "common/proto/frames.h"

namespace bmad::client::testing {
namespace {

// The helper thread ends by itself after this long, so a test that forgets it cannot hang.
constexpr std::chrono::seconds kMaxLifetime{60};

}  // namespace

FakeCoordinator::FakeCoordinator(Handler handler) : handler_(std::move(handler)) {
  router_.set(zmq::sockopt::linger, 0);
  router_.set(zmq::sockopt::rcvtimeo, 20);
  router_.bind("tcp://127.0.0.1:*");
  endpoint_ = router_.get(zmq::sockopt::last_endpoint);
  thread_ = std::thread([this] { Loop(); });
}

FakeCoordinator::~FakeCoordinator() {
  stop_.store(true);
  thread_.join();
}

void FakeCoordinator::Loop() {
  const auto end = std::chrono::steady_clock::now() + kMaxLifetime;
  while (!stop_.load() && std::chrono::steady_clock::now() < end) {
    auto in = proto::ReceiveMessage(router_, /*routed=*/true);
    if (!in || !in->message.ok()) continue;
    {
      std::lock_guard<std::mutex> lock(mu_);
      received_.push_back(*in->message);
    }
    if (handler_) handler_(*this, in->routing_id, *in->message);
  }
}

void FakeCoordinator::Send(const std::string& peer, const proto::Message& message) {
  (void)proto::SendMessage(router_, message, peer);
}

void FakeCoordinator::SendRaw(const std::string& peer, const std::vector<std::string>& frames) {
  router_.send(zmq::buffer(peer), zmq::send_flags::sndmore);
  for (size_t i = 0; i < frames.size(); ++i) {
    router_.send(zmq::buffer(frames[i]),
                 i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
}

std::vector<proto::Message> FakeCoordinator::Received() const {
  std::lock_guard<std::mutex> lock(mu_);
  return received_;
}

bool FakeCoordinator::WaitFor(const std::function<bool(const proto::Message&)>& match,
                              std::chrono::milliseconds timeout) const {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (true) {
    for (const proto::Message& m : Received()) {
      if (match(m)) return true;
    }
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

proto::TokenChunk ChunkFor(const proto::Submit& submit, uint64_t request_id, uint32_t sequence,
                           uint32_t token_offset, std::vector<uint32_t> ids, std::string text,
                           proto::FinishReason finish) {
  proto::TokenChunk c;
  c.request_id = request_id;
  c.client_request_id = submit.client_request_id;
  c.sequence = sequence;
  c.token_offset = token_offset;
  c.token_ids = std::move(ids);
  c.text = std::move(text);
  c.finish_reason = finish;
  return c;
}

}  // namespace bmad::client::testing
