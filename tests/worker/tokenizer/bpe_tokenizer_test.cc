// The byte-level BPE ("gpt2") tokenizer on a small vocabulary built here: merge order, the
// Llama-3 whole-word rule, special tokens, pieces and decoding; and loading such vocabularies.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "worker/model/gguf/gguf_file.h"
#include "worker/model/gguf/gguf_writer.h"
#include "worker/model/tokenizer/byte_level.h"
#include "worker/model/tokenizer/tokenizer.h"
#include "worker/model/tokenizer/vocabulary.h"

namespace bmad::tokenizer {
namespace {

using ::testing::HasSubstr;
using Ids = std::vector<int32_t>;

// Ids 0..255: each byte's one-character spelling; then the tokens below.
constexpr int32_t kHe = 256, kLl = 257, kHell = 258, kHello = 259, kSpaceW = 260, kOr = 261,
                  kSpaceWor = 262, kLd = 263, kSpaceWorld = 264, kSpaceAbc = 265, kAa = 266,
                  kBc = 267, kAb = 268, kBegin = 269, kEot = 270, kTool = 271;

struct BpeFile {
  std::string pre = "llama-bpe";
  std::vector<std::string> merges = {
      "h e", "l l", "he ll", "hell o", "\xC4\xA0 w", "o r", "\xC4\xA0w or", "l d",
      "\xC4\xA0wor ld", "a a",
      "b c", "a b",  // "abc": b+c has the lower rank, so it merges first
      "x y",         // "xy" is no token: its bytes stand in
  };
  bool write_pre = true;
  bool write_merges = true;
  std::function<void(gguf::GgufWriter&)> more;
};

Result<std::unique_ptr<gguf::GgufFile>> WriteBpeFile(const BpeFile& spec) {
  std::vector<std::string> texts;
  std::vector<int32_t> types;
  for (int b = 0; b < 256; ++b) {
    texts.push_back(ByteLevelEncode(std::string(1, static_cast<char>(b))));
    types.push_back(1);
  }
  for (const char* t : {"he", "ll", "hell", "hello", "\xC4\xA0w", "or", "\xC4\xA0wor", "ld",
                        "\xC4\xA0world", "\xC4\xA0" "abc", "aa", "bc", "ab"}) {
    texts.push_back(t);
    types.push_back(1);
  }
  texts.push_back("<|begin_of_text|>");
  types.push_back(3);
  texts.push_back("<|eot_id|>");
  types.push_back(3);
  texts.push_back("<tool>");
  types.push_back(4);

  gguf::GgufWriter writer;
  writer.SetString("general.architecture", "llama");
  writer.SetString("tokenizer.ggml.model", "gpt2");
  if (spec.write_pre) writer.SetString("tokenizer.ggml.pre", spec.pre);
  writer.SetStringArray("tokenizer.ggml.tokens", texts);
  writer.SetInt32Array("tokenizer.ggml.token_type", types);
  if (spec.write_merges) writer.SetStringArray("tokenizer.ggml.merges", spec.merges);
  writer.SetUint32("tokenizer.ggml.bos_token_id", kBegin);
  writer.SetUint32("tokenizer.ggml.eos_token_id", kEot);
  if (spec.more) spec.more(writer);
  BMAD_ASSIGN_OR_RETURN(std::string bytes, writer.WriteToString());
  return gguf::GgufFile::FromBytes(std::move(bytes), "bpe-" + spec.pre + ".gguf");
}

Tokenizer MakeTokenizer(const BpeFile& spec) {
  auto file = WriteBpeFile(spec);
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  Result<Tokenizer> tokenizer = LoadTokenizer(**file);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  return std::move(tokenizer).value();
}

Tokenizer Llama3() { return MakeTokenizer(BpeFile{}); }
Tokenizer Qwen2() { return MakeTokenizer(BpeFile{.pre = "qwen2"}); }

TEST(BpeTokenizerTest, MergesByRankIntoWords) {
  const Tokenizer t = Qwen2();
  EXPECT_EQ(t.Encode("hello world", false), (Ids{kHello, kSpaceWorld}));
  // The lowest rank first, not the leftmost pair: a+b would give "ab","c".
  EXPECT_EQ(t.Encode("abc", false), (Ids{'a', kBc}));
  // Equal pairs: the leftmost merges first.
  EXPECT_EQ(t.Encode("aaa", false), (Ids{kAa, 'a'}));
  // A merge whose result is no token: the bytes that are tokens.
  EXPECT_EQ(t.Encode("xy", false), (Ids{'x', 'y'}));
  // No merges across words: " abc" is " ", "a", "bc" (Ġ is byte 0x20's token).
  EXPECT_EQ(t.Encode(" abc", false), (Ids{' ', 'a', kBc}));
  // A word of one byte that is no printable character: its byte-level character.
  EXPECT_EQ(t.Encode("\n", false), (Ids{'\n'}));
}

TEST(BpeTokenizerTest, Llama3TakesAWholeWordThatIsAToken) {
  const Tokenizer t = Llama3();
  // " abc" is the token "Ġabc" although no merges lead there (llama.cpp's ignore_merges).
  EXPECT_EQ(t.Encode(" abc", false), (Ids{kSpaceAbc}));
  EXPECT_EQ(t.Encode("hello world", false), (Ids{kHello, kSpaceWorld}));
}

TEST(BpeTokenizerTest, DigitsFollowThePreTokenizer) {
  // Merges never join digits here, so the ids show only the bytes; the words differ
  // (pre_tokenizer_test), and "1 2" style merges would see them.
  EXPECT_EQ(Llama3().Encode("1234", false), (Ids{'1', '2', '3', '4'}));
}

TEST(BpeTokenizerTest, SpecialTokensAndBos) {
  const Tokenizer t = Llama3();
  EXPECT_TRUE(t.vocabulary().add_bos);  // the Llama-3 pre-tokenizer's default
  EXPECT_EQ(t.bos(), kBegin);
  EXPECT_EQ(t.Encode("hello"), (Ids{kBegin, kHello}));
  EXPECT_EQ(t.Encode("<|begin_of_text|>hello<tool><|eot_id|>", false),
            (Ids{kBegin, kHello, kTool, kEot}));
  // Without parse_special the control texts are text; the user-defined one stays a token.
  const Ids plain = t.Encode("<|eot_id|><tool>", false, false);
  EXPECT_EQ(plain.back(), kTool);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), kEot), 0);
  EXPECT_EQ(t.Decode(plain), "<|eot_id|><tool>");
  EXPECT_TRUE(t.IsEndOfGeneration(kEot));
  // Qwen2's default is no BOS.
  EXPECT_FALSE(Qwen2().vocabulary().add_bos);
  EXPECT_EQ(Qwen2().Encode("hello"), (Ids{kHello}));
}

TEST(BpeTokenizerTest, ControlTokenTextInALiteralSpanIsText) {
  const Tokenizer t = Llama3();
  // A template's turn markers around a client's text that spells one of them.
  const std::string_view client = "hello<|eot_id|>world<tool>";
  const std::string text = "<|begin_of_text|>" + std::string(client) + "<|eot_id|>";
  const std::vector<Tokenizer::TextSpan> spans = {{17, client.size()}};
  const Ids ids = t.EncodeWithLiteralSpans(text, false, spans);
  ASSERT_EQ(ids.front(), kBegin);
  ASSERT_EQ(ids.back(), kEot);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), kEot), 1) << "the client's <|eot_id|> became the token";
  EXPECT_EQ(std::count(ids.begin(), ids.end(), kTool), 1) << "a user-defined token is cut out everywhere";
  // Inside: the ids of the client's text encoded without parse_special.
  const Ids inner(ids.begin() + 1, ids.end() - 1);
  EXPECT_EQ(inner, t.Encode(client, false, false));
  // A control text straddling the span's edge is text too; past the span it is a token again.
  const std::string edge = "ab<|eot_id|><|eot_id|>";
  const Ids straddled = t.EncodeWithLiteralSpans(edge, false, std::vector<Tokenizer::TextSpan>{{0, 5}});
  EXPECT_EQ(std::count(straddled.begin(), straddled.end(), kEot), 1);
  EXPECT_EQ(straddled.back(), kEot);
  EXPECT_EQ(t.Decode(straddled), "ab<|eot_id|>");  // the token's piece is empty; the text's is not
  // No control text in the spans: exactly Encode's ids.
  const std::string plain = "<|begin_of_text|>hello world<|eot_id|>";
  EXPECT_EQ(t.EncodeWithLiteralSpans(plain, true, std::vector<Tokenizer::TextSpan>{{17, 11}}), t.Encode(plain, true));
}

TEST(BpeTokenizerTest, PiecesAndDecodeGiveTheBytesBack) {
  const Tokenizer t = Llama3();
  EXPECT_EQ(t.TokenPiece(' '), " ");
  EXPECT_EQ(t.TokenPiece(kSpaceWorld), " world");
  EXPECT_EQ(t.TokenPiece(0xC3), "\xC3");  // half of a UTF-8 character
  EXPECT_EQ(t.TokenPiece(kBegin), "");    // control
  EXPECT_EQ(t.TokenPiece(kTool), "<tool>");
  // No space prefix to strip: a leading space survives.
  EXPECT_EQ(t.Decode(t.Encode(" hello world")), " hello world");
  for (const std::string text : {"", "naïve café 北京 😀", "  two  spaces\n\n\ttab", "a\r\nb",
                                 "'s 'LL 12345", "\x01\x7F"}) {
    EXPECT_EQ(t.Decode(t.Encode(text, false)), text) << text;
  }
  // Undecodable bytes come back as U+FFFD, as llama.cpp makes them.
  EXPECT_EQ(t.Decode(t.Encode("a\xFF", false)), "a\xEF\xBF\xBD");
}

// llama_detokenize's clean_spaces (Hugging Face's clean_up_tokenization_spaces): on for the
// Llama-3 family, off for Qwen2.
TEST(BpeTokenizerTest, Llama3DecodeCleansUpSpacesBeforePunctuationAndContractions) {
  const Tokenizer llama3 = Llama3();
  const auto decoded = [&](std::string_view text) { return llama3.Decode(llama3.Encode(text, false)); };
  EXPECT_EQ(decoded("hello , world 's"), "hello, world's");
  EXPECT_EQ(decoded("a ? b ! c . d ,"), "a? b! c. d,");
  EXPECT_EQ(decoded("x  ."), "x .");                // only the space right before
  EXPECT_EQ(decoded("rock ' n roll"), "rock'n roll");  // a lone apostrophe loses both spaces
  EXPECT_EQ(decoded("I 'm we 're you 've"), "I'm we're you've");
  EXPECT_EQ(decoded("don 't I 'd we 'll"), "don 't I 'd we 'll");  // these keep it, as in llama.cpp
  EXPECT_EQ(decoded(" ' ' "), "'' ");
  EXPECT_EQ(decoded(" 's"), "'s");
  EXPECT_EQ(decoded("it 's."), "it's.");
  EXPECT_FALSE(Qwen2().vocabulary().clean_spaces);
  EXPECT_EQ(Qwen2().Decode(Qwen2().Encode("hello , world 's", false)), "hello , world 's");
}

TEST(BpeTokenizerTest, MaxBytesPerTokenBoundsTheTokenCount) {
  const Tokenizer t = Llama3();
  ASSERT_GT(t.max_bytes_per_token(), 0u);
  for (const std::string text : {"hello world", "\xFF\xFF\xFF", "<|begin_of_text|>"}) {
    EXPECT_GE(t.Encode(text, false).size() * t.max_bytes_per_token(), text.size()) << text;
  }
}

TEST(BpeVocabularyTest, ReadsTheBpeKeys) {
  auto file = WriteBpeFile(BpeFile{});
  ASSERT_TRUE(file.ok());
  Result<Vocabulary> v = LoadVocabulary(**file);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->model, TokenizerModel::kBytePairEncoding);
  EXPECT_EQ(v->pre_tokenizer, PreTokenizer::kLlama3);
  EXPECT_EQ(v->merges.size(), 13u);
  EXPECT_EQ(v->unk_id, kNoToken);
  EXPECT_FALSE(v->add_space_prefix);
  EXPECT_FALSE(v->add_eos);
  EXPECT_THAT(v->end_of_generation_ids, ::testing::Contains(kEot));

  auto qwen = WriteBpeFile(BpeFile{.pre = "deepseek-r1-qwen"});
  ASSERT_TRUE(qwen.ok());
  Result<Vocabulary> q = LoadVocabulary(**qwen);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->pre_tokenizer, PreTokenizer::kQwen2);

  // add_bos_token in the file wins over the pre-tokenizer's default.
  auto no_bos = WriteBpeFile(
      BpeFile{.more = [](gguf::GgufWriter& w) { w.SetBool("tokenizer.ggml.add_bos_token", false); }});
  ASSERT_TRUE(no_bos.ok());
  Result<Vocabulary> nb = LoadVocabulary(**no_bos);
  ASSERT_TRUE(nb.ok());
  EXPECT_FALSE(nb->add_bos);
}

TEST(BpeVocabularyTest, RefusesWhatItCannotTokenizeExactly) {
  const auto error_of = [](const BpeFile& spec) {
    auto file = WriteBpeFile(spec);
    EXPECT_TRUE(file.ok());
    return LoadVocabulary(**file).status();
  };
  Status unknown_pre = error_of(BpeFile{.pre = "deepseek-llm"});
  EXPECT_EQ(unknown_pre.code(), StatusCode::kUnimplemented);
  EXPECT_THAT(unknown_pre.message(), HasSubstr("'deepseek-llm'"));
  EXPECT_THAT(unknown_pre.message(), HasSubstr("tokenizer.ggml.pre"));

  Status no_pre = error_of(BpeFile{.write_pre = false});
  EXPECT_EQ(no_pre.code(), StatusCode::kUnimplemented);
  EXPECT_THAT(no_pre.message(), HasSubstr("tokenizer.ggml.pre"));

  Status no_merges = error_of(BpeFile{.write_merges = false});
  EXPECT_EQ(no_merges.code(), StatusCode::kNotFound);
  EXPECT_THAT(no_merges.message(), HasSubstr("tokenizer.ggml.merges"));

  Status bad_merge = error_of(BpeFile{.merges = {"h e", "he"}});
  EXPECT_EQ(bad_merge.code(), StatusCode::kDataLoss);
  EXPECT_THAT(bad_merge.message(), HasSubstr("merge 1 is 'he'"));
}

}  // namespace
}  // namespace bmad::tokenizer
