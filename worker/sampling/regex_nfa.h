// A regular expression compiled to a byte-level NFA (Thompson's construction), for holding the
// generated text to a pattern: vLLM's guided_regex, and guided_choice (an alternation of
// literals). The whole output must match, as in vLLM's and outlines' regex guides.
//
// Syntax: the part of Python's `re` (and of ECMAScript and JSON Schema patterns) that
// structured-output clients send:
//   any UTF-8 character as itself; escapes \\ \. \( \) \[ \] \{ \} \| \* \+ \? \^ \$ \/ \- and
//     any other punctuation, \n \t \r \f \v \0, \xHH, \uHHHH, \U00HHHHHH;
//   . (any character but \n); classes [abc] [a-z] [^...] with \d \w \s and the escapes inside;
//   \d \w \s \D \W \S, with ASCII meanings ([0-9], [A-Za-z0-9_], [ \t\n\r\f\v]);
//   groups (...), (?:...), (?P<name>...), (?<name>...); alternation |;
//   quantifiers * + ? {m} {m,} {m,n} {,n}, and their lazy forms (*? ...), which allow the same
//     texts; a { that starts no quantifier is itself, as in Python;
//   ^ first and $ last (the match is whole either way).
// Refused, naming the construct: backreferences, lookarounds, inline flags and other (?...),
// \b \B \A \Z and other letter escapes, anchors elsewhere, a quantifier after a quantifier or
// with nothing to repeat, counts over 1000, patterns needing more than 20,000 states, and
// patterns that match no text at all (an empty class, a lone surrogate).
// Characters are code points (UTF-8 of 1 to 4 bytes, surrogates excluded); a class or a dot
// stands for the byte sequences of the characters it holds.
//
// Thread-safety: a compiled NFA is immutable; share it.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace bmad::sampling {

class RegexNfa {
 public:
  static constexpr int32_t kMaxRepeat = 1000;
  static constexpr size_t kMaxStates = 20000;

  struct State {
    // kRange: a byte in [lo, hi] leads to `next`. kSplit: `next` and `alt` (when >= 0), read
    // without a byte. kMatch: the text so far matches.
    enum class Kind : uint8_t { kRange, kSplit, kMatch };
    Kind kind = Kind::kSplit;
    uint8_t lo = 0;
    uint8_t hi = 0;
    int32_t next = -1;
    int32_t alt = -1;
  };

  // kInvalidArgument naming what is wrong and where (the byte offset in the pattern).
  static Result<std::shared_ptr<const RegexNfa>> Compile(std::string_view pattern);

  const std::vector<State>& states() const { return states_; }
  int32_t start() const { return start_; }
  // From state i a match can still be reached (states that cannot are never entered).
  bool live(int32_t i) const { return live_[static_cast<size_t>(i)]; }

  // The kRange and kMatch states reachable from `from` without reading a byte, live ones only,
  // sorted and distinct: a state of the DFA (RegexDfa).
  std::vector<int32_t> Closure(const std::vector<int32_t>& from) const;

  // Byte classes: the bytes no range of the pattern tells apart (every kRange state takes all of
  // a class or none of it), so a DFA reading one reads them all alike. `byte`'s class is the
  // range [first, last] that holds it.
  struct ByteClass {
    uint8_t first = 0;
    uint8_t last = 255;
  };
  ByteClass ClassOf(uint8_t byte) const { return classes_[class_of_[byte]]; }

 private:
  friend class RegexCompiler;
  void FindByteClasses();

  std::vector<State> states_;
  int32_t start_ = -1;
  std::vector<bool> live_;
  std::array<uint8_t, 256> class_of_{};
  std::vector<ByteClass> classes_;
};

}  // namespace bmad::sampling
