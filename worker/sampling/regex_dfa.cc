#include "worker/sampling/regex_dfa.h"

#include <algorithm>
#include <string>
#include <utility>

namespace bmad::sampling {

RegexDfa::RegexDfa(std::shared_ptr<const RegexNfa> nfa) : nfa_(std::move(nfa)) {
  start_ = Intern(nfa_->Closure({nfa_->start()}));
}

int32_t RegexDfa::Intern(std::vector<int32_t> nfa_states) {
  if (nfa_states.empty()) return kDead;
  const auto found = ids_.find(nfa_states);
  if (found != ids_.end()) return found->second;
  if (sets_.size() >= kMaxStates) {
    too_many_ = true;
    return kDead;
  }
  const auto id = static_cast<int32_t>(sets_.size());
  bool accepting = false;
  for (const int32_t i : nfa_states) {
    accepting |= nfa_->states()[static_cast<size_t>(i)].kind == RegexNfa::State::Kind::kMatch;
  }
  ids_.emplace(nfa_states, id);
  sets_.push_back(std::move(nfa_states));
  std::array<int32_t, 256> unknown;
  unknown.fill(kUnknown);
  next_.push_back(unknown);
  accepting_.push_back(accepting);
  return id;
}

Result<int32_t> RegexDfa::Step(int32_t state, uint8_t byte) {
  if (state < 0) return kDead;
  const int32_t known = next_[static_cast<size_t>(state)][byte];
  if (known != kUnknown) return known;
  std::vector<int32_t> moved;
  for (const int32_t i : sets_[static_cast<size_t>(state)]) {
    const RegexNfa::State& s = nfa_->states()[static_cast<size_t>(i)];
    if (s.kind == RegexNfa::State::Kind::kRange && byte >= s.lo && byte <= s.hi) moved.push_back(s.next);
  }
  const int32_t to = Intern(nfa_->Closure(moved));
  if (too_many_) {
    too_many_ = false;
    return ResourceExhausted("the pattern's automaton needs more than " + std::to_string(kMaxStates) +
                             " states for this output");
  }
  next_[static_cast<size_t>(state)][byte] = to;  // `next_` may have grown: index again
  return to;
}

Result<bool> RegexDfa::HasNext(int32_t state) {
  if (state < 0) return false;
  for (int b = 0; b < 256; ++b) {
    BMAD_ASSIGN_OR_RETURN(const int32_t to, Step(state, static_cast<uint8_t>(b)));
    if (to != kDead) return true;
  }
  return false;
}

}  // namespace bmad::sampling
