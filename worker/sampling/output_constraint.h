// What a sequence's output must be, when anything: a JSON value (JsonConstraint: response_format
// json_object and json_schema, guided_json) or a match of a regular expression
// (RegexConstraint: guided_regex, guided_choice). The Sampler holds one and asks it, before each
// draw, to ban the tokens that cannot come next.
//
// A reasoning model may think first (ReasoningGate, as vLLM does under a reasoning parser): the
// format then applies to what follows the end of its reasoning block, and until that end nothing
// but the end of output is banned, so that the output cannot end without its formatted part.
//
// Thread-safety: none; one per sequence (inside its Sampler).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <variant>
#include <vector>

#include "common/status.h"
#include "worker/sampling/json_constraint.h"
#include "worker/sampling/regex_constraint.h"

namespace bmad::sampling {

// Where a reasoning model's formatted output starts (SamplingParams' reasoning_* tokens).
struct ReasoningGate {
  int32_t end_token = -1;    // the format applies after this token; -1: from the output's start
  // With end_token: the block is not open at the start. The first token may be this one, which
  // opens it; any other first token begins the formatted output. -1: open from the start.
  int32_t start_token = -1;
  // The tokens that end the output, banned until the formatted part begins.
  std::vector<int32_t> ending_tokens;
};

class OutputConstraint {
 public:
  // Implicit: either constraint is an OutputConstraint wherever one is asked for.
  OutputConstraint(JsonConstraint json, ReasoningGate gate = {})  // NOLINT(google-explicit-constructor)
      : held_(std::move(json)), gate_(std::move(gate)), phase_(FirstPhase(gate_)) {}
  OutputConstraint(RegexConstraint regex, ReasoningGate gate = {})  // NOLINT(google-explicit-constructor)
      : held_(std::move(regex)), gate_(std::move(gate)), phase_(FirstPhase(gate_)) {}

  // Reads the output so far: past the gate, the held constraint's Sync of the formatted part
  // (its errors are its own).
  Status Sync(std::span<const int32_t> generated);
  // Before the formatted part: bans the ending tokens (and at a block not yet open, the first
  // token may also be the gate's start token); after it, the held constraint's Mask.
  Status Mask(std::span<float> scores);
  // The output is whole: only its end may follow. Never before the formatted part.
  bool complete();

 private:
  enum class Phase {
    kFirstToken,  // the gate's block may open with the first token
    kReasoning,   // inside the block: no format yet
    kFormatted,   // the held constraint applies
  };
  static Phase FirstPhase(const ReasoningGate& gate) {
    if (gate.end_token < 0) return Phase::kFormatted;
    return gate.start_token >= 0 ? Phase::kFirstToken : Phase::kReasoning;
  }

  std::variant<JsonConstraint, RegexConstraint> held_;
  ReasoningGate gate_;
  Phase phase_;
  // Of the output read so far: how many tokens were searched for the block's end, and where
  // the formatted part starts once known.
  size_t scanned_ = 0;
  std::optional<size_t> formatted_from_;
};

}  // namespace bmad::sampling
