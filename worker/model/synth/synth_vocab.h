// The vocabulary of a synthesized model: copied exactly from another GGUF file, or generated.
//
// The generated one is a byte-level SentencePiece ("llama") vocabulary whose pieces are real
// strings, so text tokenizes into multi-character pieces, not only into byte fallbacks:
//   0 <unk> (UNKNOWN), 1 <s> and 2 </s> (CONTROL), 3..258 <0x00>..<0xFF> (BYTE), then NORMAL
//   pieces with decreasing scores: "▁" (U+2581, SentencePiece's space), the printable ASCII
//   characters, "▁" + each letter, then every lowercase string of length 2, 3, ... with and
//   without a leading "▁", until the vocabulary is full. Every piece of length n > 1 is the
//   concatenation of two shorter pieces in the vocabulary, so the tokenizer's merges reach it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/model/gguf/gguf_file.h"
#include "worker/model/gguf/gguf_writer.h"

namespace bmad::synth {

// llama.cpp's token attributes as stored in tokenizer.ggml.token_type.
enum TokenType : int32_t {
  kTokenNormal = 1,
  kTokenUnknown = 2,
  kTokenControl = 3,
  kTokenByte = 6,
};

inline constexpr int64_t kMinGeneratedVocabulary = 259;  // <unk>, <s>, </s> and 256 bytes
inline constexpr int64_t kMaxVocabulary = int64_t{1} << 20;

struct Vocabulary {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;  // TokenType values
};

// The generated vocabulary of exactly `size` tokens; kInvalidArgument outside
// [kMinGeneratedVocabulary, kMaxVocabulary].
Result<Vocabulary> MakeByteLevelVocabulary(int64_t size);

// Sets tokenizer.ggml.{model, tokens, scores, token_type, bos_token_id, eos_token_id,
// unknown_token_id} (model "llama", ids 1, 2, 0).
void SetVocabulary(const Vocabulary& vocab, gguf::GgufWriter& writer);

// Copies every tokenizer.* key of `source` with its exact type and returns the number of
// tokens. kInvalidArgument naming the file when tokenizer.ggml.tokens is missing or is not an
// array of strings, or holds more than kMaxVocabulary tokens.
Result<int64_t> CopyVocabulary(const gguf::GgufFile& source, gguf::GgufWriter& writer);

}  // namespace bmad::synth
