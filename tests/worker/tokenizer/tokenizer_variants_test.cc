// Special tokens of every kind, Phi-3's whitespace stripping and the add_* keys, on variants of
// stories260K.gguf rebuilt in memory (vocabulary_fixtures.h). The same variants, written to
// files, were tokenized by llama.cpp b9586 (llama_tokenize with the flags shown); the expected
// ids are its output.
#include <gtest/gtest.h>

#include <string_view>
#include <vector>

#include "tests/worker/tokenizer/vocabulary_fixtures.h"
#include "worker/model/tokenizer/tokenizer.h"

namespace bmad::tokenizer {
namespace {

using namespace std::literals;
using testing::kStoriesFile;
using testing::OpenSharedModel;
using testing::RewriteVocabulary;
using testing::TokenEdit;

Tokenizer BuildVariant(const std::vector<TokenEdit>& edits,
                       const std::function<void(gguf::GgufWriter&)>& more = {}) {
  auto base = OpenSharedModel(kStoriesFile);
  if (!base.ok()) AbortOnErrorResult(base.status());
  auto file = RewriteVocabulary(**base, edits, more);
  if (!file.ok()) AbortOnErrorResult(file.status());
  auto tokenizer = LoadTokenizer(**file);
  if (!tokenizer.ok()) AbortOnErrorResult(tokenizer.status());
  return std::move(tokenizer).value();
}

// Expected ids for the four flag combinations of one text.
struct FlagMatrix {
  std::string_view text;
  std::vector<int32_t> special_parsed;        // add_special, parse_special
  std::vector<int32_t> parsed_only;           // !add_special, parse_special
  std::vector<int32_t> special_only;          // add_special, !parse_special
  std::vector<int32_t> neither;               // !add_special, !parse_special
};

void ExpectMatrix(const Tokenizer& tokenizer, const std::vector<FlagMatrix>& cases) {
  for (const FlagMatrix& c : cases) {
    EXPECT_EQ(tokenizer.Encode(c.text, true, true), c.special_parsed) << c.text;
    EXPECT_EQ(tokenizer.Encode(c.text, false, true), c.parsed_only) << c.text;
    EXPECT_EQ(tokenizer.Encode(c.text, true, false), c.special_only) << c.text;
    EXPECT_EQ(tokenizer.Encode(c.text, false, false), c.neither) << c.text;
  }
}

// A byte token spelled in lower case ("<0x0a>"; llama.cpp decodes it but aborts when it needs
// it to encode) is still the byte's fallback, so encoding and decoding round-trip.
TEST(TokenizerVariantsTest, LowerCaseByteTokensAreTheFallbackToo) {
  const Tokenizer tokenizer = BuildVariant({{3 + 0x0A, "<0x0a>", TokenType::kByte}});
  EXPECT_EQ(tokenizer.Encode("\n", false), (std::vector<int32_t>{410, 3 + 0x0A}));  // "▁", "\n"
  EXPECT_EQ(tokenizer.Decode(tokenizer.Encode("a\nb", false)), "a\nb");
}

// "<|im_end|>" and "<|fim_pad|>" are typed normal in the file but llama.cpp makes them control
// tokens; user-defined tokens ("<tool>", "<tool_call>", "ab") are cut out even without
// parse_special, the longer "<tool_call>" before "<tool>"; an empty text is "[EMPTY_511]".
TEST(TokenizerVariantsTest, SpecialTokenKindsMatchLlamaCpp) {
  const Tokenizer tokenizer = BuildVariant(testing::SpecialTokenEdits());
  ExpectMatrix(tokenizer, {
    {"Hi<|im_end|>there"sv,
     {1, 320, 417, 490, 383}, {320, 417, 490, 383},
     {1, 320, 417, 504, 506, 288, 98, 367, 506, 505, 413, 260, 276},
     {320, 417, 504, 506, 288, 98, 367, 506, 505, 413, 260, 276}},
    {"call <tool_call>{\"x\": 1}</tool> ab cab"sv,
     {1, 280, 388, 410, 492, 410, 126, 436, 444, 436, 467, 410, 475, 128, 504, 50, 413, 347,
      421, 505, 410, 494, 410, 280, 494},
     {280, 388, 410, 492, 410, 126, 436, 444, 436, 467, 410, 475, 128, 504, 50, 413, 347, 421,
      505, 410, 494, 410, 280, 494},
     {1, 280, 388, 410, 492, 410, 126, 436, 444, 436, 467, 410, 475, 128, 504, 50, 413, 347,
      421, 505, 410, 494, 410, 280, 494},
     {280, 388, 410, 492, 410, 126, 436, 444, 436, 467, 410, 475, 128, 504, 50, 413, 347, 421,
      505, 410, 494, 410, 280, 494}},
    {"<ctl> x <ctl>"sv,
     {1, 510, 410, 410, 444, 410, 510}, {510, 410, 410, 444, 410, 510},
     {1, 410, 504, 429, 413, 421, 505, 410, 444, 410, 504, 429, 413, 421, 505},
     {410, 504, 429, 413, 421, 505, 410, 444, 410, 504, 429, 413, 421, 505}},
    {"<|fim_pad|>"sv,
     {1, 493}, {493},
     {1, 410, 504, 506, 431, 288, 98, 427, 380, 506, 505},
     {410, 504, 506, 431, 288, 98, 427, 380, 506, 505}},
    {"[EMPTY_511]"sv,
     {1, 410, 508, 459, 446, 460, 434, 452, 98, 480, 475, 475, 509},
     {410, 508, 459, 446, 460, 434, 452, 98, 480, 475, 475, 509},
     {1, 410, 508, 459, 446, 460, 434, 452, 98, 480, 475, 475, 509},
     {410, 508, 459, 446, 460, 434, 452, 98, 480, 475, 475, 509}},
    {"<tool>"sv, {1, 491}, {491}, {1, 491}, {491}},
  });
}

// A token that eats the spaces after it stands for any number of bytes: no bound.
TEST(TokenizerVariantsTest, Phi3HasNoBoundOnBytesPerToken) {
  const Tokenizer phi3 = BuildVariant(testing::Phi3TokenEdits(), [](gguf::GgufWriter& w) {
    w.SetString("general.name", "Phi-3-mini test");
  });
  EXPECT_EQ(phi3.max_bytes_per_token(), 0u);
  EXPECT_LE(phi3.Encode("<ctl>" + std::string(1000, ' ') + "x", false).size(), 3u);  // 1006 bytes
  EXPECT_GT(BuildVariant(testing::SpecialTokenEdits()).max_bytes_per_token(), 0u);
}

// Phi-3: special tokens eat the whitespace after them, except <s>, <unk> and <|endoftext|>.
TEST(TokenizerVariantsTest, Phi3StripsWhitespaceAfterSpecialTokensLikeLlamaCpp) {
  const Tokenizer tokenizer = BuildVariant(testing::Phi3TokenEdits(), [](gguf::GgufWriter& w) {
    w.SetString("general.name", "Phi-3-mini test");
  });
  ExpectMatrix(tokenizer, {
    {"<ctl>   x"sv,
     {1, 510, 410, 444}, {510, 410, 444},
     {1, 410, 504, 429, 413, 421, 505, 410, 410, 410, 444},
     {410, 504, 429, 413, 421, 505, 410, 410, 410, 444}},
    {"<tool>\n\ty"sv, {1, 491, 348}, {491, 348}, {1, 491, 348}, {491, 348}},
    {"</s>  z"sv,
     {1, 2, 410, 451}, {2, 410, 451},
     {1, 410, 504, 50, 419, 505, 410, 410, 451}, {410, 504, 50, 419, 505, 410, 410, 451}},
    {"<s>  w"sv,
     {1, 1, 410, 410, 263}, {1, 410, 410, 263},
     {1, 410, 504, 419, 505, 410, 263}, {410, 504, 419, 505, 410, 263}},
    {"<|endoftext|>  q"sv,
     {1, 489, 410, 410, 410, 456}, {489, 410, 410, 410, 456},
     {1, 410, 504, 506, 367, 414, 431, 413, 411, 444, 413, 506, 505, 410, 410, 456},
     {410, 504, 506, 367, 414, 431, 413, 411, 444, 413, 506, 505, 410, 410, 456}},
    {"a <tool_call> \t b"sv,
     {1, 261, 410, 492, 268}, {261, 410, 492, 268}, {1, 261, 410, 492, 268}, {261, 410, 492, 268}},
  });
}

TEST(TokenizerVariantsTest, AddKeysControlBosEosAndSpacePrefixLikeLlamaCpp) {
  const Tokenizer eos_no_prefix = BuildVariant({}, [](gguf::GgufWriter& w) {
    w.SetBool("tokenizer.ggml.add_bos_token", false);
    w.SetBool("tokenizer.ggml.add_eos_token", true);
    w.SetBool("tokenizer.ggml.add_space_prefix", false);
  });
  ExpectMatrix(eos_no_prefix, {
    {"Once upon a time"sv,
     {441, 416, 331, 407, 261, 378, 2}, {441, 416, 331, 407, 261, 378},
     {441, 416, 331, 407, 261, 378, 2}, {441, 416, 331, 407, 261, 378}},
    {""sv, {2}, {}, {2}, {}},
    {" x"sv, {410, 444, 2}, {410, 444}, {410, 444, 2}, {410, 444}},
    {"a</s>b"sv,
     {412, 2, 430, 2}, {412, 2, 430},
     {412, 504, 492, 419, 505, 430, 2}, {412, 504, 492, 419, 505, 430}},
  });

  const Tokenizer no_prefix = BuildVariant({}, [](gguf::GgufWriter& w) {
    w.SetBool("tokenizer.ggml.add_space_prefix", false);
  });
  ExpectMatrix(no_prefix, {
    {"Once upon a time"sv,
     {1, 441, 416, 331, 407, 261, 378}, {441, 416, 331, 407, 261, 378},
     {1, 441, 416, 331, 407, 261, 378}, {441, 416, 331, 407, 261, 378}},
    {"a</s>b"sv,
     {1, 412, 2, 430}, {412, 2, 430},
     {1, 412, 504, 492, 419, 505, 430}, {412, 504, 492, 419, 505, 430}},
  });
}

}  // namespace
}  // namespace bmad::tokenizer
