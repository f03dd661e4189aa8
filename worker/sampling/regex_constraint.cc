#include "worker/sampling/regex_constraint.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

namespace bmad::sampling {

RegexConstraint::RegexConstraint(std::shared_ptr<const TokenTexts> texts, std::vector<int32_t> end_tokens,
                                 std::shared_ptr<const RegexNfa> pattern, size_t max_dfa_states)
    : texts_(std::move(texts)),
      end_tokens_(std::move(end_tokens)),
      pattern_(std::move(pattern)),
      dfa_(pattern_, max_dfa_states),
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
  const auto allow = [&](size_t id) { bits[id / 64] |= uint64_t{1} << (id % 64); };
  if (dfa_.accepting(Current())) {
    for (const int32_t id : end_tokens_) {
      if (id >= 0 && static_cast<size_t>(id) < size) allow(static_cast<size_t>(id));
    }
  }
  // Every other token by its bytes, in the order of their texts: a prefix shared with the token
  // before is read once (path[d] is the state after the first d bytes, for depth_valid of them),
  // and a prefix that leads nowhere passes over every token under it. A flat walk of each
  // token's bytes cost about 1 ms on a 32,000-token vocabulary; this, a fraction (benchmarks).
  const std::span<const int32_t> order = texts_->by_text();
  const std::span<const uint32_t> shared = texts_->shared_prefix();
  std::vector<int32_t>& path = walk_path_;
  path.assign(1, Current());
  size_t depth_valid = 0;
  uint64_t generation = dfa_.generation();
  for (size_t k = 0; k < order.size(); ++k) {
    depth_valid = std::min<size_t>(depth_valid, shared[k]);
    const int32_t id = order[k];
    if (static_cast<size_t>(id) >= size || Ends(id)) continue;
    const std::string_view text = texts_->sorted_text(k);
    if (text.empty()) continue;  // control tokens: banned
    size_t d = depth_valid;
    int32_t state = path[d];
    for (; d < text.size() && state != RegexDfa::kDead; ++d) {
      const auto byte = static_cast<uint8_t>(text[d]);
      const int32_t known = dfa_.Known(state, byte);
      state = known != RegexDfa::kUnknown ? known : dfa_.Step(state, byte);
      if (dfa_.generation() != generation) {
        // The DFA started over: the states on the path mean nothing now. This token's walk
        // goes on from where it stands (a state of the new generation); the next starts afresh.
        state = Walk(state, text.substr(d + 1));
        d = text.size();
        generation = dfa_.generation();
        path.assign(1, Current());
        depth_valid = 0;
        break;
      }
      if (path.size() <= d + 1) path.resize(d + 2);
      path[d + 1] = state;
      depth_valid = d + 1;
    }
    if (state != RegexDfa::kDead) {
      allow(static_cast<size_t>(id));
    } else if (depth_valid > 0 && path[depth_valid] == RegexDfa::kDead) {
      // Its first depth_valid bytes lead nowhere: so do those of every token that shares them.
      while (k + 1 < order.size() && shared[k + 1] >= depth_valid) ++k;
    }
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
