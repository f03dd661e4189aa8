#include "worker/sampling/regex_constraint.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

namespace bmad::sampling {

RegexConstraint::RegexConstraint(std::shared_ptr<const TokenTexts> texts, std::vector<int32_t> end_tokens,
                                 std::shared_ptr<const RegexNfa> pattern)
    : texts_(std::move(texts)),
      end_tokens_(std::move(end_tokens)),
      pattern_(std::move(pattern)),
      dfa_(pattern_),
      state_(dfa_.start()) {}

bool RegexConstraint::Ends(int32_t token) const {
  return std::find(end_tokens_.begin(), end_tokens_.end(), token) != end_tokens_.end();
}

Result<int32_t> RegexConstraint::Walk(int32_t state, std::string_view text) {
  for (const char c : text) {
    if (state == RegexDfa::kDead) break;
    const auto byte = static_cast<uint8_t>(c);
    const int32_t known = dfa_.Known(state, byte);
    if (known != RegexDfa::kUnknown) {
      state = known;
    } else {
      BMAD_ASSIGN_OR_RETURN(state, dfa_.Step(state, byte));
    }
  }
  return state;
}

Status RegexConstraint::Sync(std::span<const int32_t> generated) {
  if (generated.size() < read_) {
    state_ = dfa_.start();
    read_ = 0;
    ended_ = false;
  }
  for (; read_ < generated.size(); ++read_) {
    const int32_t token = generated[read_];
    const std::string which = "output token " + std::to_string(read_) + " (id " + std::to_string(token) + ")";
    if (ended_) return InvalidArgument(which + " follows the end of the output");
    if (Ends(token)) {  // whatever its text: the output processor drops it and stops
      if (!dfa_.accepting(state_)) return InvalidArgument(which + " ends the output before it matches the pattern");
      ended_ = true;
      continue;
    }
    const std::string_view text = texts_->text(token);
    int32_t next = RegexDfa::kDead;
    if (!text.empty()) {
      BMAD_ASSIGN_OR_RETURN(next, Walk(state_, text));
    }
    if (next == RegexDfa::kDead) return InvalidArgument(which + " cannot continue the output towards the pattern");
    state_ = next;
  }
  return Status::Ok();
}

bool RegexConstraint::complete() {
  if (!dfa_.accepting(state_)) return false;
  const Result<bool> more = dfa_.HasNext(state_);
  return more.ok() && !*more;
}

Result<std::vector<uint64_t>> RegexConstraint::AllowedIn(int32_t state, size_t size) {
  std::vector<uint64_t> bits((size + 63) / 64, 0);
  const bool matches = dfa_.accepting(state);
  for (size_t id = 0; id < size; ++id) {
    bool fits = false;
    if (Ends(static_cast<int32_t>(id))) {
      fits = matches;
    } else {
      const std::string_view text = texts_->text(static_cast<int64_t>(id));
      if (!text.empty()) {
        BMAD_ASSIGN_OR_RETURN(const int32_t to, Walk(state, text));
        fits = to != RegexDfa::kDead;
      }
    }
    if (fits) bits[id / 64] |= uint64_t{1} << (id % 64);
  }
  return bits;
}

Status RegexConstraint::Mask(std::span<float> scores) {
  constexpr float kBanned = -std::numeric_limits<float>::infinity();
  const bool matches = !ended_ && dfa_.accepting(state_);
  std::vector<uint64_t> computed;
  const std::vector<uint64_t>* bits = nullptr;
  if (!ended_) {
    const auto cached = allowed_.find(state_);
    if (cached != allowed_.end() && cached->second.size() == (scores.size() + 63) / 64) {
      bits = &cached->second;
    } else {
      BMAD_ASSIGN_OR_RETURN(computed, AllowedIn(state_, scores.size()));
      if (allowed_.size() < kCachedStates) {
        bits = &(allowed_[state_] = std::move(computed));
      } else {
        bits = &computed;
      }
    }
  }
  size_t allowed = 0;
  for (size_t id = 0; id < scores.size(); ++id) {
    const bool fits = bits != nullptr && (((*bits)[id / 64] >> (id % 64)) & 1) != 0;
    if (fits && !(std::isinf(scores[id]) && scores[id] < 0)) {
      ++allowed;
    } else {
      scores[id] = kBanned;
    }
  }
  if (allowed == 0) {
    return FailedPrecondition(matches ? "the output matches the pattern, and no token may end it"
                                      : "no token of the vocabulary can continue the output towards the pattern");
  }
  return Status::Ok();
}

}  // namespace bmad::sampling
