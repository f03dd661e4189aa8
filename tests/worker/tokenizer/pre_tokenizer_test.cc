#include "worker/model/tokenizer/pre_tokenizer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "worker/model/tokenizer/byte_level.h"
#include "worker/model/tokenizer/unicode_classes.h"

namespace bmad::tokenizer {
namespace {

using namespace std::literals;
using Words = std::vector<std::string>;

struct SplitCase {
  std::string text;
  Words llama3;
  Words qwen2;
};

// Expected words from the tokenizer.json regexes themselves, run by a Unicode regex engine
// (JavaScript's, with the contractions spelled out as llama.cpp spells them).
const SplitCase kSplitCases[] = {
    {"Hello world",
     {"Hello", " world"},
     {"Hello", " world"}},
    {"I'm here. You're there! We'll see, they've DONE it'S",
     {"I", "'m", " here", ".", " You", "'re", " there", "!", " We", "'ll", " see", ",", " they", "'ve", " DONE", " it", "'S"},
     {"I", "'m", " here", ".", " You", "'re", " there", "!", " We", "'ll", " see", ",", " they", "'ve", " DONE", " it", "'S"}},
    {"x = 12345678 + 3.14159",
     {"x", " =", " ", "123", "456", "78", " +", " ", "3", ".", "141", "59"},
     {"x", " =", " ", "1", "2", "3", "4", "5", "6", "7", "8", " +", " ", "3", ".", "1", "4", "1", "5", "9"}},
    {"  leading\n\n\ttabs\r\n  end  ",
     {" ", " leading", "\n\n", "\ttabs", "\r\n", " ", " end", "  "},
     {" ", " leading", "\n\n", "\ttabs", "\r\n", " ", " end", "  "}},
    {"na\xC3\xAF""ve caf\xC3\xA9"" \xE5\x8C\x97""\xE4\xBA\xAC"" \xF0\x9F\x98\x80",
     {"na\xC3\xAF""ve", " caf\xC3\xA9", " \xE5\x8C\x97""\xE4\xBA\xAC", " \xF0\x9F\x98\x80"},
     {"na\xC3\xAF""ve", " caf\xC3\xA9", " \xE5\x8C\x97""\xE4\xBA\xAC", " \xF0\x9F\x98\x80"}},
    {"'''",
     {"'''"},
     {"'''"}},
    {"a\xC2\xA0""b\xE3\x80\x80""c",
     {"a", "\xC2\xA0""b", "\xE3\x80\x80""c"},
     {"a", "\xC2\xA0""b", "\xE3\x80\x80""c"}},
    {"!!!\n\n???",
     {"!!!\n\n", "???"},
     {"!!!\n\n", "???"}},
    {"123abc456",
     {"123", "abc", "456"},
     {"1", "2", "3", "abc", "4", "5", "6"}},
    {" ",
     {" "},
     {" "}},
    {"a  b   c    ",
     {"a", " ", " b", "  ", " c", "    "},
     {"a", " ", " b", "  ", " c", "    "}},
    {"\xC2\xBD""\xE2\x85\x93""\xE2\x85\xAB",
     {"\xC2\xBD""\xE2\x85\x93""\xE2\x85\xAB"},
     {"\xC2\xBD", "\xE2\x85\x93", "\xE2\x85\xAB"}},
    {" 'll 'LL'x",
     {" '", "ll", " '", "LL", "'x"},
     {" '", "ll", " '", "LL", "'x"}},
    {"hello\n world",
     {"hello", "\n", " world"},
     {"hello", "\n", " world"}},
    {"(a)+[b]",
     {"(a", ")+[", "b", "]"},
     {"(a", ")+[", "b", "]"}},
    {"\t\tx",
     {"\t", "\tx"},
     {"\t", "\tx"}},
};

TEST(PreTokenizerTest, SplitsAsTheRegexes) {
  for (const SplitCase& c : kSplitCases) {
    EXPECT_EQ(SplitWords(c.text, PreTokenizer::kLlama3), c.llama3) << "llama3: " << c.text;
    EXPECT_EQ(SplitWords(c.text, PreTokenizer::kQwen2), c.qwen2) << "qwen2: " << c.text;
  }
}

TEST(PreTokenizerTest, EmptyTextHasNoWords) {
  EXPECT_TRUE(SplitWords("", PreTokenizer::kLlama3).empty());
}

TEST(PreTokenizerTest, UnicodeWhitespaceOutsideJavaScriptsIsWhitespace) {
  // U+0085 NEXT LINE is White_Space (llama.cpp's \s), so it takes the optional place before
  // the letters; U+FEFF is not, and is punctuation-like.
  EXPECT_EQ(SplitWords("a \xC2\x85" "b", PreTokenizer::kLlama3),
            (Words{"a", " ", "\xC2\x85" "b"}));
  EXPECT_EQ(SplitWords("\xC2\x85\xC2\x85" "b", PreTokenizer::kLlama3),
            (Words{"\xC2\x85", "\xC2\x85" "b"}));
  EXPECT_EQ(SplitWords("a\xEF\xBB\xBF\xEF\xBB\xBF", PreTokenizer::kLlama3),
            (Words{"a", "\xEF\xBB\xBF\xEF\xBB\xBF"}));
}

TEST(PreTokenizerTest, UndecodableBytesBecomeReplacementCharacters) {
  // A stray continuation byte and a truncated three-byte character: one U+FFFD per byte,
  // which is punctuation-like, so it joins a leading space.
  EXPECT_EQ(SplitWords("a \x80" "b", PreTokenizer::kLlama3),
            (Words{"a", " \xEF\xBF\xBD", "b"}));
  EXPECT_EQ(SplitWords("x\xE2\x82", PreTokenizer::kLlama3),
            (Words{"x", "\xEF\xBF\xBD\xEF\xBF\xBD"}));
  // Above U+10FFFF.
  EXPECT_EQ(SplitWords("\xF4\x90\x80\x80", PreTokenizer::kLlama3), (Words{"\xEF\xBF\xBD"}));
}

TEST(UnicodeClassesTest, Categories) {
  EXPECT_TRUE(IsUnicodeLetter('a'));
  EXPECT_TRUE(IsUnicodeLetter(0x00E9));   // é
  EXPECT_TRUE(IsUnicodeLetter(0x5317));   // 北
  EXPECT_TRUE(IsUnicodeLetter(0x00AA));   // ª, Lo
  EXPECT_FALSE(IsUnicodeLetter(0x0301));  // combining acute accent: M, not L
  EXPECT_FALSE(IsUnicodeLetter('1'));
  EXPECT_FALSE(IsUnicodeLetter(0x1F600));
  EXPECT_TRUE(IsUnicodeNumber('7'));
  EXPECT_TRUE(IsUnicodeNumber(0x00BD));   // ½, No
  EXPECT_TRUE(IsUnicodeNumber(0x216B));   // Ⅻ, Nl
  EXPECT_TRUE(IsUnicodeNumber(0x0663));   // Arabic-Indic three, Nd
  EXPECT_FALSE(IsUnicodeNumber('x'));
  EXPECT_TRUE(IsUnicodeWhitespace(0x3000));
  EXPECT_TRUE(IsUnicodeWhitespace(0x0085));
  EXPECT_FALSE(IsUnicodeWhitespace(0xFEFF));
  EXPECT_FALSE(IsUnicodeWhitespace(0x200B));  // zero width space is not White_Space
}

// The tables are Unicode 15.1's, as llama.cpp's (b9586): characters added in 16.0 and 17.0 are
// no letters or numbers yet, so words split where llama.cpp splits them.
TEST(UnicodeClassesTest, TheTablesAreUnicode15Point1AsLlamaCpps) {
  EXPECT_TRUE(IsUnicodeLetter(0x1C88));    // Cyrillic small letter unblended uk (9.0)
  EXPECT_FALSE(IsUnicodeLetter(0x1C89));   // Cyrillic capital letter tje (16.0)
  EXPECT_TRUE(IsUnicodeLetter(0x2EBF0));   // CJK extension I (15.1)
  EXPECT_FALSE(IsUnicodeLetter(0x323B0));  // CJK extension J (17.0)
  EXPECT_FALSE(IsUnicodeNumber(0x16D70));  // Kirat Rai digit zero (16.0)
  EXPECT_EQ(SplitWords("x\xE1\xB2\x89y", PreTokenizer::kLlama3), (Words{"x", "\xE1\xB2\x89y"}));
}

TEST(ByteLevelTest, AlphabetRoundTripsEveryByte) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const std::string spelled = ByteLevelEncode(all);
  EXPECT_EQ(ByteLevelDecode(spelled), all);
  EXPECT_EQ(DecodeCodePoints(spelled).size(), 256u);  // one code point per byte
}

TEST(ByteLevelTest, GptTwoSpellings) {
  EXPECT_EQ(ByteLevelEncode(" "), "\xC4\xA0");       // Ġ U+0120
  EXPECT_EQ(ByteLevelEncode("\n"), "\xC4\x8A");      // Ċ U+010A
  EXPECT_EQ(ByteLevelEncode("a!~"), "a!~");          // printable ASCII stands for itself
  EXPECT_EQ(ByteLevelEncode("\xC3\xA9"), "\xC3\x83\xC2\xA9");  // é's bytes: Ã ©
  EXPECT_EQ(ByteLevelCodePoint(0x00), 0x100u);
  EXPECT_EQ(ByteLevelCodePoint(0xAD), 0x143u);  // soft hyphen, the last shifted byte
  EXPECT_EQ(ByteLevelDecode("\xC4\xA0hello"), " hello");
  // Outside the alphabet: kept as it is.
  EXPECT_EQ(ByteLevelDecode("\xE2\x82\xAC"), "\xE2\x82\xAC");
}

}  // namespace
}  // namespace bmad::tokenizer
