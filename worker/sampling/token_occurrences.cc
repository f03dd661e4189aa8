#include "worker/sampling/token_occurrences.h"

#include <string>

namespace bmad::sampling {

Status TokenOccurrences::Update(std::span<const int32_t> prompt,
                                std::span<const int32_t> generated, int32_t vocab_size) {
  if (vocab_size <= 0) {
    Reset();
    return InvalidArgument("vocabulary size must be positive; got " + std::to_string(vocab_size));
  }
  const bool same_history = has_counts_ &&
                            generated_count_.size() == static_cast<size_t>(vocab_size) &&
                            prompt.size() == prompt_counted_ &&
                            generated.size() >= generated_counted_;
  if (!same_history) {
    Reset();
    if (generated_count_.size() != static_cast<size_t>(vocab_size)) {
      // Only on the first call, or if the vocabulary changed under a running sequence.
      generated_count_.assign(static_cast<size_t>(vocab_size), 0);
      in_prompt_.assign(static_cast<size_t>(vocab_size), 0);
    }
    if (Status s = Count(prompt, 0, /*from_prompt=*/true, vocab_size); !s.ok()) {
      Reset();
      return s.WithContext("prompt");
    }
    prompt_counted_ = prompt.size();
  }
  if (Status s = Count(generated, generated_counted_, /*from_prompt=*/false, vocab_size);
      !s.ok()) {
    Reset();
    return s.WithContext("generated tokens");
  }
  generated_counted_ = generated.size();
  has_counts_ = true;
  return Status::Ok();
}

void TokenOccurrences::Reset() {
  // Clearing only what was touched keeps a reset O(distinct tokens), not O(vocab).
  for (int32_t token : seen_tokens_) {
    generated_count_[static_cast<size_t>(token)] = 0;
    in_prompt_[static_cast<size_t>(token)] = 0;
  }
  seen_tokens_.clear();
  prompt_counted_ = 0;
  generated_counted_ = 0;
  has_counts_ = false;
}

Status TokenOccurrences::Count(std::span<const int32_t> tokens, size_t first, bool from_prompt,
                               int32_t vocab_size) {
  for (size_t i = first; i < tokens.size(); ++i) {
    const int32_t token = tokens[i];
    if (token < 0 || token >= vocab_size) {
      return InvalidArgument("token id " + std::to_string(token) + " at position " +
                             std::to_string(i) + " is outside the vocabulary [0, " +
                             std::to_string(vocab_size) + ")");
    }
    const auto index = static_cast<size_t>(token);
    if (in_prompt_[index] == 0 && generated_count_[index] == 0) seen_tokens_.push_back(token);
    if (from_prompt) {
      in_prompt_[index] = 1;
    } else {
      ++generated_count_[index];
    }
  }
  return Status::Ok();
}

}  // namespace bmad::sampling
