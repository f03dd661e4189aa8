#include "common/utf8.h"

#include <optional>

#include "common/utf8_lead.h"

namespace bmad {

Utf8Scan ScanUtf8(std::string_view bytes) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(bytes[i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return {Utf8Status::kComplete, 1};

  // The allowed range of the second byte depends on the lead (Unicode Table 3-7); this is what
  // excludes overlong forms, surrogates and code points above U+10FFFF.
  const std::optional<Utf8Lead> read = ReadUtf8Lead(lead);
  if (!read) return {Utf8Status::kInvalid, 1};  // a continuation byte, C0, C1 or F5..FF
  const auto length = static_cast<size_t>(read->length);
  const unsigned char second_min = read->second_min, second_max = read->second_max;

  for (size_t i = 1; i < length; ++i) {
    if (i >= bytes.size()) return {Utf8Status::kIncomplete, bytes.size()};
    const unsigned char min = i == 1 ? second_min : 0x80;
    const unsigned char max = i == 1 ? second_max : 0xBF;
    if (byte(i) < min || byte(i) > max) return {Utf8Status::kInvalid, i};
  }
  return {Utf8Status::kComplete, length};
}

void AppendHexEscaped(std::string& out, std::string_view bytes) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out += "\\x";
    out += kHex[b >> 4];
    out += kHex[b & 0xF];
  }
}

namespace {

// The bytes at the start of `text` that QuotedText escapes (0 when none), and in `length` the
// bytes of the character or invalid sequence there.
size_t UnprintableLength(std::string_view text, size_t* length) {
  const auto first = static_cast<unsigned char>(text[0]);
  if (first < 0x20 || first == 0x7F) {
    *length = 1;
    return 1;
  }
  const Utf8Scan scan = ScanUtf8(text);
  *length = scan.length;
  return scan.status == Utf8Status::kComplete ? 0 : scan.length;
}

}  // namespace

std::string QuotedText(std::string_view text) {
  std::string out = "'";
  out.reserve(text.size() + 2);
  for (size_t i = 0, length = 0; i < text.size(); i += length) {
    if (UnprintableLength(text.substr(i), &length) > 0) {
      AppendHexEscaped(out, text.substr(i, length));
    } else {
      out.append(text.substr(i, length));
    }
  }
  out += '\'';
  return out;
}

bool IsPrintableText(std::string_view text) {
  for (size_t i = 0, length = 0; i < text.size(); i += length) {
    if (UnprintableLength(text.substr(i), &length) > 0) return false;
  }
  return true;
}

std::string ToValidUtf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    const Utf8Scan scan = ScanUtf8(bytes.substr(pos));
    if (scan.status == Utf8Status::kComplete) {
      out.append(bytes.substr(pos, scan.length));
    } else {
      out.append(kReplacementCharacter);
    }
    pos += scan.length;
  }
  return out;
}

}  // namespace bmad
