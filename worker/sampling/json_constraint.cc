#include "worker/sampling/json_constraint.h"

#include <algorithm>
#include <array>
#include <limits>
#include <string>

namespace bmad::sampling {

JsonConstraint::JsonConstraint(std::shared_ptr<const TokenTexts> texts, std::vector<int32_t> end_tokens,
                               std::shared_ptr<const JsonSchema> schema, bool compact)
    : texts_(std::move(texts)),
      end_tokens_(std::move(end_tokens)),
      schema_(std::move(schema)),
      compact_(compact),
      automaton_(schema_.get(), compact) {}


bool JsonConstraint::Ends(int32_t token) const {
  return std::find(end_tokens_.begin(), end_tokens_.end(), token) != end_tokens_.end();
}

Status JsonConstraint::Sync(std::span<const int32_t> generated) {
  if (generated.size() < read_) {
    automaton_ = SchemaAutomaton(schema_.get(), compact_);
    read_ = 0;
    ended_ = false;
  }
  for (; read_ < generated.size(); ++read_) {
    const int32_t token = generated[read_];
    if (ended_) {
      return InvalidArgument("output token " + std::to_string(read_) + " (id " + std::to_string(token) +
                             ") follows the end of the JSON value");
    }
    // An ending token ends the output whatever its text (a stop token id may have some: the
    // output processor drops that text and stops), so it only fits a complete value.
    if (Ends(token)) {
      if (automaton_.complete()) {
        ended_ = true;
        continue;
      }
      return InvalidArgument("output token " + std::to_string(read_) + " (id " + std::to_string(token) +
                             ") ends the output before the JSON value is complete");
    }
    const std::string_view text = texts_->text(token);
    if (!text.empty()) {
      SchemaAutomaton next = automaton_;
      if (next.Feed(text)) {
        automaton_ = next;
        continue;
      }
    }
    return InvalidArgument("output token " + std::to_string(read_) + " (id " + std::to_string(token) +
                           ") cannot continue the JSON value the response format allows");
  }
  return Status::Ok();
}

Status JsonConstraint::Mask(std::span<float> scores) const {
  constexpr float kBanned = -std::numeric_limits<float>::infinity();
  // Which bytes can come next: most tokens are refused by their first byte alone.
  std::array<bool, 256> first_byte_fits{};
  for (int b = 0; b < 256; ++b) {
    SchemaAutomaton probe = automaton_;
    first_byte_fits[static_cast<size_t>(b)] = probe.Feed(static_cast<uint8_t>(b));
  }
  const bool complete = automaton_.complete();
  // Inside a string most tokens are plain text: allowed without being read (as many characters
  // as a bounded string has room for).
  const bool in_string = !ended_ && automaton_.between_string_characters();
  const uint32_t room = in_string ? automaton_.string_room() : 0;
  size_t allowed = 0;
  for (size_t id = 0; id < scores.size(); ++id) {
    bool fits = false;
    if (Ends(static_cast<int32_t>(id))) {
      fits = complete && !ended_;  // never read as text: see Sync
    } else {
      const std::string_view text = texts_->text(static_cast<int64_t>(id));
      const uint32_t plain = in_string ? texts_->plain_characters(static_cast<int64_t>(id)) : 0;
      fits = plain > 0 && plain <= room;
      if (!fits && !ended_ && !text.empty() && first_byte_fits[static_cast<uint8_t>(text[0])]) {
        SchemaAutomaton probe = automaton_;
        fits = probe.Feed(text);
      }
    }
    if (fits) {
      ++allowed;
    } else {
      scores[id] = kBanned;
    }
  }
  if (allowed == 0) {
    return FailedPrecondition(complete ? "the JSON value is complete, and no token may end the output"
                                       : "no token of the vocabulary can continue the JSON value");
  }
  return Status::Ok();
}

}  // namespace bmad::sampling
