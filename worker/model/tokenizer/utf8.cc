#include "worker/model/tokenizer/utf8.h"

#include <cstdio>

namespace bmad::tokenizer {

size_t SentencePieceCharLength(unsigned char lead) {
  static constexpr size_t kLengthByHighNibble[16] = {1, 1, 1, 1, 1, 1, 1, 1,
                                                     1, 1, 1, 1, 2, 2, 3, 4};
  return kLengthByHighNibble[lead >> 4];
}

std::string JsonString(std::string_view bytes) {
  std::string out = "\"";
  for (char c : ToValidUtf8(bytes)) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned>(c));
          out += escaped;
        } else {
          out.push_back(c);
        }
    }
  }
  out += "\"";
  return out;
}

}  // namespace bmad::tokenizer
