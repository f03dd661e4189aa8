// The log-probability of a prompt token under the model's raw distribution at its position (the
// logits of the position before it), with its rank and the most likely alternatives: one entry
// of a request's prompt log-probabilities (vLLM's prompt_logprobs; echo with logprobs).
//
// Raw, as the sampler's logprobs are: log_softmax of the logits, before temperature, penalties
// or any truncation. Not thread-safe: one scorer per thread (it keeps a scratch list).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "common/status.h"

namespace bmad::sampling {

struct PromptTokenLogprob {
  float logprob = 0.0f;
  uint32_t rank = 0;  // 1 + the number of tokens strictly more likely
  std::vector<std::pair<int32_t, float>> top;  // (token, logprob), most likely first, ties to lower ids
};

class PromptLogprobScorer {
 public:
  // `row`: one position's logits over the vocabulary; `token` the prompt's next token;
  // `top_n` alternatives (at most the vocabulary). kInternal for a NaN or +inf logit, or a row
  // without a finite one (the model's fault); kInvalidArgument for a token outside the row.
  Result<PromptTokenLogprob> Score(std::span<const float> row, int32_t token, size_t top_n);

 private:
  std::vector<std::pair<float, int32_t>> heap_;  // the top_n best seen: (logit, id), worst first
};

}  // namespace bmad::sampling
