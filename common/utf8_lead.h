// What a UTF-8 lead byte says of its character under RFC 3629 (Unicode's Table 3-7): how many
// bytes it has and which values the byte after the lead may take, the range that rules out
// overlong forms, surrogates and code points above U+10FFFF. The bytes after that are
// 0x80..0xBF. Shared by every strict UTF-8 reader (tokenizer output, stop strings, JSON).
#pragma once

#include <cstdint>
#include <optional>

namespace bmad {

struct Utf8Lead {
  int length;          // 1..4
  uint8_t second_min;  // for length > 1
  uint8_t second_max;
};

// nullopt for a byte no character starts with: a continuation byte, C0, C1 or F5..FF.
constexpr std::optional<Utf8Lead> ReadUtf8Lead(uint8_t lead) {
  if (lead < 0x80) return Utf8Lead{1, 0x80, 0xBF};
  if (lead >= 0xC2 && lead <= 0xDF) return Utf8Lead{2, 0x80, 0xBF};
  if (lead >= 0xE0 && lead <= 0xEF) {
    return Utf8Lead{3, static_cast<uint8_t>(lead == 0xE0 ? 0xA0 : 0x80), static_cast<uint8_t>(lead == 0xED ? 0x9F : 0xBF)};
  }
  if (lead >= 0xF0 && lead <= 0xF4) {
    return Utf8Lead{4, static_cast<uint8_t>(lead == 0xF0 ? 0x90 : 0x80), static_cast<uint8_t>(lead == 0xF4 ? 0x8F : 0xBF)};
  }
  return std::nullopt;
}

}  // namespace bmad
