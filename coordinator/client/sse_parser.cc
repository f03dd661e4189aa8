#include "coordinator/client/sse_parser.h"

namespace bmad::client {

SseParser::SseParser(EventCallback on_event, size_t max_event_bytes)
    : on_event_(std::move(on_event)), max_event_bytes_(max_event_bytes) {}

Status SseParser::Feed(std::string_view bytes) {
  if (!error_.ok()) return error_;
  size_t i = 0;
  // One byte order mark at the very start is dropped (WHATWG); it may come split over chunks.
  constexpr std::string_view kBom = "\xEF\xBB\xBF";
  while (bom_read_ < kBom.size() && i < bytes.size()) {
    if (bytes[i] != kBom[bom_read_]) {
      line_.append(kBom.substr(0, bom_read_));  // not a mark after all: those bytes are text
      bom_read_ = kBom.size();
      break;
    }
    ++bom_read_;
    ++i;
  }
  if (skip_lf_ && i < bytes.size()) {
    if (bytes[i] == '\n') ++i;
    skip_lf_ = false;
  }
  while (i < bytes.size()) {
    size_t end = bytes.find_first_of("\r\n", i);
    const size_t take = (end == std::string_view::npos ? bytes.size() : end) - i;
    if (line_.size() + take > max_event_bytes_) {
      error_ = DataLoss("an event-stream line is longer than " + std::to_string(max_event_bytes_) +
                        " bytes");
      return error_;
    }
    line_.append(bytes.substr(i, take));
    if (end == std::string_view::npos) break;
    error_ = ProcessLine(line_);
    line_.clear();
    if (!error_.ok()) return error_;
    if (bytes[end] == '\r') {
      if (end + 1 == bytes.size()) {
        skip_lf_ = true;  // "\r\n" may be split between this chunk and the next
      } else if (bytes[end + 1] == '\n') {
        ++end;
      }
    }
    i = end + 1;
  }
  return Status::Ok();
}

Status SseParser::Finish() {
  if (!error_.ok()) return error_;
  line_.clear();  // an unterminated last line is incomplete: dropped, as the standard says
  Dispatch();
  return Status::Ok();
}

Status SseParser::ProcessLine(std::string_view line) {
  if (line.empty()) {
    Dispatch();
    return Status::Ok();
  }
  if (line.front() == ':') return Status::Ok();  // a comment (servers send them as keep-alives)
  const size_t colon = line.find(':');
  std::string_view field = line.substr(0, colon);
  std::string_view value;
  if (colon != std::string_view::npos) {
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "error") {
    // Not standard: llama.cpp's server reports a failure mid-stream as an "error: {json}"
    // line. It becomes an event of type "error" so that the failure is not silently dropped.
    pending_.type = "error";
    field = "data";
  }
  if (field == "data") {
    if (pending_.data.size() + value.size() + 1 > max_event_bytes_) {
      return DataLoss("an event-stream event is larger than " + std::to_string(max_event_bytes_) +
                      " bytes");
    }
    if (has_data_) pending_.data += '\n';
    pending_.data.append(value);
    has_data_ = true;
  } else if (field == "event") {
    pending_.type = std::string(value);
  }
  return Status::Ok();
}

void SseParser::Dispatch() {
  if (has_data_) {
    ++events_;
    on_event_(pending_);
  }
  pending_ = SseEvent{};
  has_data_ = false;
}

}  // namespace bmad::client
