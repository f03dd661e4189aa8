// The little UTF-8 the tokenizer needs: llama.cpp's way of cutting text into characters, the
// strict scanner of common/utf8.h, and JSON string literals of token bytes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/utf8.h"

namespace bmad::tokenizer {

// The length llama.cpp's SentencePiece tokenizer gives the character starting with `lead`,
// from its top four bits alone: 1 for 0x00-0xBF (continuation bytes included), 2 for 0xC0-0xDF,
// 3 for 0xE0-0xEF, 4 for 0xF0-0xFF. It never looks at the following bytes, so invalid input is
// cut exactly as llama.cpp cuts it.
size_t SentencePieceCharLength(unsigned char lead);

// Strict scanning and U+FFFD replacement (common/utf8.h), under this namespace too.
using bmad::kReplacementCharacter;
using bmad::ScanUtf8;
using bmad::ToValidUtf8;
using bmad::Utf8Scan;
using bmad::Utf8Status;

// A JSON string literal (quotes included) for arbitrary bytes: invalid UTF-8 becomes U+FFFD
// first, since JSON text must be Unicode.
std::string JsonString(std::string_view bytes);

}  // namespace bmad::tokenizer
