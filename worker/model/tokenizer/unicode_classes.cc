#include "worker/model/tokenizer/unicode_classes.h"

#include <algorithm>

namespace bmad::tokenizer {
namespace {

bool InRanges(const CodePointRange* ranges, size_t count, uint32_t code_point) {
  const CodePointRange* end = ranges + count;
  // The first range whose last code point is not below `code_point`.
  const CodePointRange* it = std::lower_bound(
      ranges, end, code_point, [](const CodePointRange& r, uint32_t cp) { return r.last < cp; });
  return it != end && it->first <= code_point;
}

bool IsContinuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

}  // namespace

bool IsUnicodeLetter(uint32_t code_point) {
  if (code_point < 0x80) {
    return (code_point | 0x20) >= 'a' && (code_point | 0x20) <= 'z';
  }
  return InRanges(unicode_data::kLetterRanges, unicode_data::kLetterRangesCount, code_point);
}

bool IsUnicodeNumber(uint32_t code_point) {
  if (code_point < 0x80) return code_point >= '0' && code_point <= '9';
  return InRanges(unicode_data::kNumberRanges, unicode_data::kNumberRangesCount, code_point);
}

bool IsUnicodeWhitespace(uint32_t code_point) {
  switch (code_point) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0x85: case 0xA0:
    case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return code_point >= 0x2000 && code_point <= 0x200A;
  }
}

std::vector<uint32_t> DecodeCodePoints(std::string_view text) {
  std::vector<uint32_t> out;
  out.reserve(text.size());
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  size_t pos = 0;
  while (pos < text.size()) {
    const unsigned char lead = byte(pos);
    size_t length = 0;
    uint32_t value = 0;
    if (lead < 0x80) {
      length = 1;
      value = lead;
    } else if ((lead & 0xE0) == 0xC0) {
      length = 2;
      value = lead & 0x1F;
    } else if ((lead & 0xF0) == 0xE0) {
      length = 3;
      value = lead & 0x0F;
    } else if ((lead & 0xF8) == 0xF0) {
      length = 4;
      value = lead & 0x07;
    }
    bool valid = length > 0 && pos + length <= text.size();
    for (size_t i = 1; valid && i < length; ++i) {
      valid = IsContinuation(byte(pos + i));
      value = (value << 6) | (byte(pos + i) & 0x3F);
    }
    if (!valid) {
      out.push_back(kReplacementCodePoint);
      ++pos;
      continue;
    }
    out.push_back(value > 0x10FFFF ? kReplacementCodePoint : value);
    pos += length;
  }
  return out;
}

void AppendUtf8(uint32_t code_point, std::string& out) {
  if (code_point < 0x80) {
    out.push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

}  // namespace bmad::tokenizer
