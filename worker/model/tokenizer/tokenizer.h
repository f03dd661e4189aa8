// Text <-> token ids for a SentencePiece-style ("llama") or byte-level BPE ("gpt2") vocabulary,
// giving exactly the ids of llama.cpp (b9586) `llama_tokenize` and the text of its
// `llama_token_to_piece` / `llama_detokenize` with special = false.
//
// SentencePiece encoding, in llama.cpp's order:
//   1. Special tokens found in the text are cut out first: with parse_special, every control,
//      unknown and user-defined token text; without it, user-defined ones only. Longer texts
//      are matched first (equal lengths: lower id first).
//   2. Each remaining piece of text gets a leading space when it is the first piece or follows
//      a special token (if add_space_prefix), and its spaces become U+2581.
//   3. Characters are merged pairwise, always the adjacent pair whose concatenation is the
//      highest-scoring token (ties: the leftmost pair), until no pair forms a token.
//   4. A character that is no token becomes its byte tokens <0xHH> (or, with no byte token, the
//      one-byte token, else a byte token spelled <0xhh>, else the unknown token, else nothing;
//      llama.cpp aborts there instead).
//   5. BOS before and EOS after, when add_special and the vocabulary says so.
// Invalid UTF-8 is cut into characters by its lead bytes, as llama.cpp does, and ends up as
// byte tokens; nothing about the input can make Encode fail.
//
// Byte-level BPE encoding (Llama-3, Qwen2):
//   1. Special tokens are cut out as above.
//   2. Each remaining piece of text is cut into words by the pre-tokenizer (pre_tokenizer.h;
//      undecodable bytes become U+FFFD there), and each word is spelled in the byte-level
//      alphabet (byte_level.h). No space prefix.
//   3. With the Llama-3 pre-tokenizer, a word that is a token as a whole is that token
//      (llama.cpp's ignore_merges). Otherwise its characters are merged pairwise, always the
//      adjacent pair with the lowest merge rank (ties: the leftmost), while any pair has one.
//   4. A merged symbol that is no token becomes the tokens of its single bytes that are tokens.
//   5. BOS before and EOS after, as above.
//
// Thread-safety: an immutable object once built; any number of threads may call any method.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "worker/model/gguf/gguf_file.h"
#include "worker/model/tokenizer/vocabulary.h"

namespace bmad::tokenizer {

class Tokenizer {
 public:
  // kInvalidArgument (from ValidateVocabulary) when the vocabulary is inconsistent.
  static Result<Tokenizer> Create(Vocabulary vocabulary);

  // `add_special`: BOS/EOS as the vocabulary asks. `parse_special`: control and unknown token
  // texts in `text` (e.g. "</s>") become those tokens; otherwise they are tokenized as text.
  std::vector<int32_t> Encode(std::string_view text, bool add_special = true,
                              bool parse_special = true) const;

  // A run of `text` given as [begin, begin + length) byte offsets.
  struct TextSpan {
    size_t begin = 0;
    size_t length = 0;
  };
  // Encode with parse_special, except that a control or unknown token text overlapping one of
  // `literal` (non-empty spans, sorted by begin, not overlapping) is tokenized as text there, as parse_special
  // false would: a chat prompt parses the special tokens its template writes but not those in
  // a client's message, which could otherwise forge a turn of another role. Text without such a
  // token gives exactly Encode's ids.
  std::vector<int32_t> EncodeWithLiteralSpans(std::string_view text, bool add_special,
                                              std::span<const TextSpan> literal) const;

  // What the token contributes to text: U+2581 becomes a space, a byte token its raw byte, a
  // BPE token the bytes its byte-level text spells (so a piece may be part of a UTF-8
  // character), user-defined tokens their text; control, unknown, unused and undefined
  // tokens, and ids outside the vocabulary, give "".
  std::string TokenPiece(int32_t id) const;
  // TokenPiece of a sequence's first token as the text shows it: without its leading space
  // when the vocabulary adds one before a text (llama.cpp's rule, which Decode and the
  // streaming detokenizer follow). A view into the tokenizer; "" for an unknown id.
  std::string_view SequenceStartPiece(int32_t id) const;

  // The pieces concatenated, minus one leading space of the first token's piece when the
  // vocabulary adds a space prefix (llama_detokenize with remove_special = unparse_special =
  // false). So Decode(Encode(x, false)) == x (but see clean_spaces below); with a BOS first, its empty piece is the first
  // and the text keeps the space: Decode(Encode(x)) == " " + x, as in llama.cpp. Bytes are
  // returned as the tokens give them, which may be invalid UTF-8 (see StreamingDetokenizer).
  // With the vocabulary's clean_spaces (the Llama-3 family), spaces before punctuation and
  // contractions are then removed, as llama_detokenize and Hugging Face's decode do ("a , b 's"
  // becomes "a, b's"); the streaming detokenizer does not (nor do llama.cpp's pieces).
  std::string Decode(std::span<const int32_t> ids) const;

  // eos and the vocabulary's other end-of-generation tokens; false outside the vocabulary.
  bool IsEndOfGeneration(int32_t id) const;
  // Those tokens, in id order.
  std::vector<int32_t> EndOfGenerationIds() const;

  int32_t bos() const { return vocabulary_.bos_id; }  // kNoToken when there is none
  int32_t eos() const { return vocabulary_.eos_id; }  // kNoToken when there is none
  int32_t vocab_size() const { return vocabulary_.size(); }
  // The most bytes of text one token can stand for (the longest token text), so a text of N
  // bytes encodes to at least N / max_bytes_per_token() tokens: a server can refuse a prompt
  // far too long for its context without tokenizing it. 0 when no such bound holds: a byte
  // with neither a byte token nor an unknown token is dropped, and a token that strips the
  // spaces after it (Phi-3) swallows any number of them.
  size_t max_bytes_per_token() const { return max_bytes_per_token_; }
  const Vocabulary& vocabulary() const { return vocabulary_; }

 private:
  // Hashes string_view and string alike, so lookups of substrings allocate nothing.
  struct TextHash {
    using is_transparent = void;
    size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
  };
  using TextIndex = std::unordered_map<std::string, int32_t, TextHash, std::equal_to<>>;

  // A run of input text, or a special token found in it.
  struct Fragment {
    int32_t token;  // kNoToken for text
    size_t begin;
    size_t length;
  };

  explicit Tokenizer(Vocabulary vocabulary);

  // Step 1 of Encode: splits `text` at the special tokens.
  // A control or unknown token overlapping one of `literal` is not cut out there.
  std::vector<Fragment> SplitAtSpecialTokens(std::string_view text, bool parse_special,
                                             std::span<const TextSpan> literal = {}) const;
  std::vector<int32_t> EncodeFragments(std::string_view text, bool add_special,
                                       const std::vector<Fragment>& fragments) const;
  // SentencePiece steps 2-4 for one piece of text that already has its spaces escaped.
  void EncodeEscapedText(std::string_view text, std::vector<int32_t>& out) const;
  // BPE steps 2-4 for one piece of text.
  void EncodeBytePairText(std::string_view text, std::vector<int32_t>& out) const;
  // BPE step 3-4 for one word spelled in the byte-level alphabet.
  void EncodeBytePairWord(std::string_view word, std::vector<int32_t>& out) const;
  int32_t FindToken(std::string_view text) const;
  // The merge rank of the pair, or -1 when the merges have no such pair.
  int32_t MergeRank(std::string_view left, std::string_view right, std::string& scratch) const;

  Vocabulary vocabulary_;
  TextIndex id_by_text_;
  std::vector<std::string> pieces_;         // TokenPiece of every id
  std::vector<int32_t> byte_tokens_;        // the token for each byte value, 256 entries
  size_t max_bytes_per_token_ = 0;
  std::vector<int32_t> special_tokens_;     // matched in the text, longest first
  std::vector<bool> is_end_of_generation_;  // by id
  std::vector<bool> strips_right_space_;    // by id
  TextIndex merge_rank_;                    // BPE: "left right" -> rank
};

// Loads the vocabulary of a GGUF file and builds its tokenizer (LoadVocabulary's errors).
Result<Tokenizer> LoadTokenizer(const gguf::GgufFile& file);

// The same for a model with `model_vocab` embedding rows: kInvalidArgument naming `path` when
// the vocabulary holds another number of tokens, found before the vocabulary is built (a
// crafted file could list millions of tokens for a small model).
Result<Tokenizer> LoadModelTokenizer(const gguf::GgufFile& file, int64_t model_vocab, const std::string& path);

}  // namespace bmad::tokenizer
