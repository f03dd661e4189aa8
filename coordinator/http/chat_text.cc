#include "coordinator/http/chat_text.h"

#include <cstdint>

namespace bmad::http::internal {
namespace {

// Bytes of the whitespace character (as Python's str.isspace() has it: what Jinja's `| trim` and
// str.strip() remove) that begins at text[i]; 0 when none does.
size_t WhitespaceAt(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return i + k < text.size() ? static_cast<uint8_t>(text[i + k]) : 0; };
  const uint8_t b0 = byte(0);
  if ((b0 >= 0x09 && b0 <= 0x0D) || (b0 >= 0x1C && b0 <= 0x20)) return 1;
  if (b0 == 0xC2 && (byte(1) == 0x85 || byte(1) == 0xA0)) return 2;                 // U+0085, U+00A0
  if (b0 == 0xE1 && byte(1) == 0x9A && byte(2) == 0x80) return 3;                   // U+1680
  if (b0 == 0xE2 && byte(1) == 0x80) {  // U+2000-200A, U+2028, U+2029, U+202F
    const uint8_t b2 = byte(2);
    if ((b2 >= 0x80 && b2 <= 0x8A) || b2 == 0xA8 || b2 == 0xA9 || b2 == 0xAF) return 3;
  }
  if (b0 == 0xE2 && byte(1) == 0x81 && byte(2) == 0x9F) return 3;                   // U+205F
  if (b0 == 0xE3 && byte(1) == 0x80 && byte(2) == 0x80) return 3;                   // U+3000
  return 0;
}

}  // namespace

// Jinja's `| trim`, Python's str.strip(): Unicode whitespace off both ends, whole characters.
std::string_view Strip(std::string_view text) {
  size_t begin = 0;
  while (begin < text.size()) {
    const size_t n = WhitespaceAt(text, begin);
    if (n == 0) break;
    begin += n;
  }
  size_t end = text.size();
  while (end > begin) {
    size_t n = 0;
    for (size_t len = 1; len <= 3 && len <= end - begin && n == 0; ++len) {
      if (WhitespaceAt(text, end - len) == len) n = len;
    }
    if (n == 0) break;
    end -= n;
  }
  return text.substr(begin, end - begin);
}

std::string_view StripNewlines(std::string_view text, bool front, bool back) {
  while (front && !text.empty() && text.front() == '\n') text.remove_prefix(1);
  while (back && !text.empty() && text.back() == '\n') text.remove_suffix(1);
  return text;
}

std::string MessageName(size_t index) { return "'messages[" + std::to_string(index) + "]'"; }

}  // namespace bmad::http::internal
