#include "worker/model/tokenizer/byte_level.h"

#include <array>

#include "worker/model/tokenizer/unicode_classes.h"

namespace bmad::tokenizer {
namespace {

bool StandsForItself(int byte) {
  return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
         (byte >= 0xAE && byte <= 0xFF);
}

struct Alphabet {
  std::array<uint32_t, 256> code_point_of_byte{};
  std::array<int16_t, 0x144> byte_of_code_point{};  // -1: not in the alphabet

  Alphabet() {
    byte_of_code_point.fill(-1);
    uint32_t next_shifted = 0x100;
    for (int byte = 0; byte < 256; ++byte) {
      const uint32_t cp = StandsForItself(byte) ? static_cast<uint32_t>(byte) : next_shifted++;
      code_point_of_byte[byte] = cp;
      byte_of_code_point[cp] = static_cast<int16_t>(byte);
    }
  }
};

const Alphabet& TheAlphabet() {
  static const Alphabet alphabet;
  return alphabet;
}

}  // namespace

uint32_t ByteLevelCodePoint(uint8_t byte) { return TheAlphabet().code_point_of_byte[byte]; }

std::string ByteLevelEncode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) AppendUtf8(ByteLevelCodePoint(static_cast<uint8_t>(c)), out);
  return out;
}

std::string ByteLevelDecode(std::string_view text) {
  const Alphabet& alphabet = TheAlphabet();
  std::string out;
  out.reserve(text.size());
  for (uint32_t cp : DecodeCodePoints(text)) {
    if (cp >= alphabet.byte_of_code_point.size() || alphabet.byte_of_code_point[cp] < 0) {
      AppendUtf8(cp, out);
      continue;
    }
    out.push_back(static_cast<char>(alphabet.byte_of_code_point[cp]));
  }
  return out;
}

}  // namespace bmad::tokenizer
