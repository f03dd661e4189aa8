// Stop strings over streamed output text.
//
// The engine feeds the text of each new token as it is detokenized; the matcher returns what is
// safe to send to the client now. Text that might be the beginning of a stop string is held back
// until it either completes one or cannot any more. On a hit the output ends right before the stop
// string (OpenAI semantics: the stop string itself is not sent), or right after it when the
// matcher includes stop strings (vLLM's include_stop_str_in_output), and nothing after that is
// ever returned.
//
// Which hit: the stop string that is complete first in the stream, i.e. the occurrence with the
// smallest end offset; among occurrences ending at the same offset (one is a suffix of another,
// "abc" and "bc"), the one that starts first. That is what a server checking after every token
// sees, and it does not depend on how the text is split into Feed calls. It differs from "the
// occurrence that starts first" only when one stop string contains another inside it: with stops
// "b" and "abc", the text "abc" stops at "b" (output "a"), because generation would have stopped
// there before "c" existed.
//
// UTF-8: text is held back starting at a character boundary, so holding back never splits a
// character (stop strings that passed ValidateSamplingParams are valid UTF-8, so a possible stop
// string can only begin where a character begins). Invalid UTF-8 in the text or the stop strings
// is matched byte for byte and never breaks anything.
//
// Cost per Feed: O((held + new bytes) * total stop string bytes) in the worst case; the held text
// is shorter than the longest stop string.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace bmad::sampling {

struct StopFeedResult {
  std::string text;         // safe to emit now (possibly empty)
  bool stopped = false;     // a stop string was hit: `text` ends right before it (right after it
                            // with include_stop), and this is final
  int32_t stop_index = -1;  // when stopped: which stop string (index in the constructor's list)
};

class StopStringMatcher {
 public:
  // Empty strings in `stop_strings` are ignored (validation rejects them before they get here).
  // With no non-empty stop strings every Feed returns its input unchanged. `include_stop`: the
  // stop string that ends the output is returned as its end.
  explicit StopStringMatcher(std::vector<std::string> stop_strings, bool include_stop = false);

  // Adds the next piece of output text. After a hit, every later call returns empty text with
  // stopped = true and the same stop_index.
  StopFeedResult Feed(std::string_view new_text);

  // Adds output text in which no stop string may end yet (before min_tokens allows stops): one
  // that ends in it is none; one that begins in it and is completed by a later Feed is, and the
  // output ends where it begins (vLLM's semantics). So a possible stop string's beginning is held
  // back here as in Feed, and never stopped on. Call only before any Feed.
  StopFeedResult FeedUnchecked(std::string_view new_text);

  // Generation ended for another reason (length, stop token, cancel): returns the held-back text
  // and holds nothing afterwards. Empty after a hit.
  std::string Flush();

  bool stopped() const { return stop_index_ >= 0; }
  // The stop string of that index (StopFeedResult::stop_index); "" for an index out of range.
  std::string stop_string(int32_t index) const {
    return index >= 0 && static_cast<size_t>(index) < stop_strings_.size() ? stop_strings_[static_cast<size_t>(index)]
                                                                          : std::string();
  }
  // Bytes held back now: shorter than the longest stop string (for valid UTF-8 text).
  size_t held_bytes() const { return held_.size(); }

 private:
  struct Hit {
    size_t start;
    int32_t index;
  };
  // The first-completed occurrence of a stop string in held_, if any.
  bool FindFirstCompleted(Hit* hit) const;
  // Where held_ must start being held back: the earliest offset whose suffix is a proper prefix
  // of some stop string, moved back to a UTF-8 character boundary; held_.size() if none.
  size_t HoldBackStart() const;
  // Returns held_ up to HoldBackStart() and keeps the rest.
  std::string Release();

  std::vector<std::string> stop_strings_;
  bool include_stop_ = false;
  size_t longest_ = 0;              // bytes of the longest stop string
  bool starts_stop_[256] = {};      // bytes that begin some stop string
  std::string held_;
  size_t unchecked_ = 0;            // bytes at the front of held_ fed by FeedUnchecked
  int32_t stop_index_ = -1;
};

}  // namespace bmad::sampling
