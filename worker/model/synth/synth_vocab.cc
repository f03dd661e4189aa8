#include "worker/model/synth/synth_vocab.h"

#include <cstdio>
#include <string_view>

#include "worker/model/tokenizer/tokenizer.h"

namespace bmad::synth {
namespace {

constexpr char kSpace[] = "\xe2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's space

// Appends the normal pieces in order until `vocab` holds `size` tokens.
class PieceFiller {
 public:
  PieceFiller(Vocabulary& vocab, size_t size) : vocab_(vocab), size_(size) {}

  bool full() const { return vocab_.tokens.size() >= size_; }
  void Add(std::string piece) {
    if (full()) return;
    vocab_.tokens.push_back(std::move(piece));
    // Decreasing scores: earlier (shorter, more common) pieces first, as SentencePiece orders.
    vocab_.scores.push_back(-static_cast<float>(rank_++));
    vocab_.types.push_back(kTokenNormal);
  }

 private:
  Vocabulary& vocab_;
  size_t size_;
  int64_t rank_ = 0;
};

// Every lowercase string of `length` letters, in lexicographic order, passed to `emit`.
template <typename Emit>
void ForEachLowercaseString(int length, PieceFiller& filler, Emit emit) {
  std::string s(static_cast<size_t>(length), 'a');
  while (!filler.full()) {
    emit(s);
    int i = length - 1;
    while (i >= 0 && s[static_cast<size_t>(i)] == 'z') s[static_cast<size_t>(i--)] = 'a';
    if (i < 0) return;
    ++s[static_cast<size_t>(i)];
  }
}

}  // namespace

Result<Vocabulary> MakeByteLevelVocabulary(int64_t size) {
  if (size < kMinGeneratedVocabulary || size > kMaxVocabulary) {
    return InvalidArgument("a generated vocabulary needs " +
                           std::to_string(kMinGeneratedVocabulary) + " to " +
                           std::to_string(kMaxVocabulary) + " tokens (<unk>, <s>, </s> and the "
                           "256 byte tokens come first), got " + std::to_string(size));
  }
  Vocabulary vocab;
  vocab.tokens.reserve(static_cast<size_t>(size));
  vocab.scores.reserve(static_cast<size_t>(size));
  vocab.types.reserve(static_cast<size_t>(size));
  auto add_special = [&](std::string piece, int32_t type) {
    vocab.tokens.push_back(std::move(piece));
    vocab.scores.push_back(0.0f);
    vocab.types.push_back(type);
  };
  add_special("<unk>", kTokenUnknown);
  add_special("<s>", kTokenControl);
  add_special("</s>", kTokenControl);
  for (int b = 0; b < 256; ++b) {
    char piece[8];
    std::snprintf(piece, sizeof piece, "<0x%02X>", b);
    add_special(piece, kTokenByte);
  }

  PieceFiller filler(vocab, static_cast<size_t>(size));
  filler.Add(kSpace);
  for (char c = '!'; c <= '~'; ++c) filler.Add(std::string(1, c));
  for (char c = 'a'; c <= 'z'; ++c) filler.Add(kSpace + std::string(1, c));
  for (char c = 'A'; c <= 'Z'; ++c) filler.Add(kSpace + std::string(1, c));
  // Length n adds 2 * 26^n pieces, so even kMaxVocabulary is full by length 5.
  for (int length = 2; !filler.full(); ++length) {
    ForEachLowercaseString(length, filler, [&](const std::string& s) {
      filler.Add(kSpace + s);
      filler.Add(s);
    });
  }
  return vocab;
}

void SetVocabulary(const Vocabulary& vocab, gguf::GgufWriter& writer) {
  writer.SetString("tokenizer.ggml.model", "llama");
  writer.SetStringArray("tokenizer.ggml.tokens", vocab.tokens);
  writer.SetFloat32Array("tokenizer.ggml.scores", vocab.scores);
  writer.SetInt32Array("tokenizer.ggml.token_type", vocab.types);
  writer.SetUint32("tokenizer.ggml.bos_token_id", 1);
  writer.SetUint32("tokenizer.ggml.eos_token_id", 2);
  writer.SetUint32("tokenizer.ggml.unknown_token_id", 0);
}

Result<int64_t> CopyVocabulary(const gguf::GgufFile& source, gguf::GgufWriter& writer) {
  const gguf::MetadataValue* tokens = source.Find("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->type != gguf::ValueType::kArray ||
      tokens->array_type != gguf::ValueType::kString) {
    return InvalidArgument(source.path() +
                           ": has no vocabulary (tokenizer.ggml.tokens, an array of strings)");
  }
  const auto count = static_cast<int64_t>(tokens->array.size());
  if (count == 0 || count > kMaxVocabulary) {
    return InvalidArgument(source.path() + ": vocabulary of " + std::to_string(count) +
                           " tokens (1 to " + std::to_string(kMaxVocabulary) + " supported)");
  }
  // The copy must be a vocabulary the loader takes (distinct texts, byte tokens, merges): a
  // model synthesized around one that is not would be refused only when served.
  BMAD_RETURN_IF_ERROR(tokenizer::LoadTokenizer(source).status());
  constexpr std::string_view kPrefix = "tokenizer.";
  for (const auto& [key, value] : source.metadata()) {
    if (key.compare(0, kPrefix.size(), kPrefix) != 0) continue;
    BMAD_RETURN_IF_ERROR(writer.SetValue(key, value).WithContext(source.path()));
  }
  return count;
}

}  // namespace bmad::synth
