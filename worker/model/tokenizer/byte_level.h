// GPT-2's byte-level alphabet, in which byte-level BPE vocabularies (Llama-3, Qwen2) spell
// their tokens: every byte is one printable code point, so a token text never holds a raw
// space or control byte. Bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand for themselves; the
// other 68 bytes, in order, become U+0100, U+0101, ... (so a space is "Ġ", U+0120, and a
// newline "Ċ", U+010A).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace bmad::tokenizer {

// The code point that spells `byte`.
uint32_t ByteLevelCodePoint(uint8_t byte);

// `bytes` spelled in the byte-level alphabet (UTF-8 encoded).
std::string ByteLevelEncode(std::string_view bytes);

// The bytes a byte-level token text stands for. A code point outside the alphabet (no real
// vocabulary has one in a normal token) is kept as its UTF-8, where llama.cpp writes an
// "[UNK_BYTE_0x..]" marker instead.
std::string ByteLevelDecode(std::string_view text);

}  // namespace bmad::tokenizer
