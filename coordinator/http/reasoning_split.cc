#include "coordinator/http/reasoning_split.h"

#include <algorithm>

namespace bmad::http {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

// The length of the longest end of `text` that is a proper prefix of `marker`.
size_t PartialMarkerAtEnd(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

// `text` holds an open block: a "<think>" that no "</think>" follows.
bool OpensBlock(std::string_view text) {
  const size_t open = text.rfind(kOpen);
  if (open == std::string_view::npos) return false;
  const size_t close = text.rfind(kClose);
  return close == std::string_view::npos || close < open;
}

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

}  // namespace

bool PromptOpensReasoning(const ChatPrompt& prompt, bool continues_final_message) {
  size_t from = 0;
  if (!prompt.client_spans.empty()) {
    const ChatPrompt::Span& last = prompt.client_spans.back();
    // A message's own "<think>" opens nothing unless the model is to go on from inside it.
    from = continues_final_message ? last.begin : last.begin + last.length;
  }
  return OpensBlock(std::string_view(prompt.text).substr(std::min(from, prompt.text.size())));
}

ReasoningSplit::ReasoningSplit(ReasoningStart start) : start_(start) {}

ReasoningSplit::Parts ReasoningSplit::Add(std::string_view text) {
  Parts parts;
  held_ += text;
  if (state_ == State::kBeforeMarker) {
    const size_t start = start_ == ReasoningStart::kMayOpenAtOnce
                             ? 0
                             : std::find_if_not(held_.begin(), held_.end(), IsSpace) - held_.begin();
    const std::string_view rest = std::string_view(held_).substr(start);
    if (rest.starts_with(kOpen)) {
      held_.erase(0, start + kOpen.size());  // the whitespace before the marker goes with it
      state_ = State::kReasoning;
    } else if (kOpen.starts_with(rest)) {
      return parts;  // whitespace, or the marker's start: wait for more
    } else {
      state_ = start_ == ReasoningStart::kOpen ? State::kReasoning : State::kContent;
    }
  }
  if (state_ == State::kReasoning) {
    if (const size_t close = held_.find(kClose); close != std::string::npos) {
      parts.reasoning = held_.substr(0, close);
      held_.erase(0, close + kClose.size());
      state_ = State::kContent;
    } else {
      const size_t keep = PartialMarkerAtEnd(held_, kClose);
      parts.reasoning = held_.substr(0, held_.size() - keep);
      held_.erase(0, held_.size() - keep);
      return parts;
    }
  }
  parts.content = std::move(held_);
  held_.clear();
  return parts;
}

ReasoningSplit::Parts ReasoningSplit::Finish() {
  Parts parts;
  const bool reasoning =
      state_ == State::kReasoning || (state_ == State::kBeforeMarker && start_ == ReasoningStart::kOpen);
  (reasoning ? parts.reasoning : parts.content) = std::move(held_);
  held_.clear();
  return parts;
}

ReasoningSplit::Parts ReasoningSplit::Whole(ReasoningStart start, std::string_view answer) {
  ReasoningSplit split(start);
  Parts parts = split.Add(answer);
  Parts rest = split.Finish();
  parts.reasoning += rest.reasoning;
  parts.content += rest.content;
  return parts;
}

}  // namespace bmad::http
