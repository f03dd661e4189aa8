// A request as a front door hands it to the coordinator's event loop, already parsed: the
// socket frontend fills it from proto::Submit, the HTTP frontend from an OpenAI request body.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/proto/messages.h"

namespace bmad::coord {

struct SubmitInput {
  std::string client_request_id;
  std::string model;                 // empty: the served model
  bool prompt_is_tokens = false;
  std::string prompt_text;
  std::vector<uint32_t> prompt_tokens;
  proto::SamplingParams sampling;
  bool max_tokens_given = true;      // false: as many as the context allows (chat default)
  int32_t priority = 1;
  uint32_t slo_ms = 0;
  bool stream = true;
  // HTTP: the request's n. The loop accepts that many requests for this prompt, all or none,
  // choice i with seed + i when a seed is given; they share the HTTP stream.
  uint32_t choices = 1;
  // When the front door received it (SystemClock nanoseconds; 0: when admitted). Time to first
  // token and end-to-end latency count from here: the time a prompt waits to be tokenized, and
  // for the event loop, is the client's wait too.
  int64_t received_ns = 0;
};

}  // namespace bmad::coord
