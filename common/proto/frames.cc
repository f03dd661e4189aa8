#include "common/proto/frames.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <vector>

#include <zmq_addon.hpp>

namespace bmad::proto {

zmq::message_t EncodeFrame(const Message& message) {
  const std::string bytes = Encode(message);
  return zmq::message_t(bytes.data(), bytes.size());
}

Status SendMessage(zmq::socket_t& socket, const Message& message, std::string_view routing_id) {
  return SendEncoded(socket, Encode(message), routing_id);
}

Status SendEncoded(zmq::socket_t& socket, const std::string& bytes, std::string_view routing_id) {
  try {
    if (!routing_id.empty()) {
      zmq::message_t id(routing_id.data(), routing_id.size());
      if (!socket.send(id, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
        return Unavailable("peer queue full");
      }
    }
    zmq::message_t frame(bytes.data(), bytes.size());
    if (!socket.send(frame, zmq::send_flags::dontwait)) return Unavailable("peer queue full");
  } catch (const zmq::error_t& e) {
    // EHOSTUNREACH with ZMQ_ROUTER_MANDATORY: the peer is gone.
    return Unavailable(std::string("send failed: ") + e.what());
  }
  return Status::Ok();
}

void LimitInboundMessageSize(zmq::socket_t& socket, size_t max_bytes) {
  const size_t limit = max_bytes > SIZE_MAX / 2 ? SIZE_MAX / 2 : 2 * max_bytes;
  socket.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(std::min<size_t>(limit, INT64_MAX)));
}

std::optional<Incoming> ReceiveMessage(zmq::socket_t& socket, bool routed, size_t max_bytes) {
  // Frames are read one at a time and only the first `wanted` kept: a peer that sends a
  // million-part message costs a count, not a million buffers.
  const size_t wanted = routed ? 2 : 1;
  std::vector<zmq::message_t> frames;
  size_t received = 0;
  try {
    zmq::message_t frame;
    if (!socket.recv(frame, zmq::recv_flags::none)) return std::nullopt;
    while (true) {
      ++received;
      const bool more = frame.more();
      if (frames.size() < wanted) frames.push_back(std::move(frame));
      if (!more) break;
      // The rest of a multipart message is delivered at once with its first part.
      frame = zmq::message_t();
      if (!socket.recv(frame, zmq::recv_flags::none)) break;
    }
  } catch (const zmq::error_t& e) {
    if (received == 0 && (e.num() == EAGAIN || e.num() == EINTR)) return std::nullopt;
    Incoming in;
    in.message = Unavailable(std::string("receive failed: ") + e.what());
    return in;
  }
  Incoming in;
  size_t first = 0;
  if (routed) {
    in.routing_id = frames[0].to_string();
    first = 1;
  }
  const size_t payload_frames = received - first;
  if (payload_frames != 1) {
    in.message = InvalidArgument("expected exactly one message frame, got " +
                                 std::to_string(payload_frames));
    return in;
  }
  const zmq::message_t& frame = frames[first];
  in.message = Decode(frame.data(), frame.size(), max_bytes);
  if (in.message.status().code() == StatusCode::kFailedPrecondition) {
    in.other_version = EnvelopeVersion(frame.data(), frame.size()).value_or(0);
  }
  return in;
}

int PollSockets(zmq::pollitem_t* items, size_t count, std::chrono::milliseconds timeout) {
  const int rc = zmq_poll(items, static_cast<int>(count), static_cast<long>(timeout.count()));
  if (rc >= 0) return rc;
  for (size_t i = 0; i < count; ++i) items[i].revents = 0;
  if (zmq_errno() == EINTR) return 0;
  throw zmq::error_t();
}

}  // namespace bmad::proto
