// How often each token occurs in a sequence's history, kept incrementally for the penalties.
//
// The repetition penalty needs "does token t occur in the prompt or the output", the presence and
// frequency penalties need "how many times does t occur in the output". Recounting a long history
// at every token would cost O(history) per step; instead the counts are dense per-vocabulary
// arrays updated with only the tokens appended since the last call.
//
// Contract with the caller (the Sampler, on behalf of the engine): each Update passes the whole
// history of one sequence. Between calls the prompt stays the same and the output only grows by
// appending. Anything else that is visible (the prompt's length changed, the output got shorter,
// the vocabulary size changed) resets the counts and recounts from scratch, which is correct but
// O(history). Rewriting tokens in place without changing the lengths is not detected: a caller
// that does so (e.g. replacing a sequence) must call Reset().
//
// Memory: 5 bytes per vocabulary entry, allocated on the first Update (only Samplers with an
// active penalty own one), plus one int32 per distinct token seen.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"

namespace bmad::sampling {

class TokenOccurrences {
 public:
  // Brings the counts up to date. kInvalidArgument when a token id lies outside
  // [0, vocab_size), naming it and its position; the counts are then reset (the next call
  // recounts). O(tokens appended since the last call) in the steady state.
  Status Update(std::span<const int32_t> prompt, std::span<const int32_t> generated,
                int32_t vocab_size);

  // Forgets everything; the next Update recounts. O(distinct tokens seen).
  void Reset();

  // Every distinct token id of the prompt and the output, in order of first appearance.
  std::span<const int32_t> seen_tokens() const { return seen_tokens_; }
  // Occurrences of `token` in the output (not the prompt). Requires 0 <= token < vocab size.
  uint32_t generated_count(int32_t token) const { return generated_count_[token]; }
  bool in_prompt(int32_t token) const { return in_prompt_[token] != 0; }

 private:
  Status Count(std::span<const int32_t> tokens, size_t first, bool from_prompt,
               int32_t vocab_size);

  std::vector<uint32_t> generated_count_;  // [vocab]
  std::vector<uint8_t> in_prompt_;         // [vocab]; 0 or 1
  std::vector<int32_t> seen_tokens_;
  size_t prompt_counted_ = 0;              // prompt tokens counted (all of them, or 0)
  size_t generated_counted_ = 0;           // leading output tokens counted
  bool has_counts_ = false;                // false until an Update succeeds
};

}  // namespace bmad::sampling
