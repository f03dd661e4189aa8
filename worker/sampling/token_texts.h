// The vocabulary as bytes: what each token adds to the text (tokenizer::Tokenizer::TokenPiece;
// empty for control tokens), for constrained decoding. One flat buffer, built once per model and
// shared, read-only, by every request that needs it. It also knows which tokens can stand inside
// a JSON string as they are (most of a vocabulary), so a constraint need not read them there.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "worker/sampling/sampling_params_validation.h"

namespace bmad::sampling {

class TokenTexts {
 public:
  explicit TokenTexts(const std::vector<std::string>& texts) {
    offsets_.reserve(texts.size() + 1);
    offsets_.push_back(0);
    plain_characters_.reserve(texts.size());
    for (const std::string& t : texts) {
      bytes_ += t;
      offsets_.push_back(bytes_.size());
      plain_characters_.push_back(PlainCharacters(t));
    }
  }

  size_t size() const { return offsets_.size() - 1; }
  // Token `id`'s text; "" outside the vocabulary.
  std::string_view text(int64_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= size()) return {};
    return std::string_view(bytes_).substr(offsets_[id], offsets_[id + 1] - offsets_[id]);
  }
  // Token `id`'s text is whole characters, none of them a quote, a backslash or a control
  // character: inside a JSON string (between characters) it is text as it stands.
  bool plain_in_json_string(int64_t id) const { return plain_characters(id) > 0; }
  // The characters (code points) of a token plain in a JSON string, for strings of bounded
  // length; 0 for any other token.
  uint32_t plain_characters(int64_t id) const {
    return id >= 0 && static_cast<size_t>(id) < size() ? plain_characters_[static_cast<size_t>(id)] : 0;
  }

 private:
  static uint16_t PlainCharacters(std::string_view text) {
    if (text.empty() || text.size() > UINT16_MAX || !IsValidUtf8(text)) return 0;
    uint16_t characters = 0;
    for (char c : text) {
      const auto b = static_cast<unsigned char>(c);
      if (b < 0x20 || b == '"' || b == '\\') return 0;
      if ((b & 0xC0) != 0x80) ++characters;  // a lead byte (or ASCII) starts a character
    }
    return characters;
  }

  std::string bytes_;
  std::vector<size_t> offsets_;
  std::vector<uint16_t> plain_characters_;
};

}  // namespace bmad::sampling
