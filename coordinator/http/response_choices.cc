#include "coordinator/http/response_choices.h"

#include <algorithm>

namespace bmad::http {

ResponseChoices::ResponseChoices(std::vector<uint64_t> request_ids)
    : request_ids_(std::move(request_ids)), finished_(request_ids_.size(), false) {}

std::optional<uint32_t> ResponseChoices::IndexOf(uint64_t request_id) const {
  // n is at most a few hundred: a scan beats a map.
  const auto it = std::find(request_ids_.begin(), request_ids_.end(), request_id);
  if (it == request_ids_.end()) return std::nullopt;
  return static_cast<uint32_t>(it - request_ids_.begin());
}

void ResponseChoices::Finish(uint32_t index, const proto::Usage& usage) {
  if (index >= finished_.size() || finished_[index]) return;
  finished_[index] = true;
  if (finished_count_ == 0) {
    usage_ = usage;
  } else {
    usage_.prompt_tokens = std::max(usage_.prompt_tokens, usage.prompt_tokens);
    usage_.completion_tokens += usage.completion_tokens;
    usage_.cached_prompt_tokens = std::min(usage_.cached_prompt_tokens, usage.cached_prompt_tokens);
  }
  ++finished_count_;
}

proto::Usage ResponseChoices::usage() const { return usage_; }

}  // namespace bmad::http
