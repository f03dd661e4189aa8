#include "worker/sampling/token_bans.h"

#include <limits>
#include <utility>

namespace bmad::sampling {

TokenBans::TokenBans(std::vector<uint32_t> allowed_token_ids, std::vector<std::vector<uint32_t>> bad_words)
    : allowed_(std::move(allowed_token_ids)) {
  for (std::vector<uint32_t>& word : bad_words) {
    if (!word.empty()) bad_words_.push_back(std::move(word));
  }
}

bool TokenBans::EndsWith(std::span<const int32_t> generated, std::span<const uint32_t> prefix) const {
  if (prefix.size() > generated.size()) return false;
  const size_t start = generated.size() - prefix.size();
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (generated[start + i] < 0 || static_cast<uint32_t>(generated[start + i]) != prefix[i]) return false;
  }
  return true;
}

void TokenBans::Apply(std::span<float> scores, std::span<const int32_t> generated) {
  constexpr float kBanned = -std::numeric_limits<float>::infinity();
  if (!allowed_.empty()) {
    if (allowed_bitmap_.size() != scores.size()) {
      allowed_bitmap_.assign(scores.size(), false);
      for (const uint32_t id : allowed_) {
        if (id < scores.size()) allowed_bitmap_[id] = true;
      }
    }
    for (size_t i = 0; i < scores.size(); ++i) {
      if (!allowed_bitmap_[i]) scores[i] = kBanned;
    }
  }
  for (const std::vector<uint32_t>& word : bad_words_) {
    const uint32_t last = word.back();
    if (last >= scores.size()) continue;
    if (EndsWith(generated, std::span<const uint32_t>(word).first(word.size() - 1))) scores[last] = kBanned;
  }
}

}  // namespace bmad::sampling
