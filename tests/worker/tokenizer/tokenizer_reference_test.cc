// Token ids that llama.cpp b9586 computes (llama-tokenize, llama_tokenize) for the real
// vocabularies in shared/models, and for stories260K variants with special tokens of every kind.
// Every expected id list below was printed by llama.cpp; none is computed by bmad.
#include <gtest/gtest.h>

#include <string_view>
#include <vector>

#include "tests/worker/tokenizer/vocabulary_fixtures.h"
#include "worker/model/tokenizer/tokenizer.h"

namespace bmad::tokenizer {
namespace {

using namespace std::literals;
using testing::kLlama2File;
using testing::kStoriesFile;
using testing::SharedTokenizer;

constexpr std::string_view kLongParagraph =
    "The quick brown fox jumps over the lazy dog. Meanwhile, in a small village by the sea, "
    "an old fisherman named Tomás mended his nets and told stories about the storm of 1987, "
    "when the waves rose higher than the lighthouse (nearly 40 meters!) and the whole town "
    "gathered in the church to wait for morning. \"We were lucky,\" he'd say, \"luckier than "
    "most.\"";

// Encoded with add_special = parse_special = true (llama-tokenize's defaults).
struct ReferenceCase {
  const char* name;
  std::string_view text;
  std::vector<int32_t> ids;
};

const std::vector<ReferenceCase>& Llama2Cases() {
  static const std::vector<ReferenceCase> cases = {
    {"OnceUponATime", "Once upon a time"sv, {1, 9038, 2501, 263, 931}},
    {"Empty", ""sv, {1}},
    {"SingleSpace", " "sv, {1, 259}},
    {"LeadingSpaces", "  leading spaces"sv, {1, 259, 8236, 8162}},
    {"TrailingSpaces", "trailing spaces   "sv, {1, 25053, 8162, 1678}},
    {"MultipleSpaces", "multiple   spaces  between"sv, {1, 2999, 259, 8162, 29871, 1546}},
    {"Tabs", "tab\tseparated\t\tvalues"sv, {1, 4434, 12, 25048, 630, 12, 12, 5975}},
    {"Newline", "line one\nline two"sv, {1, 1196, 697, 13, 1220, 1023}},
    {"OnlyNewline", "\n"sv, {1, 29871, 13}},
    {"CrLf", "windows\r\nline\r\nendings"sv, {1, 5417, 30004, 13, 1220, 30004, 13, 355, 886}},
    {"BlankLines", "blank\n\n\nlines\n"sv, {1, 9654, 13, 13, 13, 9012, 13}},
    {"DigitsAndNumbers",
      "digits 0123456789 and numbers 3.14159, 1,000,000 and -42"sv,
      {1, 13340, 29871, 29900, 29896, 29906, 29941, 29946, 29945, 29953, 29955, 29947, 29929,
       322, 3694, 29871, 29941, 29889, 29896, 29946, 29896, 29945, 29929, 29892, 29871, 29896,
       29892, 29900, 29900, 29900, 29892, 29900, 29900, 29900, 322, 448, 29946, 29906}},
    {"Apostrophes",
      "don't it's I'm we're they've you'll he'd"sv,
      {1, 1016, 29915, 29873, 372, 29915, 29879, 306, 29915, 29885, 591, 29915, 276, 896,
       29915, 345, 366, 29915, 645, 540, 29915, 29881}},
    {"Punctuation",
      "Punctuation! Does it work? Yes: (it does); [maybe] {or} \"quoted\" 'single' - dash — "
      "ellipsis…"sv,
      {1, 349, 18049, 29884, 362, 29991, 5538, 372, 664, 29973, 3869, 29901, 313, 277, 947,
       416, 518, 26026, 29962, 426, 272, 29913, 376, 339, 5715, 29908, 525, 14369, 29915, 448,
       12569, 813, 22434, 567, 275, 30098}},
    {"Accents",
      "café naïve résumé señor über Åland"sv,
      {1, 274, 28059, 1055, 30085, 345, 6896, 398, 29948, 18651, 272, 2939, 11260, 1049}},
    {"Chinese", "中文"sv, {1, 29871, 30275, 30333}},
    {"Japanese",
      "日本語のテキスト"sv,
      {1, 29871, 30325, 30346, 30968, 30199, 30572, 30454, 30255, 30279}},
    {"Emoji",
      "smile 🙂 thumbs 👍🏽 family 👨‍👩‍👧"sv,
      {1, 17819, 29871, 243, 162, 156, 133, 28968, 29879, 29871, 243, 162, 148, 144, 243, 162,
       146, 192, 3942, 29871, 243, 162, 148, 171, 30722, 243, 162, 148, 172, 30722, 243, 162,
       148, 170}},
    {"MixedScripts",
      "Hello мир 世界 مرحبا שלום Γειά"sv,
      {1, 15043, 4157, 29927, 29871, 30793, 30967, 29871, 30159, 30156, 30240, 30177, 30112,
       29871, 30294, 30249, 30205, 30404, 29871, 30339, 30151, 30136, 30216}},
    {"SpecialTokensInText", "Hello</s><s>world"sv, {1, 15043, 2, 1, 3186}},
    {"SpacedSpecialTokens",
      "a <s> b </s> c"sv,
      {1, 263, 29871, 1, 29871, 289, 29871, 2, 29871, 274}},
    {"UnknownTokenText", "<unk>"sv, {1, 0}},
    {"ByteTokenText", "<0x41>"sv, {1, 529, 29900, 29916, 29946, 29896, 29958}},
    {"EscapedSpaceCharacter", "a▁b"sv, {1, 263, 289}},
    {"InvalidUtf8",
      "bad \xFF\xFE bytes \xC3"sv,
      {1, 4319, 29871, 258, 257, 229, 153, 132, 13193, 29871, 198}},
    {"NulByte", "a\x00" "b"sv, {1, 263, 3, 29890}},
    {"LongParagraph", kLongParagraph,
      {1, 450, 4996, 17354, 1701, 29916, 432, 17204, 975, 278, 17366, 11203, 29889, 25065,
       29892, 297, 263, 2319, 5720, 491, 278, 7205, 29892, 385, 2030, 9427, 3504, 4257, 4335,
       1569, 286, 2760, 670, 302, 1691, 322, 5429, 15874, 1048, 278, 14280, 310, 29871, 29896,
       29929, 29947, 29955, 29892, 746, 278, 20037, 11492, 6133, 1135, 278, 301, 18919, 1709,
       313, 28502, 368, 29871, 29946, 29900, 27881, 14366, 322, 278, 3353, 4726, 22229, 297,
       278, 6586, 304, 4480, 363, 7250, 29889, 376, 4806, 892, 9885, 29891, 1699, 540, 29915,
       29881, 1827, 29892, 376, 29880, 2707, 631, 1135, 1556, 1213}},
  };
  return cases;
}

const std::vector<ReferenceCase>& StoriesCases() {
  static const std::vector<ReferenceCase> cases = {
    {"OnceUponATime", "Once upon a time"sv, {1, 403, 407, 261, 378}},
    {"Empty", ""sv, {1}},
    {"SingleSpace", " "sv, {1, 410, 410}},
    {"LeadingSpaces",
      "  leading spaces"sv,
      {1, 410, 410, 278, 411, 380, 299, 262, 427, 412, 331, 419}},
    {"TrailingSpaces",
      "trailing spaces   "sv,
      {1, 259, 420, 412, 290, 299, 262, 427, 412, 331, 419, 410, 410, 410}},
    {"MultipleSpaces",
      "multiple   spaces  between"sv,
      {1, 284, 425, 421, 413, 417, 427, 305, 410, 410, 262, 427, 412, 331, 419, 410, 268, 316,
       424, 411, 302}},
    {"Tabs",
      "tab\tseparated\t\tvalues"sv,
      {1, 259, 412, 430, 12, 372, 427, 295, 294, 266, 12, 12, 435, 412, 421, 425, 406}},
    {"Newline",
      "line one\nline two"sv,
      {1, 278, 271, 411, 353, 411, 13, 421, 271, 411, 259, 424, 414}},
    {"OnlyNewline", "\n"sv, {1, 410, 13}},
    {"CrLf",
      "windows\r\nline\r\nendings"sv,
      {1, 263, 417, 264, 327, 419, 16, 13, 421, 271, 411, 16, 13, 367, 299, 419}},
    {"BlankLines",
      "blank\n\n\nlines\n"sv,
      {1, 268, 421, 303, 433, 13, 13, 13, 421, 271, 406, 13}},
    {"DigitsAndNumbers",
      "digits 0123456789 and numbers 3.14159, 1,000,000 and -42"sv,
      {1, 279, 333, 275, 419, 410, 477, 475, 479, 472, 484, 480, 490, 491, 487, 483, 269, 297,
       425, 423, 430, 285, 419, 410, 472, 426, 475, 484, 475, 480, 483, 432, 410, 475, 432,
       477, 477, 477, 432, 477, 477, 477, 269, 410, 464, 484, 479}},
    {"Apostrophes",
      "don't it's I'm we're they've you'll he'd"sv,
      {1, 279, 289, 439, 413, 312, 439, 419, 359, 439, 423, 382, 439, 276, 366, 439, 360, 364,
       439, 306, 281, 439, 418}},
    {"Punctuation",
      "Punctuation! Does it work? Yes: (it does); [maybe] {or} \"quoted\" 'single' - dash — "
      "ellipsis…"sv,
      {1, 410, 460, 379, 429, 413, 425, 294, 417, 289, 443, 410, 455, 414, 406, 312, 263, 304,
       433, 450, 410, 452, 406, 467, 410, 489, 275, 400, 406, 488, 474, 410, 508, 423, 283,
       430, 411, 509, 410, 126, 304, 128, 313, 456, 425, 309, 266, 436, 410, 439, 419, 299,
       305, 439, 410, 464, 279, 412, 419, 415, 410, 481, 344, 306, 417, 427, 419, 293, 486}},
    {"Accents",
      "café naïve résumé señor über Åland"sv,
      {1, 280, 412, 431, 485, 297, 412, 198, 178, 360, 352, 485, 419, 425, 423, 485, 262, 411,
       493, 304, 410, 198, 191, 430, 285, 410, 198, 136, 421, 412, 264}},
    {"Chinese", "中文"sv, {1, 410, 231, 187, 176, 233, 153, 138}},
    {"Japanese",
      "日本語のテキスト"sv,
      {1, 410, 233, 154, 168, 233, 159, 175, 235, 173, 161, 230, 132, 177, 230, 134, 137, 230,
       133, 176, 230, 133, 188, 230, 134, 139}},
    {"Emoji",
      "smile 🙂 thumbs 👍🏽 family 👨‍👩‍👧"sv,
      {1, 262, 423, 290, 411, 410, 243, 162, 156, 133, 308, 425, 423, 430, 419, 410, 243, 162,
       148, 144, 243, 162, 146, 192, 272, 314, 310, 410, 243, 162, 148, 171, 229, 131, 144,
       243, 162, 148, 172, 229, 131, 144, 243, 162, 148, 170}},
    {"MixedScripts",
      "Hello мир 世界 مرحبا שלום Γειά"sv,
      {1, 346, 306, 414, 410, 211, 191, 211, 187, 212, 131, 410, 231, 187, 153, 234, 152, 143,
       410, 220, 136, 219, 180, 219, 176, 219, 171, 219, 170, 410, 218, 172, 218, 159, 218,
       152, 218, 160, 410, 209, 150, 209, 184, 209, 188, 209, 175}},
    {"SpecialTokensInText", "Hello</s><s>world"sv, {1, 346, 306, 414, 2, 1, 263, 304, 341}},
    {"SpacedSpecialTokens", "a <s> b </s> c"sv, {1, 261, 410, 1, 410, 268, 410, 2, 410, 280}},
    {"UnknownTokenText", "<unk>"sv, {1, 0}},
    {"ByteTokenText", "<0x41>"sv, {1, 410, 504, 477, 444, 484, 475, 505}},
    {"EscapedSpaceCharacter", "a▁b"sv, {1, 261, 268}},
    {"InvalidUtf8",
      "bad \xFF\xFE bytes \xC3"sv,
      {1, 268, 380, 410, 258, 257, 229, 153, 132, 430, 422, 413, 406, 410, 198}},
    {"NulByte", "a\x00" "b"sv, {1, 261, 3, 430}},
    {"LongParagraph", kLongParagraph,
      {1, 291, 410, 456, 425, 417, 340, 268, 420, 327, 416, 272, 414, 444, 410, 449, 425, 423,
       427, 419, 334, 330, 265, 278, 412, 451, 422, 400, 428, 426, 392, 411, 303, 424, 415,
       290, 411, 432, 322, 261, 262, 423, 388, 410, 435, 290, 421, 412, 428, 411, 268, 422,
       265, 262, 411, 412, 432, 261, 416, 334, 341, 272, 293, 386, 423, 303, 395, 274, 287,
       198, 164, 419, 284, 367, 266, 345, 297, 316, 419, 269, 267, 341, 349, 304, 417, 406,
       261, 430, 408, 265, 349, 304, 423, 373, 410, 475, 483, 487, 491, 432, 263, 260, 416,
       265, 273, 360, 419, 352, 414, 372, 270, 333, 386, 308, 303, 265, 278, 333, 415, 413,
       415, 277, 372, 410, 489, 416, 411, 295, 421, 422, 410, 484, 477, 284, 316, 285, 419,
       443, 488, 269, 265, 263, 415, 414, 305, 267, 424, 416, 298, 294, 386, 266, 322, 265,
       280, 415, 425, 420, 402, 267, 273, 275, 387, 284, 304, 416, 299, 426, 313, 448, 411,
       382, 276, 278, 425, 340, 422, 432, 436, 281, 439, 418, 262, 283, 432, 313, 421, 425,
       340, 417, 285, 308, 303, 284, 414, 356, 426, 436}},
  };
  return cases;
}

TEST(TokenizerReferenceTest, Llama2VocabularyMatchesLlamaCpp) {
  const Tokenizer& tokenizer = SharedTokenizer(kLlama2File);
  for (const ReferenceCase& c : Llama2Cases()) {
    EXPECT_EQ(tokenizer.Encode(c.text), c.ids) << c.name;
  }
}

TEST(TokenizerReferenceTest, StoriesVocabularyMatchesLlamaCpp) {
  const Tokenizer& tokenizer = SharedTokenizer(kStoriesFile);
  for (const ReferenceCase& c : StoriesCases()) {
    EXPECT_EQ(tokenizer.Encode(c.text), c.ids) << c.name;
  }
}

struct FlagCase {
  std::string_view text;
  bool add_special;
  bool parse_special;
  std::vector<int32_t> ids;
};

void ExpectFlagCases(const Tokenizer& tokenizer, const std::vector<FlagCase>& cases) {
  for (const FlagCase& c : cases) {
    EXPECT_EQ(tokenizer.Encode(c.text, c.add_special, c.parse_special), c.ids)
        << "text '" << c.text << "' add_special " << c.add_special << " parse_special "
        << c.parse_special;
  }
}

// Without parse_special "<s>" is text; without add_special there is no BOS. Either way the
// first text still gets the space prefix.
TEST(TokenizerReferenceTest, Llama2FlagsMatchLlamaCpp) {
  ExpectFlagCases(SharedTokenizer(kLlama2File), {
    {"Once upon a time"sv, true, false, {1, 9038, 2501, 263, 931}},
    {"Once upon a time"sv, false, true, {9038, 2501, 263, 931}},
    {"Once upon a time"sv, false, false, {9038, 2501, 263, 931}},
    {""sv, true, false, {1}},
    {""sv, false, true, {}},
    {""sv, false, false, {}},
    {" "sv, true, false, {1, 259}},
    {" "sv, false, true, {259}},
    {" "sv, false, false, {259}},
    {"Hello</s><s>world"sv, true, false, {1, 15043, 829, 29879, 5299, 29879, 29958, 11526}},
    {"Hello</s><s>world"sv, false, true, {15043, 2, 1, 3186}},
    {"Hello</s><s>world"sv, false, false, {15043, 829, 29879, 5299, 29879, 29958, 11526}},
    {"a <s> b </s> c"sv, true, false, {1, 263, 529, 29879, 29958, 289, 1533, 29879, 29958, 274}},
    {"a <s> b </s> c"sv, false, true, {263, 29871, 1, 29871, 289, 29871, 2, 29871, 274}},
    {"a <s> b </s> c"sv, false, false, {263, 529, 29879, 29958, 289, 1533, 29879, 29958, 274}},
    {"<unk>"sv, true, false, {1, 529, 2960, 29958}},
    {"<unk>"sv, false, true, {0}},
    {"<unk>"sv, false, false, {529, 2960, 29958}},
  });
}

TEST(TokenizerReferenceTest, StoriesFlagsMatchLlamaCpp) {
  ExpectFlagCases(SharedTokenizer(kStoriesFile), {
    {"Once upon a time"sv, true, false, {1, 403, 407, 261, 378}},
    {"Once upon a time"sv, false, true, {403, 407, 261, 378}},
    {"Once upon a time"sv, false, false, {403, 407, 261, 378}},
    {""sv, true, false, {1}},
    {""sv, false, true, {}},
    {""sv, false, false, {}},
    {" "sv, true, false, {1, 410, 410}},
    {" "sv, false, true, {410, 410}},
    {" "sv, false, false, {410, 410}},
    {"Hello</s><s>world"sv, true, false,
      {1, 346, 306, 414, 504, 492, 419, 505, 504, 419, 505, 424, 304, 341}},
    {"Hello</s><s>world"sv, false, true, {346, 306, 414, 2, 1, 263, 304, 341}},
    {"Hello</s><s>world"sv, false, false,
      {346, 306, 414, 504, 492, 419, 505, 504, 419, 505, 424, 304, 341}},
    {"a <s> b </s> c"sv, true, false,
      {1, 261, 410, 504, 419, 505, 268, 410, 504, 492, 419, 505, 280}},
    {"a <s> b </s> c"sv, false, true, {261, 410, 1, 410, 268, 410, 2, 410, 280}},
    {"a <s> b </s> c"sv, false, false,
      {261, 410, 504, 419, 505, 268, 410, 504, 492, 419, 505, 280}},
    {"<unk>"sv, true, false, {1, 410, 504, 379, 433, 505}},
    {"<unk>"sv, false, true, {0}},
    {"<unk>"sv, false, false, {410, 504, 379, 433, 505}},
  });
}

}  // namespace
}  // namespace bmad::tokenizer
