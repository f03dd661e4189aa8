// The little UTF-8 the tokenizer needs: llama.cpp's way of cutting text into characters, and a
// strict scanner for producing valid UTF-8 from token bytes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace bmad::tokenizer {

// U+FFFD REPLACEMENT CHARACTER, what invalid or truncated byte sequences become in output.
inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";

// The length llama.cpp's SentencePiece tokenizer gives the character starting with `lead`,
// from its top four bits alone: 1 for 0x00-0xBF (continuation bytes included), 2 for 0xC0-0xDF,
// 3 for 0xE0-0xEF, 4 for 0xF0-0xFF. It never looks at the following bytes, so invalid input is
// cut exactly as llama.cpp cuts it.
size_t SentencePieceCharLength(unsigned char lead);

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

// A JSON string literal (quotes included) for arbitrary bytes: invalid UTF-8 becomes U+FFFD
// first, since JSON text must be Unicode.
std::string JsonString(std::string_view bytes);

}  // namespace bmad::tokenizer
