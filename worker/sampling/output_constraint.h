// What a sequence's output must be, when anything: a JSON value (JsonConstraint: response_format
// json_object and json_schema, guided_json) or a match of a regular expression
// (RegexConstraint: guided_regex, guided_choice). The Sampler holds one and asks it, before each
// draw, to ban the tokens that cannot come next.
//
// Thread-safety: none; one per sequence (inside its Sampler).
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <variant>

#include "common/status.h"
#include "worker/sampling/json_constraint.h"
#include "worker/sampling/regex_constraint.h"

namespace bmad::sampling {

class OutputConstraint {
 public:
  // Implicit: either constraint is an OutputConstraint wherever one is asked for.
  OutputConstraint(JsonConstraint json) : held_(std::move(json)) {}     // NOLINT(google-explicit-constructor)
  OutputConstraint(RegexConstraint regex) : held_(std::move(regex)) {}  // NOLINT(google-explicit-constructor)

  // The held constraint's Sync and Mask (their errors are theirs).
  Status Sync(std::span<const int32_t> generated) {
    return std::visit([&](auto& c) { return c.Sync(generated); }, held_);
  }
  Status Mask(std::span<float> scores) {
    return std::visit([&](auto& c) { return c.Mask(scores); }, held_);
  }
  // The output is whole: only its end may follow.
  bool complete() {
    return std::visit([](auto& c) { return c.complete(); }, held_);
  }

 private:
  std::variant<JsonConstraint, RegexConstraint> held_;
};

}  // namespace bmad::sampling
