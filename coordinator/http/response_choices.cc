#include "coordinator/http/response_choices.h"

#include <algorithm>

namespace bmad::http {

ResponseChoices::ResponseChoices(std::vector<uint64_t> request_ids, uint32_t choices_per_prompt)
    : request_ids_(std::move(request_ids)),
      choices_per_prompt_(std::max<uint32_t>(choices_per_prompt, 1)),
      finished_(request_ids_.size(), false) {
  const size_t prompts = (request_ids_.size() + choices_per_prompt_ - 1) / choices_per_prompt_;
  prompt_usage_.resize(prompts);
  prompt_seen_.resize(prompts, false);
}

std::optional<uint32_t> ResponseChoices::IndexOf(uint64_t request_id) const {
  // A few hundred at most: a scan beats a map.
  const auto it = std::find(request_ids_.begin(), request_ids_.end(), request_id);
  if (it == request_ids_.end()) return std::nullopt;
  return static_cast<uint32_t>(it - request_ids_.begin());
}

void ResponseChoices::Finish(uint32_t index, const proto::Usage& usage) {
  if (index >= finished_.size() || finished_[index]) return;
  finished_[index] = true;
  ++finished_count_;
  completion_tokens_ += usage.completion_tokens;
  const size_t prompt = index / choices_per_prompt_;
  proto::Usage& p = prompt_usage_[prompt];
  if (!prompt_seen_[prompt]) {
    prompt_seen_[prompt] = true;
    p = usage;
  } else {
    p.prompt_tokens = std::max(p.prompt_tokens, usage.prompt_tokens);
    p.cached_prompt_tokens = std::min(p.cached_prompt_tokens, usage.cached_prompt_tokens);
  }
}

proto::Usage ResponseChoices::usage() const {
  proto::Usage total;
  total.completion_tokens = completion_tokens_;
  for (size_t i = 0; i < prompt_usage_.size(); ++i) {
    if (!prompt_seen_[i]) continue;
    total.prompt_tokens += prompt_usage_[i].prompt_tokens;
    total.cached_prompt_tokens += prompt_usage_[i].cached_prompt_tokens;
  }
  return total;
}

}  // namespace bmad::http
