// The DFA of a RegexNfa, built lazily: a state is a set of NFA states (RegexNfa::Closure), and
// each (state, byte) transition is computed the first time it is taken, then kept for every
// byte of its class (RegexNfa::ClassOf: [^"] has 16 classes, not 256 bytes). Holding
// output to a pattern walks every vocabulary token's bytes from the current state at each step,
// so the same few transitions are taken again and again: after the first steps, a walk is a
// table lookup per byte.
//
// The states kept are a cache, bounded (as RE2's DFA cache is): when a new state would pass
// kMaxStates, or the NFA sets kept kMaxSetInts, the cache starts over and the state is the
// first of a new generation. State ids of an older generation are then meaningless: a holder
// keeps the NFA set of the states it holds (Set) and interns it again (Intern) when
// generation() has moved. A pattern whose DFA is large (counted repeats of non-ASCII classes)
// is then slower, never refused part-way and never larger.
//
// Memory: 1 KiB per state (its 256 transitions) and its NFA set: at most about 2 MiB and 4 MiB
// (kept twice over while a map key is copied in), per sequence.
//
// Thread-safety: none; one per sequence (inside its RegexConstraint).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "worker/sampling/regex_nfa.h"

namespace bmad::sampling {

class RegexDfa {
 public:
  static constexpr int32_t kDead = -1;     // no text from here matches
  static constexpr int32_t kUnknown = -2;  // Known: a transition not computed yet
  static constexpr size_t kMaxStates = 2048;
  static constexpr size_t kMaxSetInts = size_t{1} << 20;

  // `max_states`: the cache's bound (tests set a small one to make it start over).
  explicit RegexDfa(std::shared_ptr<const RegexNfa> nfa, size_t max_states = kMaxStates);
  // Movable, not copyable: sets_ points into ids_'s keys (a move keeps the map's nodes).
  RegexDfa(const RegexDfa&) = delete;
  RegexDfa& operator=(const RegexDfa&) = delete;
  RegexDfa(RegexDfa&&) = default;
  RegexDfa& operator=(RegexDfa&&) = default;

  // The start state, in the current generation.
  int32_t start();
  // The state after reading `byte` in `state` (kDead stays kDead). May start a new generation.
  int32_t Step(int32_t state, uint8_t byte);
  // The transition if it has been computed, else kUnknown (then Step computes it): the inner
  // loop of a walk, a table lookup. `state` must not be kDead.
  int32_t Known(int32_t state, uint8_t byte) const { return next_[static_cast<size_t>(state)][byte]; }
  // The text read to `state` matches the pattern.
  bool accepting(int32_t state) const { return state >= 0 && accepting_[static_cast<size_t>(state)]; }
  // Some byte leads on from `state` (else only the end can follow, when accepting). May start a
  // new generation (then `state` is meaningless afterwards).
  bool HasNext(int32_t state);

  uint64_t generation() const { return generation_; }
  // The NFA states `state` stands for (valid until the next Step or Intern).
  const std::vector<int32_t>& Set(int32_t state) const { return *sets_[static_cast<size_t>(state)]; }
  // The state of an NFA set, in the current generation (kDead for an empty set).
  int32_t Intern(const std::vector<int32_t>& nfa_states);

 private:
  void StartOver();

  std::shared_ptr<const RegexNfa> nfa_;
  size_t max_states_;
  std::map<std::vector<int32_t>, int32_t> ids_;
  std::vector<const std::vector<int32_t>*> sets_;  // the keys of ids_, by state
  std::vector<std::array<int32_t, 256>> next_;
  std::vector<bool> accepting_;
  size_t set_ints_ = 0;
  uint64_t generation_ = 0;
  std::vector<int32_t> start_set_;
  int32_t start_ = kDead;
  uint64_t start_generation_ = 0;
};

}  // namespace bmad::sampling
