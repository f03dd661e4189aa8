// Holds one sequence's output to a regular expression (vLLM's guided_regex; guided_choice is
// the alternation of its choices): at each step every token whose text cannot continue the
// output towards a whole match is banned, the tokens that end the output are allowed only once
// the output matches, and when nothing may follow a match only they remain.
//
// Tokens are judged by their bytes (TokenTexts) through the pattern's lazy DFA (RegexDfa), whose
// states are those from which a match is still reachable: the output cannot be led into a dead
// end. Control tokens (no text) are banned. A length limit or a stop string can still cut the
// match short, as in vLLM; the finish reason then says so.
//
// Cost of a Mask: in a DFA state met before, one pass over a bitmap of the tokens it allows
// (kept for up to kCachedStates states: patterns that loop, as .* and \d+ do, revisit theirs);
// in a new one, a walk of the vocabulary's texts in sorted order through the DFA's transitions
// (a table lookup per byte once computed), reading a prefix shared with the token before once
// and passing over every token under a prefix that leads nowhere (docs/benchmarks.md). Memory: the DFA's states (RegexDfa) and the bitmaps, a bit per token;
// the texts and the NFA are shared.
//
// Thread-safety: none; one per sequence (inside its Sampler).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "worker/sampling/regex_dfa.h"
#include "worker/sampling/regex_nfa.h"
#include "worker/sampling/token_texts.h"

namespace bmad::sampling {

class RegexConstraint {
 public:
  // `end_tokens`: what ends the output (engine::TokensThatEnd).
  // `max_dfa_states`: the DFA cache's bound (RegexDfa; tests set a small one).
  RegexConstraint(std::shared_ptr<const TokenTexts> texts, std::vector<int32_t> end_tokens,
                  std::shared_ptr<const RegexNfa> pattern, size_t max_dfa_states = RegexDfa::kMaxStates);
  // The DFA cache's generation: how many times it started over (for tests).
  uint64_t dfa_generation() const { return dfa_.generation(); }

  // Reads the output's tokens not read yet (a shorter output is read again from its start).
  // kInvalidArgument naming the token when one cannot continue towards a match, or ends the
  // output before one: an output this constraint did not choose (a migrated request's).
  Status Sync(std::span<const int32_t> generated);

  // Sets every token that cannot come next to -inf (ids beyond the vocabulary's texts too).
  // kInvalidArgument when no token can (with what was banned before: the request's own
  // allowed_token_ids or bad_words, or a vocabulary without the bytes the pattern needs).
  Status Mask(std::span<float> scores);

  // The output matches and nothing can follow but its end.
  bool complete();

 private:
  bool Ends(int32_t token) const;
  // The DFA state of the output so far, in the DFA's current generation.
  int32_t Current();
  // Moves the output's state to `state` (of the current generation).
  void MoveTo(int32_t state);
  // The state after `text` from `state` (RegexDfa::kDead when it cannot be read). The DFA may
  // start a new generation on the way: then `state` and every earlier id are meaningless.
  int32_t Walk(int32_t state, std::string_view text);
  // The tokens the output's state allows over a vocabulary of `size`: bit i of word i / 64.
  std::vector<uint64_t> AllowedNow(size_t size);
  // AllowedNow's bitmap, from the cache when the state has one (valid until the next call).
  const std::vector<uint64_t>& AllowedBits(size_t size);
  // Drops the bitmaps of an older DFA generation (their state ids mean nothing now).
  void ForgetStaleBitmaps();

  static constexpr size_t kCachedStates = 64;

  std::vector<int32_t> walk_path_;  // AllowedNow's, kept to reuse its memory

  std::shared_ptr<const TokenTexts> texts_;
  std::vector<int32_t> end_tokens_;
  std::shared_ptr<const RegexNfa> pattern_;
  RegexDfa dfa_;
  // The output's state: its id in generation state_generation_, and its NFA set (to find it
  // again in a later generation).
  int32_t state_;
  uint64_t state_generation_;
  std::vector<int32_t> state_set_;
  // Allowed-token bitmaps of the states met, in generation allowed_generation_.
  std::unordered_map<int32_t, std::vector<uint64_t>> allowed_;
  uint64_t allowed_generation_ = 0;
  std::vector<uint64_t> uncached_;  // AllowedBits's answer once the cache is full
  size_t read_ = 0;     // output tokens read
  bool ended_ = false;  // an end token was read: nothing follows it
};

}  // namespace bmad::sampling
