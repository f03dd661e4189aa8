// The pre-tokenizer of byte-level BPE vocabularies: cuts text into the words that BPE merges
// never cross, by the regex a model's tokenizer.json names. Two families are implemented, as
// llama.cpp (b9586) implements them (its unicode_regex_split_custom_llama3 / _qwen2):
//   kLlama3 (GGUF tokenizer.ggml.pre "llama-bpe", "llama3", ...):
//     (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//     ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   kQwen2 ("qwen2", ...): the same with \p{N} for \p{N}{1,3}, one digit per word.
// The contractions' case-insensitivity covers ASCII letters only, as in llama.cpp.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace bmad::tokenizer {

enum class PreTokenizer {
  kLlama3,
  kQwen2,
};

// The words of `text`, in order; their concatenation is `text` with every undecodable byte
// replaced by U+FFFD (see DecodeCodePoints).
std::vector<std::string> SplitWords(std::string_view text, PreTokenizer kind);

}  // namespace bmad::tokenizer
