#include "worker/model/tokenizer/tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <queue>
#include <utility>

#include "worker/model/tokenizer/byte_level.h"
#include "worker/model/tokenizer/pre_tokenizer.h"
#include "worker/model/tokenizer/utf8.h"

namespace bmad::tokenizer {
namespace {

// SentencePiece writes a space as U+2581 LOWER ONE EIGHTH BLOCK inside pieces.
constexpr std::string_view kEscapedSpace = "\xE2\x96\x81";

std::string EscapeSpaces(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  for (char c : text) {
    if (c == ' ') {
      out.append(kEscapedSpace);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string UnescapeSpaces(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    if (text.compare(pos, kEscapedSpace.size(), kEscapedSpace) == 0) {
      out.push_back(' ');
      pos += kEscapedSpace.size();
    } else {
      out.push_back(text[pos++]);
    }
  }
  return out;
}

// The bytes C's isspace() accepts in the "C" locale (llama.cpp's RSTRIP test).
bool IsAsciiSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;  // ValidateVocabulary admits only hex digits here
}

std::string ComputePiece(const std::string& text, TokenType type, TokenizerModel model) {
  switch (type) {
    case TokenType::kNormal:
      return model == TokenizerModel::kBytePairEncoding ? ByteLevelDecode(text)
                                                        : UnescapeSpaces(text);
    case TokenType::kByte:  // "<0xHH>"
      return std::string(1, static_cast<char>(HexValue(text[3]) * 16 + HexValue(text[4])));
    case TokenType::kUserDefined:
      return text;
    case TokenType::kUndefined:
    case TokenType::kUnknown:
    case TokenType::kControl:
    case TokenType::kUnused:
      break;
  }
  return "";
}

// One character, or several merged ones, of the text being encoded: a node of a doubly linked
// list over the text (indices; -1 ends the list). A symbol merged into its left neighbour keeps
// length 0.
struct Symbol {
  int64_t prev;
  int64_t next;
  size_t begin;
  size_t length;
};

// A candidate merge of two adjacent symbols, with its priority.
struct Merge {
  float score;
  int64_t left;
  int64_t right;
  size_t length;  // of the concatenation when proposed; a mismatch later means it is stale
};

// Orders the max-heap: the highest score first and, between equal scores, the leftmost pair,
// the order of llama.cpp's `llm_bigram_spm::comparator` and `llm_bigram_bpe::comparator`.
struct MergeLess {
  bool operator()(const Merge& a, const Merge& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

// Cuts `text` (not empty) into characters of `char_length(lead byte)` bytes, clipped at the
// end, and merges adjacent symbols, always the pair `score_of(left, right)` scores highest
// (nullopt: no merge), until no pair merges. Returns the symbols left, in order.
template <typename CharLength, typename ScoreOf>
std::vector<std::string_view> MergeSymbols(std::string_view text, CharLength char_length,
                                           ScoreOf score_of) {
  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const size_t length =
        std::min<size_t>(char_length(static_cast<unsigned char>(text[pos])), text.size() - pos);
    const auto index = static_cast<int64_t>(symbols.size());
    symbols.push_back({index - 1, index + 1, pos, length});
    pos += length;
  }
  symbols.back().next = -1;

  std::priority_queue<Merge, std::vector<Merge>, MergeLess> queue;
  const auto propose = [&](int64_t left, int64_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[right];
    const std::optional<float> score =
        score_of(text.substr(l.begin, l.length), text.substr(r.begin, r.length));
    if (score) queue.push({*score, left, right, l.length + r.length});
  };
  for (size_t i = 1; i < symbols.size(); ++i) {
    propose(static_cast<int64_t>(i) - 1, static_cast<int64_t>(i));
  }

  while (!queue.empty()) {
    const Merge merge = queue.top();
    queue.pop();
    Symbol& left = symbols[merge.left];
    Symbol& right = symbols[merge.right];
    // Stale: one side was merged away or grew since this merge was proposed.
    if (left.length == 0 || right.length == 0 || left.length + right.length != merge.length) {
      continue;
    }
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = merge.left;
    propose(left.prev, merge.left);
    propose(merge.left, left.next);
  }

  // Symbol 0 is never merged away, so the list starts there.
  std::vector<std::string_view> out;
  for (int64_t i = 0; i >= 0; i = symbols[i].next) {
    out.push_back(text.substr(symbols[i].begin, symbols[i].length));
  }
  return out;
}

// The length of the UTF-8 character starting with `lead` in valid UTF-8.
size_t Utf8CharLength(unsigned char lead) {
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

}  // namespace

Result<Tokenizer> Tokenizer::Create(Vocabulary vocabulary) {
  BMAD_RETURN_IF_ERROR(ValidateVocabulary(vocabulary));
  return Tokenizer(std::move(vocabulary));
}

Result<Tokenizer> LoadTokenizer(const gguf::GgufFile& file) {
  Result<Vocabulary> vocabulary = LoadVocabulary(file);
  if (!vocabulary.ok()) return vocabulary.status();
  return Tokenizer::Create(std::move(vocabulary).value());
}

Result<Tokenizer> LoadModelTokenizer(const gguf::GgufFile& file, int64_t model_vocab, const std::string& path) {
  const gguf::MetadataValue* tokens = file.Find("tokenizer.ggml.tokens");
  const auto mismatch = [&](int64_t count) {
    return InvalidArgument(path + ": the vocabulary has " + std::to_string(count) + " tokens but the model " +
                           std::to_string(model_vocab));
  };
  if (tokens != nullptr && tokens->type == gguf::ValueType::kArray &&
      static_cast<int64_t>(tokens->array.size()) != model_vocab) {
    return mismatch(static_cast<int64_t>(tokens->array.size()));
  }
  BMAD_ASSIGN_OR_RETURN(Tokenizer tok, LoadTokenizer(file));
  if (tok.vocab_size() != model_vocab) return mismatch(tok.vocab_size());
  return tok;
}

Tokenizer::Tokenizer(Vocabulary vocabulary) : vocabulary_(std::move(vocabulary)) {
  const Vocabulary& v = vocabulary_;
  const int32_t n = v.size();

  id_by_text_.reserve(static_cast<size_t>(n));
  pieces_.reserve(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) {
    id_by_text_.emplace(v.texts[id], id);
    pieces_.push_back(ComputePiece(v.texts[id], v.types[id], v.model));
  }

  byte_tokens_.resize(256);
  if (v.model == TokenizerModel::kBytePairEncoding) {
    // The byte's one-character byte-level text (kNoToken where the vocabulary lacks it).
    for (int byte = 0; byte < 256; ++byte) {
      byte_tokens_[byte] = FindToken(ByteLevelEncode(std::string(1, static_cast<char>(byte))));
    }
    merge_rank_.reserve(v.merges.size());
    for (size_t rank = 0; rank < v.merges.size(); ++rank) {
      merge_rank_.emplace(v.merges[rank], static_cast<int32_t>(rank));  // the first one counts
    }
  } else {
    // llama.cpp's byte_to_token: "<0xHH>" (upper-case hex), else the one-byte text. Where it
    // would abort, a byte token spelled in lower case ("<0x0a>", which it decodes but cannot
    // find), else the unknown token, stands in.
    std::vector<int32_t> byte_token_by_value(256, kNoToken);
    for (int32_t id = 0; id < n; ++id) {
      if (v.types[id] != TokenType::kByte) continue;
      const auto value = static_cast<unsigned char>(pieces_[id][0]);
      if (byte_token_by_value[value] == kNoToken) byte_token_by_value[value] = id;
    }
    for (int byte = 0; byte < 256; ++byte) {
      char spelled[7];
      std::snprintf(spelled, sizeof(spelled), "<0x%02X>", byte);
      int32_t id = FindToken(spelled);
      if (id == kNoToken) id = FindToken(std::string(1, static_cast<char>(byte)));
      if (id == kNoToken) id = byte_token_by_value[byte];
      byte_tokens_[byte] = id == kNoToken ? v.unk_id : id;
    }
  }

  for (int32_t id = 0; id < n; ++id) {
    const TokenType type = v.types[id];
    if (type == TokenType::kControl || type == TokenType::kUserDefined ||
        type == TokenType::kUnknown) {
      special_tokens_.push_back(id);
    }
  }
  // Longest first, so "<|im_end|>" is not cut short by a shorter token that it contains.
  // llama.cpp's std::sort leaves equal lengths in no defined order; lower ids first here.
  std::stable_sort(special_tokens_.begin(), special_tokens_.end(),
                   [&](int32_t a, int32_t b) { return v.texts[a].size() > v.texts[b].size(); });

  is_end_of_generation_.assign(static_cast<size_t>(n), false);
  if (v.eos_id != kNoToken) is_end_of_generation_[v.eos_id] = true;
  for (int32_t id : v.end_of_generation_ids) is_end_of_generation_[id] = true;
  strips_right_space_.assign(static_cast<size_t>(n), false);
  for (int32_t id : v.rstrip_ids) strips_right_space_[id] = true;

  // A token's text is at least as long as the text it stands for (U+2581, three bytes, stands
  // for one space; a byte or unknown token for one byte; a byte-level character of one or two
  // bytes for one byte; U+FFFD replacing an undecodable byte only lengthens the text).
  const bool every_byte_has_a_token =
      std::find(byte_tokens_.begin(), byte_tokens_.end(), kNoToken) == byte_tokens_.end();
  if (every_byte_has_a_token && v.rstrip_ids.empty()) {
    for (const std::string& t : v.texts) max_bytes_per_token_ = std::max(max_bytes_per_token_, t.size());
  }
}

int32_t Tokenizer::FindToken(std::string_view text) const {
  auto it = id_by_text_.find(text);
  return it == id_by_text_.end() ? kNoToken : it->second;
}

namespace {

// Whether [begin, begin + length) shares a byte with one of `spans` (non-empty, sorted by begin,
// disjoint).
bool OverlapsAny(std::span<const Tokenizer::TextSpan> spans, size_t begin, size_t length) {
  // The last span starting before the end of the range is the only one that can reach into it.
  const auto after = std::upper_bound(spans.begin(), spans.end(), begin + length,
                                      [](size_t end, const Tokenizer::TextSpan& s) { return end <= s.begin; });
  if (after == spans.begin()) return false;
  const Tokenizer::TextSpan& s = *std::prev(after);
  return s.begin + s.length > begin;
}

}  // namespace

std::vector<Tokenizer::Fragment> Tokenizer::SplitAtSpecialTokens(std::string_view text, bool parse_special,
                                                                 std::span<const TextSpan> literal) const {
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({kNoToken, 0, text.size()});

  // One special token at a time over all text fragments, like llama.cpp's
  // tokenizer_st_partition: the order of the tokens decides overlapping matches.
  std::vector<Fragment> next;
  for (int32_t special : special_tokens_) {
    const TokenType type = vocabulary_.types[special];
    // User-defined tokens are always cut out; control and unknown ones only when asked.
    if (!parse_special && (type == TokenType::kControl || type == TokenType::kUnknown)) continue;
    const std::string& needle = vocabulary_.texts[special];
    // User-defined tokens are cut out of literal text too, as parse_special false cuts them.
    const bool literal_applies = !literal.empty() && (type == TokenType::kControl || type == TokenType::kUnknown);

    next.clear();
    for (const Fragment& fragment : fragments) {
      if (fragment.token != kNoToken) {
        next.push_back(fragment);
        continue;
      }
      const size_t end = fragment.begin + fragment.length;
      const std::string_view searched = text.substr(0, end);
      size_t pos = fragment.begin;
      while (pos < end) {
        size_t match = searched.find(needle, pos);
        while (match != std::string_view::npos && literal_applies && OverlapsAny(literal, match, needle.size())) {
          match = searched.find(needle, match + 1);
        }
        if (match == std::string_view::npos) break;
        if (match > pos) next.push_back({kNoToken, pos, match - pos});
        next.push_back({special, match, needle.size()});
        pos = match + needle.size();
        if (strips_right_space_[special]) {
          while (pos < end && IsAsciiSpace(text[pos])) ++pos;
        }
      }
      if (pos < end) next.push_back({kNoToken, pos, end - pos});
    }
    fragments.swap(next);
  }
  return fragments;
}

void Tokenizer::EncodeEscapedText(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  // Characters as llama.cpp cuts them: by the lead byte alone. A pair merges when its
  // concatenation is a token, the higher that token's score the sooner.
  const auto score_of = [&](std::string_view left, std::string_view right) -> std::optional<float> {
    const int32_t id = FindToken(std::string_view(left.data(), left.size() + right.size()));
    if (id == kNoToken) return std::nullopt;
    return vocabulary_.scores[id];
  };
  for (std::string_view piece : MergeSymbols(text, SentencePieceCharLength, score_of)) {
    const int32_t id = FindToken(piece);
    if (id != kNoToken) {
      out.push_back(id);
      continue;
    }
    for (char byte : piece) {
      const int32_t byte_id = byte_tokens_[static_cast<unsigned char>(byte)];
      if (byte_id != kNoToken) out.push_back(byte_id);  // no byte, one-byte or unknown token
    }
  }
}

int32_t Tokenizer::MergeRank(std::string_view left, std::string_view right,
                             std::string& scratch) const {
  scratch.assign(left);
  scratch.push_back(' ');
  scratch.append(right);
  auto it = merge_rank_.find(std::string_view(scratch));
  return it == merge_rank_.end() ? -1 : it->second;
}

void Tokenizer::EncodeBytePairWord(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (vocabulary_.pre_tokenizer == PreTokenizer::kLlama3) {
    if (const int32_t id = FindToken(word); id != kNoToken) {
      out.push_back(id);
      return;
    }
  }
  std::string scratch;
  // The lowest rank merges first: its negation is the score.
  const auto score_of = [&](std::string_view left, std::string_view right) -> std::optional<float> {
    const int32_t rank = MergeRank(left, right, scratch);
    if (rank < 0) return std::nullopt;
    return -static_cast<float>(rank);
  };
  for (std::string_view symbol : MergeSymbols(word, Utf8CharLength, score_of)) {
    const int32_t id = FindToken(symbol);
    if (id != kNoToken) {
      out.push_back(id);
      continue;
    }
    // As llama.cpp: each byte of the symbol's spelling that is a token on its own.
    for (char byte : symbol) {
      const int32_t byte_id = FindToken(std::string_view(&byte, 1));
      if (byte_id != kNoToken) out.push_back(byte_id);
    }
  }
}

void Tokenizer::EncodeBytePairText(std::string_view text, std::vector<int32_t>& out) const {
  for (const std::string& word : SplitWords(text, vocabulary_.pre_tokenizer)) {
    EncodeBytePairWord(ByteLevelEncode(word), out);
  }
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  return EncodeFragments(text, add_special, SplitAtSpecialTokens(text, parse_special));
}

std::vector<int32_t> Tokenizer::EncodeWithLiteralSpans(std::string_view text, bool add_special,
                                                       std::span<const TextSpan> literal) const {
  return EncodeFragments(text, add_special, SplitAtSpecialTokens(text, /*parse_special=*/true, literal));
}

std::vector<int32_t> Tokenizer::EncodeFragments(std::string_view text, bool add_special,
                                                const std::vector<Fragment>& fragments) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_special && vocabulary_.add_bos) out.push_back(vocabulary_.bos_id);

  // The space prefix goes before the first text and before every text after a special token:
  // SentencePiece sees each such text as the start of a sentence.
  bool after_special = true;
  std::string escaped;
  for (const Fragment& fragment : fragments) {
    if (fragment.token != kNoToken) {
      out.push_back(fragment.token);
      after_special = true;
      continue;
    }
    if (vocabulary_.model == TokenizerModel::kBytePairEncoding) {
      EncodeBytePairText(text.substr(fragment.begin, fragment.length), out);
      continue;
    }
    escaped.clear();
    if (vocabulary_.add_space_prefix && after_special) escaped.append(kEscapedSpace);
    escaped.append(EscapeSpaces(text.substr(fragment.begin, fragment.length)));
    EncodeEscapedText(escaped, out);
    after_special = false;
  }

  if (add_special && vocabulary_.add_eos) out.push_back(vocabulary_.eos_id);
  return out;
}

std::string Tokenizer::TokenPiece(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return "";
  return pieces_[id];
}

std::string_view Tokenizer::SequenceStartPiece(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  std::string_view piece = pieces_[id];
  if (vocabulary_.add_space_prefix && !piece.empty() && piece.front() == ' ') piece.remove_prefix(1);
  return piece;
}

namespace {

// Hugging Face's clean_up_tokenization as llama_detokenize applies it, in three passes: a space
// goes before "?", "!", "." and ","; a lone apostrophe between spaces loses both; and a space
// goes before "'s", "'m", "'re" and "'ve" (not before "'t", "'d" or "'ll").
std::string CleanUpSpaces(std::string_view text) {
  const auto is_any = [](char c, std::string_view set) { return set.find(c) != std::string_view::npos; };
  std::string punctuated;
  punctuated.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == ' ' && i + 1 < text.size() && is_any(text[i + 1], "?!.,")) continue;
    punctuated += text[i];
  }
  std::string quoted;
  quoted.reserve(punctuated.size());
  for (size_t i = 0; i < punctuated.size(); ++i) {
    if (punctuated.compare(i, 3, " ' ") == 0) {
      quoted += '\'';
      i += 2;
      continue;
    }
    quoted += punctuated[i];
  }
  std::string out;
  out.reserve(quoted.size());
  for (size_t i = 0; i < quoted.size(); ++i) {
    const std::string_view rest = std::string_view(quoted).substr(i);
    if (rest.size() >= 3 && rest.starts_with(" '") &&
        (is_any(rest[2], "sm") || rest.substr(2).starts_with("re") || rest.substr(2).starts_with("ve"))) {
      continue;
    }
    out += quoted[i];
  }
  return out;
}

}  // namespace

std::string Tokenizer::Decode(std::span<const int32_t> ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    // Only the very first token loses a space, even when its piece is empty (a BOS).
    if (i == 0) {
      out.append(SequenceStartPiece(id));
    } else if (id >= 0 && id < vocab_size()) {
      out.append(pieces_[id]);
    }
  }
  return vocabulary_.clean_spaces ? CleanUpSpaces(out) : out;
}

bool Tokenizer::IsEndOfGeneration(int32_t id) const {
  return id >= 0 && id < vocab_size() && is_end_of_generation_[id];
}

std::vector<int32_t> Tokenizer::EndOfGenerationIds() const {
  std::vector<int32_t> ids;
  for (size_t id = 0; id < is_end_of_generation_.size(); ++id) {
    if (is_end_of_generation_[id]) ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

}  // namespace bmad::tokenizer
