// The repetition, presence and frequency penalties, applied to one step's logits.
//
//   repetition (Hugging Face / CTRL, Keskar et al. 2019): for each token occurring in the prompt
//     or the output, a positive logit is divided by `repetition`, a non-positive one multiplied.
//     1 is off.
//   presence and frequency (OpenAI), over the output only:
//     logit -= presence * [count > 0] + frequency * count.  0 is off.
// Repetition goes first, as in vLLM. Only the tokens in the history are touched:
// O(distinct history tokens) per step.
#pragma once

#include <span>

#include "worker/sampling/token_occurrences.h"

namespace bmad::sampling {

struct Penalties {
  float repetition = 1.0f;
  float presence = 0.0f;
  float frequency = 0.0f;

  bool active() const { return repetition != 1.0f || presence != 0.0f || frequency != 0.0f; }
};

// Applies `penalties` in place. Requires logits.size() to be the vocabulary size that
// `occurrences` was last updated with. NaN and +inf stay NaN and +inf (the Sampler reports
// them); a finite logit stays finite: one that a tiny or huge repetition penalty would push
// past the float range is held at +-FLT_MAX (the penalty's direction, as far as it can go).
void ApplyPenalties(const Penalties& penalties, const TokenOccurrences& occurrences,
                    std::span<float> logits);

}  // namespace bmad::sampling
