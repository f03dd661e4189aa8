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
      state_(RegexDfa::kDead),
      state_generation_(0) {
  MoveTo(dfa_.start());
}

bool RegexConstraint::Ends(int32_t token) const {
  return std::find(end_tokens_.begin(), end_tokens_.end(), token) != end_tokens_.end();
}

int32_t RegexConstraint::Current() {
  if (state_generation_ != dfa_.generation()) {
    state_ = dfa_.Intern(state_set_);
    state_generation_ = dfa_.generation();
  }
  return state_;
}

void RegexConstraint::MoveTo(int32_t state) {
  state_ = state;
  state_generation_ = dfa_.generation();
  state_set_ = state == RegexDfa::kDead ? std::vector<int32_t>() : dfa_.Set(state);
}

int32_t RegexConstraint::Walk(int32_t state, std::string_view text) {
  for (const char c : text) {
    if (state == RegexDfa::kDead) break;
    const auto byte = static_cast<uint8_t>(c);
    const int32_t known = dfa_.Known(state, byte);
    state = known != RegexDfa::kUnknown ? known : dfa_.Step(state, byte);
  }
  return state;
}

Status RegexConstraint::Sync(std::span<const int32_t> generated) {
  if (generated.size() < read_) {
    MoveTo(dfa_.start());
    read_ = 0;
    ended_ = false;
  }
  for (; read_ < generated.size(); ++read_) {
    const int32_t token = generated[read_];
    const std::string which = "output token " + std::to_string(read_) + " (id " + std::to_string(token) + ")";
    if (ended_) return InvalidArgument(which + " follows the end of the output");
    if (Ends(token)) {  // whatever its text: the output processor drops it and stops
      if (!dfa_.accepting(Current())) return InvalidArgument(which + " ends the output before it matches the pattern");
      ended_ = true;
      continue;
    }
    const std::string_view text = texts_->text(token);
    const int32_t next = text.empty() ? RegexDfa::kDead : Walk(Current(), text);
    if (next == RegexDfa::kDead) return InvalidArgument(which + " cannot continue the output towards the pattern");
    MoveTo(next);
  }
  return Status::Ok();
}

bool RegexConstraint::complete() {
  return dfa_.accepting(Current()) && !dfa_.HasNext(Current());
}

std::vector<uint64_t> RegexConstraint::AllowedNow(size_t size) {
  std::vector<uint64_t> bits((size + 63) / 64, 0);
  for (size_t id = 0; id < size; ++id) {
    bool fits = false;
    if (Ends(static_cast<int32_t>(id))) {
      fits = dfa_.accepting(Current());
    } else {
      const std::string_view text = texts_->text(static_cast<int64_t>(id));
      fits = !text.empty() && Walk(Current(), text) != RegexDfa::kDead;
    }
    if (fits) bits[id / 64] |= uint64_t{1} << (id % 64);
  }
  return bits;
}

void RegexConstraint::ForgetStaleBitmaps() {
  if (allowed_generation_ == dfa_.generation()) return;
  allowed_.clear();
  allowed_generation_ = dfa_.generation();
}

const std::vector<uint64_t>& RegexConstraint::AllowedBits(size_t size) {
  ForgetStaleBitmaps();
  const auto cached = allowed_.find(Current());
  if (cached != allowed_.end() && cached->second.size() == (size + 63) / 64) return cached->second;
  std::vector<uint64_t> bits = AllowedNow(size);
  // Keyed by the state in the generation the walks ended in (they may have started one).
  ForgetStaleBitmaps();
  if (allowed_.size() < kCachedStates) return allowed_[Current()] = std::move(bits);
  uncached_ = std::move(bits);
  return uncached_;
}

Status RegexConstraint::Mask(std::span<float> scores) {
  constexpr float kBanned = -std::numeric_limits<float>::infinity();
  const std::vector<uint64_t>* bits = ended_ ? nullptr : &AllowedBits(scores.size());
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
    // The request's own doing: its pattern, with what else it bans, leaves nothing to write.
    return InvalidArgument(dfa_.accepting(Current())
                               ? "the output matches the pattern, and no token may end it"
                               : "no token can continue the output towards the pattern (with the request's "
                                 "allowed_token_ids and bad_words, if any)");
  }
  return Status::Ok();
}

}  // namespace bmad::sampling
