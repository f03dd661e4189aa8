#include "worker/model/tokenizer/pre_tokenizer.h"

#include <cstdint>

#include "worker/model/tokenizer/unicode_classes.h"

namespace bmad::tokenizer {
namespace {

bool IsNewline(uint32_t cp) { return cp == '\r' || cp == '\n'; }

uint32_t AsciiLower(uint32_t cp) { return cp >= 'A' && cp <= 'Z' ? cp + ('a' - 'A') : cp; }

// Cuts code points into words; `ends` receives the end index of each word.
class WordSplitter {
 public:
  WordSplitter(const std::vector<uint32_t>& cps, size_t max_digits)
      : cps_(cps), max_digits_(max_digits) {}

  std::vector<size_t> Split() {
    std::vector<size_t> ends;
    size_t pos = 0;
    while (pos < cps_.size()) {
      pos = NextWordEnd(pos);
      ends.push_back(pos);
    }
    return ends;
  }

 private:
  bool Letter(size_t i) const { return i < cps_.size() && IsUnicodeLetter(cps_[i]); }
  bool Number(size_t i) const { return i < cps_.size() && IsUnicodeNumber(cps_[i]); }
  bool Space(size_t i) const { return i < cps_.size() && IsUnicodeWhitespace(cps_[i]); }
  // [^\s\p{L}\p{N}]: anything else that is there.
  bool Other(size_t i) const { return i < cps_.size() && !Space(i) && !Letter(i) && !Number(i); }
  uint32_t LowerAt(size_t i) const { return i < cps_.size() ? AsciiLower(cps_[i]) : 0; }

  // The end of the word that starts at `pos`: the first alternative of the regex that matches.
  size_t NextWordEnd(size_t pos) const {
    const uint32_t cp = cps_[pos];

    // (?i:'s|'t|'re|'ve|'m|'ll|'d)
    if (cp == '\'') {
      const uint32_t a = LowerAt(pos + 1);
      const uint32_t b = LowerAt(pos + 2);
      if (a == 's' || a == 't' || a == 'm' || a == 'd') return pos + 2;
      if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
        return pos + 3;
      }
    }

    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!IsNewline(cp) && !Number(pos) && (Letter(pos) || Letter(pos + 1))) {
      size_t end = pos + 1;
      while (Letter(end)) ++end;
      return end;
    }

    // \p{N}{1,max_digits}
    if (Number(pos)) {
      size_t end = pos + 1;
      while (end - pos < max_digits_ && Number(end)) ++end;
      return end;
    }

    // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
    const size_t first_other = cp == ' ' ? pos + 1 : pos;
    if (Other(first_other)) {
      size_t end = first_other + 1;
      while (Other(end)) ++end;
      while (end < cps_.size() && IsNewline(cps_[end])) ++end;
      return end;
    }

    // Whitespace: \s*[\r\n]+ | \s+(?!\S) | \s+
    size_t run_end = pos;
    size_t after_last_newline = 0;
    while (Space(run_end)) {
      if (IsNewline(cps_[run_end])) after_last_newline = run_end + 1;
      ++run_end;
    }
    if (after_last_newline > 0) return after_last_newline;
    const size_t run = run_end - pos;
    if (run > 1 && run_end < cps_.size()) return run_end - 1;  // leave one space for the next word
    if (run > 0) return run_end;

    return pos + 1;  // unreachable: every code point matches one of the classes above
  }

  const std::vector<uint32_t>& cps_;
  size_t max_digits_;
};

}  // namespace

std::vector<std::string> SplitWords(std::string_view text, PreTokenizer kind) {
  const std::vector<uint32_t> cps = DecodeCodePoints(text);
  const size_t max_digits = kind == PreTokenizer::kLlama3 ? 3 : 1;
  std::vector<std::string> words;
  size_t begin = 0;
  for (size_t end : WordSplitter(cps, max_digits).Split()) {
    std::string word;
    for (size_t i = begin; i < end; ++i) AppendUtf8(cps[i], word);
    words.push_back(std::move(word));
    begin = end;
  }
  return words;
}

}  // namespace bmad::tokenizer
