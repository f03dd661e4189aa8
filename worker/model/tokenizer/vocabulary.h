// A tokenizer vocabulary as a GGUF file stores it under `tokenizer.ggml.*`, SentencePiece-style
// ("llama": Llama-2, Mistral, ...) or byte-level BPE ("gpt2": Llama-3, Qwen2, ...), with
// llama.cpp's defaults and clean-ups applied, so the Tokenizer built from it reproduces
// llama.cpp's ids.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/model/gguf/gguf_file.h"
#include "worker/model/tokenizer/pre_tokenizer.h"

namespace bmad::tokenizer {

// GGUF's `tokenizer.ggml.model`.
enum class TokenizerModel {
  kSentencePiece,     // "llama": pieces with scores, U+2581 for spaces, <0xHH> byte fallback
  kBytePairEncoding,  // "gpt2": byte-level texts (see byte_level.h) merged by ranked pairs
};

// GGUF's `tokenizer.ggml.token_type` values (llama.cpp's `llama_token_type`).
enum class TokenType : int32_t {
  kUndefined = 0,    // (a value outside 0..6 is refused as a broken file; llama.cpp took it as this)
  kNormal = 1,       // a piece of text; U+2581 stands for a space
  kUnknown = 2,      // <unk>
  kControl = 3,      // <s>, </s>: structure, never text
  kUserDefined = 4,  // matched verbatim in the input before splitting, printed verbatim
  kUnused = 5,
  kByte = 6,  // "<0xHH>": one raw byte, the fallback for text no piece covers
};

// No token (llama.cpp's LLAMA_TOKEN_NULL).
inline constexpr int32_t kNoToken = -1;

struct Vocabulary {
  TokenizerModel model = TokenizerModel::kSentencePiece;
  // BPE only: the pre-tokenizer (`tokenizer.ggml.pre`) and the merges (`tokenizer.ggml.merges`),
  // each "left right", the earlier the higher its priority.
  PreTokenizer pre_tokenizer = PreTokenizer::kLlama3;
  std::vector<std::string> merges;

  // Indexed by token id; the three have the same length.
  std::vector<std::string> texts;
  std::vector<float> scores;  // merge priority: higher merges first
  std::vector<TokenType> types;

  // Special ids: in range, or kNoToken where the vocabulary has none.
  int32_t bos_id = 1;
  int32_t eos_id = 2;
  int32_t unk_id = 0;
  int32_t pad_id = kNoToken;
  int32_t eot_id = kNoToken;  // end of turn (chat models)
  int32_t eom_id = kNoToken;  // end of message (tool calls)

  // Tokens besides eos that end generation (llama.cpp's `special_eog_ids`, found by id keys
  // and by well-known texts such as "<|im_end|>"). May include eos.
  std::vector<int32_t> end_of_generation_ids;
  // Special tokens that swallow the whitespace after them when found in the input (llama.cpp
  // sets this RSTRIP attribute for Phi-3 models only). Sorted, unique.
  std::vector<int32_t> rstrip_ids;

  // llama.cpp's defaults for `tokenizer.ggml.model = llama` when the keys are absent (BPE's
  // are set by LoadVocabulary).
  bool add_bos = true;
  bool add_eos = false;
  bool add_space_prefix = true;
  // Whether decoding cleans up spaces before punctuation and English contractions (Hugging
  // Face's clean_up_tokenization_spaces; llama.cpp's clean_spaces): on for the Llama-3 BPE
  // family, off for Qwen2 and for SentencePiece vocabularies.
  bool clean_spaces = false;

  int32_t size() const { return static_cast<int32_t>(texts.size()); }
};

// Checks what the Tokenizer relies on: 1 to 2^31-1 tokens; equal lengths of texts, scores and
// types; non-empty, unique texts; no NaN score; byte tokens spelled "<0xHH>"; special ids in
// range or kNoToken; a bos/eos id when add_bos/add_eos; BPE merges of two non-empty parts
// split by a space. kInvalidArgument naming the first problem.
Status ValidateVocabulary(const Vocabulary& vocabulary);

// Reads `tokenizer.ggml.*` the way llama.cpp (b9586) does for a "llama" or "gpt2" tokenizer:
//   - tokens (required), scores (0 when absent), token_type (normal when absent);
//   - an empty token text becomes "[EMPTY_<id>]";
//   - bos/eos/unknown/padding/eot/eom ids, add_bos_token, add_eos_token, add_space_prefix,
//     falling back to the defaults above;
//   - tokens whose text marks an end of turn, message or generation ("<|im_end|>", "<|end|>",
//     "<end_of_turn>", "<|endoftext|>", FIM markers, ...) become kControl, and the
//     end-of-generation ones join end_of_generation_ids;
//   - Phi-3 (general.name contains "phi-3" or "phi3"): its special tokens strip whitespace to
//     their right, except <unk>, <s> and <|endoftext|>;
//   - "gpt2": merges (required) and the pre-tokenizer `tokenizer.ggml.pre`: "llama-bpe",
//     "llama3", "llama-v3", "falcon3", "pixtral" are kLlama3 (add_bos defaults to true),
//     "qwen2", "deepseek-r1-qwen" kQwen2 (add_bos false); no unknown token; bos and eos
//     default to id 11, llama.cpp's GPT-2 leftover, and the files set them.
// Errors, each naming the file and the key:
//   kNotFound          tokenizer.ggml.model, tokenizer.ggml.tokens or (gpt2)
//                      tokenizer.ggml.merges missing;
//   kUnimplemented     a tokenizer model other than "llama" and "gpt2", or a gpt2
//                      pre-tokenizer other than those above, absent included (named);
//   kInvalidArgument   a key of the wrong type;
//   kDataLoss          arrays of different lengths, a special id out of range, a duplicate
//                      token text, a NaN score, a malformed byte token.
// Where llama.cpp warns and carries on (a special id out of range, a longer scores array) or
// aborts (duplicate texts), this is an error: a file like that is broken.
Result<Vocabulary> LoadVocabulary(const gguf::GgufFile& file);

}  // namespace bmad::tokenizer
