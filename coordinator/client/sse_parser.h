// An incremental parser for server-sent events (the `text/event-stream` format OpenAI-style
// servers stream completions in), fed with whatever byte chunks the socket delivers.
//
// Follows the WHATWG rules: lines end in "\n", "\r\n" or "\r" (even split across chunks);
// "field: value" with one optional space after the colon; "data" lines accumulate, joined by
// "\n"; a blank line dispatches the event; ":" starts a comment; "id" and "retry" are ignored.
// Two deliberate leniencies: at the end of the stream, data whose lines were complete but lacked
// the final blank line is still dispatched (some servers end with "data: [DONE]\n"); and an
// "error" field (llama.cpp's server streams failures as "error: {json}") is read as data of an
// event of type "error".
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace bmad::client {

struct SseEvent {
  std::string type;  // the "event" field; empty means "message"
  std::string data;
};

class SseParser {
 public:
  using EventCallback = std::function<void(const SseEvent& event)>;

  // Lines or events larger than `max_event_bytes` are a kDataLoss error, so a server that
  // never ends a line cannot grow the buffer without bound.
  explicit SseParser(EventCallback on_event, size_t max_event_bytes = 4u << 20);

  // Parses `bytes`, calling on_event for each completed event. After an error every further
  // call returns the same error.
  Status Feed(std::string_view bytes);
  // The stream ended: dispatches a pending event whose lines were complete.
  Status Finish();

  size_t events() const { return events_; }

 private:
  Status ProcessLine(std::string_view line);
  void Dispatch();

  EventCallback on_event_;
  size_t max_event_bytes_;
  std::string line_;       // the current, unterminated line
  bool skip_lf_ = false;   // the last chunk ended in "\r": a leading "\n" belongs to it
  size_t bom_read_ = 0;    // bytes of a leading byte order mark read (3: past the start)
  SseEvent pending_;
  bool has_data_ = false;
  size_t events_ = 0;
  Status error_;
};

}  // namespace bmad::client
