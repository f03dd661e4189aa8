// Protocol messages over ZeroMQ multipart frames.
//
// Layout: a ROUTER socket sees [routing id][envelope]; a DEALER sees [envelope]. Anything else
// (extra frames, an empty envelope) is rejected with a Status, and the routing id is still
// returned so the ROUTER side can answer the sender with an error.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include <zmq.hpp>

#include "common/proto/codec.h"
#include "common/proto/messages.h"
#include "common/status.h"

namespace bmad::proto {

zmq::message_t EncodeFrame(const Message& message);

// Sends one message; on a ROUTER socket pass the peer's routing id. Never blocks: a full peer
// queue or an unknown routing id yields kUnavailable.
Status SendMessage(zmq::socket_t& socket, const Message& message,
                   std::string_view routing_id = {});
// The same with bytes already encoded (EncodeStamped).
Status SendEncoded(zmq::socket_t& socket, const std::string& bytes, std::string_view routing_id = {});

struct Incoming {
  std::string routing_id;               // empty on DEALER sockets
  Result<Message> message = Internal("nothing decoded");
  // The version of a message refused as another protocol version's (0 otherwise): what to
  // stamp an answer with (EncodeStamped) so that the peer can read it.
  uint16_t other_version = 0;
};

// Receives one multipart message if one is ready within the socket's receive timeout
// (std::nullopt when none is). `routed` says whether the socket is a ROUTER.
std::optional<Incoming> ReceiveMessage(zmq::socket_t& socket, bool routed,
                                       size_t max_bytes = kDefaultMaxMessageBytes);

// Bounds what `socket` buffers for one inbound frame. ReceiveMessage refuses a message over
// `max_bytes` with an error naming the limit, but only after the transport has read all of it:
// without this a peer could make us hold gigabytes. Frames up to twice `max_bytes` still arrive
// (and get that error); a larger one makes ZeroMQ drop the peer's connection unread.
void LimitInboundMessageSize(zmq::socket_t& socket, size_t max_bytes);

// zmq::poll that treats a signal's interruption (EINTR: a SIGTERM arriving while we wait) as
// "nothing ready" instead of throwing; the caller's loop then sees its stop flag. Returns the
// number of ready items.
int PollSockets(zmq::pollitem_t* items, size_t count, std::chrono::milliseconds timeout);

}  // namespace bmad::proto
