#include "worker/sampling/stop_string_matcher.h"

#include <algorithm>
#include <utility>

namespace bmad::sampling {
namespace {

bool IsUtf8Continuation(char byte) { return (static_cast<uint8_t>(byte) & 0xC0) == 0x80; }

}  // namespace

StopStringMatcher::StopStringMatcher(std::vector<std::string> stop_strings, bool include_stop)
    : stop_strings_(std::move(stop_strings)), include_stop_(include_stop) {
  for (const std::string& stop : stop_strings_) {
    if (stop.empty()) continue;
    longest_ = std::max(longest_, stop.size());
    starts_stop_[static_cast<uint8_t>(stop[0])] = true;
  }
}

StopFeedResult StopStringMatcher::Feed(std::string_view new_text) {
  StopFeedResult result;
  if (stopped()) {
    result.stopped = true;
    result.stop_index = stop_index_;
    return result;
  }
  if (longest_ == 0) {
    result.text.assign(new_text);
    return result;
  }
  held_.append(new_text);

  // Invariant: no stop string starts before held_ (the emitted text holds none, and nothing that
  // could still become one was emitted), so searching held_ alone finds every occurrence; none of
  // held_ was emitted. Occurrences ending in the first unchecked_ bytes do not count.
  Hit hit{0, -1};
  if (FindFirstCompleted(&hit)) {
    const size_t end = include_stop_ ? hit.start + stop_strings_[static_cast<size_t>(hit.index)].size()
                                     : hit.start;
    result.text.assign(held_, 0, end);
    result.stopped = true;
    result.stop_index = hit.index;
    stop_index_ = hit.index;
    held_.clear();
    unchecked_ = 0;
    return result;
  }
  result.text = Release();
  return result;
}

StopFeedResult StopStringMatcher::FeedUnchecked(std::string_view new_text) {
  StopFeedResult result;
  if (longest_ == 0 || stopped()) {
    result.text.assign(new_text);
    return result;
  }
  held_.append(new_text);
  unchecked_ = held_.size();
  result.text = Release();
  return result;
}

std::string StopStringMatcher::Release() {
  const size_t hold = HoldBackStart();
  std::string out = held_.substr(0, hold);
  held_.erase(0, hold);
  unchecked_ = unchecked_ > hold ? unchecked_ - hold : 0;
  return out;
}

std::string StopStringMatcher::Flush() {
  std::string rest = std::move(held_);
  held_.clear();
  unchecked_ = 0;
  return rest;
}

bool StopStringMatcher::FindFirstCompleted(Hit* hit) const {
  bool found = false;
  size_t best_end = 0;
  for (size_t i = 0; i < stop_strings_.size(); ++i) {
    const std::string& stop = stop_strings_[i];
    if (stop.empty()) continue;
    // The first occurrence of a string is also its first to complete (same length). One that
    // ends in unchecked text (FeedUnchecked) does not count: it was no stop then.
    const size_t from = unchecked_ >= stop.size() ? unchecked_ - stop.size() + 1 : 0;
    const size_t start = held_.find(stop, from);
    if (start == std::string::npos) continue;
    const size_t end = start + stop.size();
    if (!found || end < best_end || (end == best_end && start < hit->start)) {
      found = true;
      best_end = end;
      *hit = Hit{start, static_cast<int32_t>(i)};
    }
  }
  return found;
}

size_t StopStringMatcher::HoldBackStart() const {
  const size_t n = held_.size();
  // A proper prefix of a stop string is at most longest_ - 1 bytes long.
  size_t start = n > longest_ - 1 ? n - (longest_ - 1) : 0;
  for (; start < n; ++start) {
    if (!starts_stop_[static_cast<uint8_t>(held_[start])]) continue;
    const size_t tail = n - start;
    const bool is_prefix = std::any_of(
        stop_strings_.begin(), stop_strings_.end(), [&](const std::string& stop) {
          return stop.size() > tail && stop.compare(0, tail, held_, start, tail) == 0;
        });
    if (is_prefix) break;
  }
  // Only invalid UTF-8 can put a possible stop string inside a character; never split one.
  while (start > 0 && start < n && IsUtf8Continuation(held_[start])) --start;
  return start;
}

}  // namespace bmad::sampling
