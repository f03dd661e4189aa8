// The vocabulary as bytes: what each token adds to the text (tokenizer::Tokenizer::TokenPiece;
// empty for control tokens), for constrained decoding. One flat buffer, built once per model and
// shared, read-only, by every request that needs it. It also knows which tokens can stand inside
// a JSON string as they are (most of a vocabulary), so a constraint need not read them there,
// and the tokens in the order of their texts with the prefix each shares with the one before
// (a token trie, flattened), so a constraint can read a shared prefix once.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <span>
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
    by_text_.resize(size());
    std::iota(by_text_.begin(), by_text_.end(), 0);
    std::stable_sort(by_text_.begin(), by_text_.end(), [&](int32_t a, int32_t b) { return text(a) < text(b); });
    shared_prefix_.assign(size(), 0);
    sorted_offsets_.reserve(size() + 1);
    sorted_offsets_.push_back(0);
    for (size_t k = 0; k < size(); ++k) {
      const std::string_view here = text(by_text_[k]);
      sorted_bytes_ += here;
      sorted_offsets_.push_back(sorted_bytes_.size());
      if (k == 0) continue;
      const std::string_view before = text(by_text_[k - 1]);
      const auto differ = std::mismatch(before.begin(), before.end(), here.begin(), here.end());
      shared_prefix_[k] = static_cast<uint32_t>(differ.second - here.begin());
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
  // Every token id, ordered by text (bytes compared as unsigned; equal texts by id).
  std::span<const int32_t> by_text() const { return by_text_; }
  // shared_prefix()[k]: the bytes by_text()[k]'s text shares with by_text()[k - 1]'s at its
  // start (0 for k = 0). Tokens k..j share their first min(shared_prefix()[k+1..j]) bytes.
  std::span<const uint32_t> shared_prefix() const { return shared_prefix_; }
  // text(by_text()[k]), from a copy of the texts in that order: a walk in text order reads
  // memory in order.
  std::string_view sorted_text(size_t k) const {
    return std::string_view(sorted_bytes_).substr(sorted_offsets_[k], sorted_offsets_[k + 1] - sorted_offsets_[k]);
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
  std::vector<int32_t> by_text_;
  std::vector<uint32_t> shared_prefix_;
  std::string sorted_bytes_;
  std::vector<size_t> sorted_offsets_;
};

}  // namespace bmad::sampling
