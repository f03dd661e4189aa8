// Writing a chat prompt: template text and the clients' message contents, kept apart so that the
// spans of client text are known (ChatPrompt::client_spans), and the text helpers the formats
// share (Jinja's `| trim` and the newline stripping of Qwen's templates).
//
// Internal to bmad_http_api: the chat template writers' common parts.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "coordinator/http/chat_template.h"

namespace bmad::http::internal {

// Jinja's `| trim`, Python's str.strip(): Unicode whitespace off both ends, whole characters.
std::string_view Strip(std::string_view text);

// '\n' characters off the front and/or the back (Python's lstrip('\n') / rstrip('\n')).
std::string_view StripNewlines(std::string_view text, bool front, bool back);

// "'messages[i]'", as errors name a message.
std::string MessageName(size_t index);

// A prompt being written: template text with `+=`, a client's message with Client(), so that
// the spans of client text are known (ChatPrompt::client_spans).
class ChatText {
 public:
  ChatText& operator+=(std::string_view s) {
    prompt_.text += s;
    return *this;
  }
  ChatText& operator+=(char c) {
    prompt_.text += c;
    return *this;
  }
  void Client(std::string_view s) {
    AddSpan(prompt_.text.size(), s.size());
    if (!s.empty()) last_client_ = {s.data(), prompt_.text.size(), prompt_.text.size() + s.size()};
    prompt_.text += s;
  }
  // `other` appended, its client spans with it.
  ChatText& operator+=(const ChatText& other) {
    AppendRange(other, 0, other.prompt_.text.size());
    return *this;
  }
  // `other` stripped of outer whitespace (Strip), its client spans cut to what remains.
  void AppendStripped(const ChatText& other) {
    const std::string& t = other.prompt_.text;
    const std::string_view kept = Strip(t);
    AppendRange(other, kept.empty() ? 0 : static_cast<size_t>(kept.data() - t.data()), kept.size());
  }
  ChatPrompt Take() && { return std::move(prompt_); }
  // Ends the text right after the client text written last, if that came from `content` (a
  // message's own string): false, and nothing changed, otherwise.
  bool CutAfterLastClientTextOf(std::string_view content) {
    const char* from = last_client_.source;
    if (from == nullptr || from < content.data() || from >= content.data() + content.size()) return false;
    prompt_.text.resize(last_client_.end);
    return true;
  }

 private:
  void AppendRange(const ChatText& other, size_t begin, size_t length) {
    const size_t shift = prompt_.text.size();
    prompt_.text.append(other.prompt_.text, begin, length);
    for (const ChatPrompt::Span& s : other.prompt_.client_spans) {
      const size_t b = std::max(s.begin, begin);
      const size_t e = std::min(s.begin + s.length, begin + length);
      if (b < e) AddSpan(b - begin + shift, e - b);
    }
    const LastClient& last = other.last_client_;
    const size_t b = std::max(last.begin, begin), e = std::min(last.end, begin + length);
    if (last.source != nullptr && b < e) last_client_ = {last.source + (b - last.begin), b - begin + shift, e - begin + shift};
  }
  // A client span at `at`, merged with the last one when adjacent; empty ones are none.
  void AddSpan(size_t at, size_t length) {
    if (length == 0) return;
    auto& spans = prompt_.client_spans;
    if (!spans.empty() && spans.back().begin + spans.back().length == at) {
      spans.back().length += length;
    } else {
      spans.push_back({at, length});
    }
  }

  ChatPrompt prompt_;
  // The client text written last (in text order): where it came from, and [begin, end) in the
  // text; for continue_final_message, which needs to know that it is the final message's.
  struct LastClient {
    const char* source = nullptr;
    size_t begin = 0, end = 0;
  };
  LastClient last_client_;
};


}  // namespace bmad::http::internal
