#include "worker/sampling/regex_dfa.h"

#include <algorithm>
#include <utility>

namespace bmad::sampling {

RegexDfa::RegexDfa(std::shared_ptr<const RegexNfa> nfa, size_t max_states)
    : nfa_(std::move(nfa)), max_states_(std::max<size_t>(max_states, 1)) {
  start_set_ = nfa_->Closure({nfa_->start()});
  start_ = Intern(start_set_);
  start_generation_ = generation_;
}

int32_t RegexDfa::start() {
  if (start_generation_ != generation_) {
    start_ = Intern(start_set_);
    start_generation_ = generation_;
  }
  return start_;
}

void RegexDfa::StartOver() {
  ids_.clear();
  sets_.clear();
  next_.clear();
  accepting_.clear();
  set_ints_ = 0;
  ++generation_;
}

int32_t RegexDfa::Intern(const std::vector<int32_t>& nfa_states) {
  if (nfa_states.empty()) return kDead;
  const auto found = ids_.find(nfa_states);
  if (found != ids_.end()) return found->second;
  if (sets_.size() >= max_states_ || set_ints_ + nfa_states.size() > kMaxSetInts) StartOver();
  const auto id = static_cast<int32_t>(sets_.size());
  bool accepting = false;
  for (const int32_t i : nfa_states) {
    accepting = accepting || nfa_->states()[static_cast<size_t>(i)].kind == RegexNfa::State::Kind::kMatch;
  }
  const auto inserted = ids_.emplace(nfa_states, id).first;
  sets_.push_back(&inserted->first);
  set_ints_ += nfa_states.size();
  std::array<int32_t, 256> unknown;
  unknown.fill(kUnknown);
  next_.push_back(unknown);
  accepting_.push_back(accepting);
  return id;
}

int32_t RegexDfa::Step(int32_t state, uint8_t byte) {
  if (state < 0) return kDead;
  const int32_t known = next_[static_cast<size_t>(state)][byte];
  if (known != kUnknown) return known;
  std::vector<int32_t> moved;
  for (const int32_t i : *sets_[static_cast<size_t>(state)]) {
    const RegexNfa::State& s = nfa_->states()[static_cast<size_t>(i)];
    if (s.kind == RegexNfa::State::Kind::kRange && byte >= s.lo && byte <= s.hi) moved.push_back(s.next);
  }
  const uint64_t before = generation_;
  const int32_t to = Intern(nfa_->Closure(moved));
  // Kept, for every byte of its class (they all lead there), unless the cache started over:
  // `state` is gone then.
  if (generation_ == before) {
    const RegexNfa::ByteClass c = nfa_->ClassOf(byte);
    std::fill(next_[static_cast<size_t>(state)].begin() + c.first,
              next_[static_cast<size_t>(state)].begin() + c.last + 1, to);
  }
  return to;
}

bool RegexDfa::HasNext(int32_t state) {
  if (state < 0) return false;
  const std::vector<int32_t> set = Set(state);  // a copy: a new generation may drop the state
  uint64_t valid_in = generation_;
  for (int b = 0; b < 256; ++b) {
    if (Step(state, static_cast<uint8_t>(b)) != kDead) return true;
    if (generation_ != valid_in) {
      state = Intern(set);
      valid_in = generation_;
    }
  }
  return false;
}

}  // namespace bmad::sampling
