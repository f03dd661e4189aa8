// Encoding protocol messages to bytes (Cap'n Proto, one Envelope) and decoding them back.
//
// Decode never throws and never crashes on hostile input: truncated or garbage bytes, a wrong
// protocol version, an oversized message or an out-of-range enum all come back as a Status.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "common/proto/messages.h"
#include "common/status.h"

namespace bmad::proto {

inline constexpr size_t kDefaultMaxMessageBytes = 64u << 20;

// The Envelope's bytes (a multiple of 8 long).
std::string Encode(const Message& message);
// The same, stamped with another protocol version: only to tell a peer of that version that
// we do not speak it, with a message whose layout has not changed since version 1
// (RegisterAck, ErrorMessage).
std::string EncodeStamped(const Message& message, uint16_t version);

// The protocol version a well-formed envelope is stamped with, whatever it is; nullopt for
// bytes that are no envelope.
std::optional<uint16_t> EnvelopeVersion(const void* data, size_t size);

// Decodes one Envelope. `data` need not be aligned. Errors:
//   kResourceExhausted  larger than max_bytes
//   kDataLoss           truncated, garbage, or trailing bytes
//   kFailedPrecondition another protocol version
//   kInvalidArgument    a well-formed envelope with invalid contents (unknown union member,
//                       enum value out of range, prompt union unset, ...)
Result<Message> Decode(const void* data, size_t size,
                       size_t max_bytes = kDefaultMaxMessageBytes);

}  // namespace bmad::proto
