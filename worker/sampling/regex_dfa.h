// The DFA of a RegexNfa, built lazily: a state is a set of NFA states (RegexNfa::Closure), and
// each (state, byte) transition is computed the first time it is taken, then kept. Holding
// output to a pattern walks every vocabulary token's bytes from the current state at each step,
// so the same few transitions are taken again and again: after the first steps, a walk is a
// table lookup per byte.
//
// Memory: 1 KiB per state (its 256 transitions) plus its NFA set; at most kMaxStates states,
// past which Step fails (a pattern whose DFA would grow without bound in practice, e.g. long
// counted repeats of overlapping classes).
//
// Thread-safety: none; one per sequence (inside its RegexConstraint).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "common/status.h"
#include "worker/sampling/regex_nfa.h"

namespace bmad::sampling {

class RegexDfa {
 public:
  static constexpr int32_t kDead = -1;     // no text from here matches
  static constexpr int32_t kUnknown = -2;  // Known: a transition not computed yet
  static constexpr size_t kMaxStates = 2048;

  explicit RegexDfa(std::shared_ptr<const RegexNfa> nfa);

  int32_t start() const { return start_; }
  // The state after reading `byte` in `state` (kDead stays kDead). kResourceExhausted when a
  // new state would pass kMaxStates.
  Result<int32_t> Step(int32_t state, uint8_t byte);
  // The transition if it has been computed, else kUnknown (then Step computes it): the inner
  // loop of a walk, a table lookup. `state` must not be kDead.
  int32_t Known(int32_t state, uint8_t byte) const { return next_[static_cast<size_t>(state)][byte]; }
  // The text read to `state` matches the pattern.
  bool accepting(int32_t state) const { return state >= 0 && accepting_[static_cast<size_t>(state)]; }
  // Some byte leads on from `state` (else only the end can follow, when accepting).
  Result<bool> HasNext(int32_t state);

 private:
  int32_t Intern(std::vector<int32_t> nfa_states);

  std::shared_ptr<const RegexNfa> nfa_;
  std::map<std::vector<int32_t>, int32_t> ids_;
  std::vector<std::vector<int32_t>> sets_;
  std::vector<std::array<int32_t, 256>> next_;
  std::vector<bool> accepting_;
  bool too_many_ = false;
  int32_t start_ = kDead;
};

}  // namespace bmad::sampling
