// Strict UTF-8 scanning, and making arbitrary bytes valid UTF-8: for text that leaves the
// process where UTF-8 is required (tokenizer output, JSON, Prometheus label values).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace bmad {

// U+FFFD REPLACEMENT CHARACTER, what invalid or truncated byte sequences become in output.
inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";

enum class Utf8Status {
  kComplete,    // a valid character of `length` bytes
  kIncomplete,  // all of the input is a valid start of a character that needs more bytes
  kInvalid,     // `length` bytes (at least 1) that can never be a character: one U+FFFD
};

struct Utf8Scan {
  Utf8Status status;
  size_t length;
};

// Classifies the character at the start of `bytes` (not empty) by the Unicode rules: no
// overlong forms, no surrogates, nothing above U+10FFFF. An invalid sequence's length is its
// maximal valid prefix (at least 1 byte), the "substitution of maximal subparts" practice.
Utf8Scan ScanUtf8(std::string_view bytes);

// `bytes` with every invalid or truncated sequence replaced by U+FFFD.
std::string ToValidUtf8(std::string_view bytes);

// Appends each of `bytes` as the text \xNN (upper-case hex): for bytes a text must not carry as
// they are but a reader should still see.
void AppendHexEscaped(std::string& out, std::string_view bytes);

// `text` between single quotes for an error message, with control bytes (NUL, ESC, ...), DEL and
// invalid UTF-8 written as \xNN: text read from a file or a client must neither end the message
// early (a NUL through printf) nor move a terminal's cursor.
std::string QuotedText(std::string_view text);

// Whether `text` is valid UTF-8 without control bytes or DEL (what QuotedText leaves as it is).
bool IsPrintableText(std::string_view text);

}  // namespace bmad
