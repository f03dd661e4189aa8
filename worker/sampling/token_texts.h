// The vocabulary as bytes: what each token adds to the text (tokenizer::Tokenizer::TokenPiece;
// empty for control tokens), for constrained decoding. One flat buffer, built once per model and
// shared, read-only, by every request that needs it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace bmad::sampling {

class TokenTexts {
 public:
  explicit TokenTexts(const std::vector<std::string>& texts) {
    offsets_.reserve(texts.size() + 1);
    offsets_.push_back(0);
    for (const std::string& t : texts) {
      bytes_ += t;
      offsets_.push_back(bytes_.size());
    }
  }

  size_t size() const { return offsets_.size() - 1; }
  // Token `id`'s text; "" outside the vocabulary.
  std::string_view text(int64_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= size()) return {};
    return std::string_view(bytes_).substr(offsets_[id], offsets_[id + 1] - offsets_[id]);
  }

 private:
  std::string bytes_;
  std::vector<size_t> offsets_;
};

}  // namespace bmad::sampling
