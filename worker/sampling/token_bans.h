// vLLM's allowed_token_ids and bad_words for one sequence: the tokens its next draw may not be.
//
//   allowed_token_ids: when not empty, every token outside the set is banned at every step
//     (ending tokens too, unless listed: the output then runs to max_tokens, as in vLLM).
//   bad_words: token sequences; the last token of each is banned whenever the output so far
//     ends with the sequence's other tokens, so no sequence is ever generated whole. A one-token
//     sequence is banned at every step. Only the output is looked at, not the prompt (vLLM's
//     rule: a word the prompt ends half-way is not completed by the ban).
//
// Bans write -inf over scores (the Sampler's processed logits): logprobs, computed from the raw
// logits, are not changed by them. When every token is banned the Sampler reports it.
//
// Cost per step: allowed_token_ids one pass over the vocabulary (the set is a bitmap of V bits,
// made on first use); bad_words, per sequence, a comparison of the output's tail that stops at
// the first mismatch. Memory: the bitmap and the sequences.
//
// Thread-safety: none; one per sequence (inside its Sampler).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace bmad::sampling {

class TokenBans {
 public:
  TokenBans() = default;
  // Ids outside the vocabulary (validation refuses them) are ignored when applied.
  TokenBans(std::vector<uint32_t> allowed_token_ids, std::vector<std::vector<uint32_t>> bad_words);

  bool active() const { return !allowed_.empty() || !bad_words_.empty(); }

  // Sets the score of every token the next draw may not be to -inf; `generated` is the output
  // so far.
  void Apply(std::span<float> scores, std::span<const int32_t> generated);

 private:
  bool EndsWith(std::span<const int32_t> generated, std::span<const uint32_t> prefix) const;

  std::vector<uint32_t> allowed_;
  std::vector<std::vector<uint32_t>> bad_words_;
  std::vector<bool> allowed_bitmap_;  // [V], made on the first Apply (V is known then)
};

}  // namespace bmad::sampling
