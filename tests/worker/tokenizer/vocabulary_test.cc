// LoadVocabulary on the real files and on broken ones built in memory; ValidateVocabulary.
#include "worker/model/tokenizer/vocabulary.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "common/log.h"
#include "tests/worker/tokenizer/vocabulary_fixtures.h"

namespace bmad::tokenizer {
namespace {

using ::testing::HasSubstr;
using testing::kLlama2File;
using testing::kStoriesFile;
using testing::OpenSharedModel;
using testing::RewriteVocabulary;

size_t CountType(const Vocabulary& v, TokenType type) {
  return static_cast<size_t>(std::count(v.types.begin(), v.types.end(), type));
}

// The facts shared/models/README.md states about the files.
TEST(VocabularyTest, LoadsStories260K) {
  auto file = OpenSharedModel(kStoriesFile);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  Result<Vocabulary> v = LoadVocabulary(**file);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->size(), 512);
  EXPECT_EQ(CountType(*v, TokenType::kUnknown), 1u);
  EXPECT_EQ(CountType(*v, TokenType::kControl), 2u);
  EXPECT_EQ(CountType(*v, TokenType::kByte), 256u);
  EXPECT_EQ(CountType(*v, TokenType::kNormal), 253u);
  EXPECT_EQ(v->texts[1], "<s>");
  EXPECT_EQ(v->texts[2], "</s>");
  EXPECT_EQ(v->texts[3], "<0x00>");
  EXPECT_EQ(v->texts[403], "\xE2\x96\x81Once");
  EXPECT_EQ(v->bos_id, 1);
  EXPECT_EQ(v->eos_id, 2);
  EXPECT_EQ(v->unk_id, 0);
  EXPECT_EQ(v->pad_id, 0);
  // No add_* keys in the file: llama.cpp's defaults for the "llama" tokenizer.
  EXPECT_TRUE(v->add_bos);
  EXPECT_FALSE(v->add_eos);
  EXPECT_TRUE(v->add_space_prefix);
  EXPECT_EQ(v->end_of_generation_ids, std::vector<int32_t>{2});
  EXPECT_TRUE(ValidateVocabulary(*v).ok());
}

TEST(VocabularyTest, LoadsTheLlama2Vocabulary) {
  auto file = OpenSharedModel(kLlama2File);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  Result<Vocabulary> v = LoadVocabulary(**file);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->size(), 32000);
  EXPECT_EQ(v->scores.size(), 32000u);
  EXPECT_EQ(v->texts[9038], "\xE2\x96\x81Once");
  EXPECT_EQ(v->types[0], TokenType::kUnknown);
  EXPECT_EQ(v->types[2], TokenType::kControl);
  EXPECT_EQ(v->types[13], TokenType::kByte);  // <0x0A>
  EXPECT_EQ(v->bos_id, 1);
  EXPECT_EQ(v->eos_id, 2);
  EXPECT_EQ(v->unk_id, 0);
}

// Loads `base` rewritten by `more` and returns the status of LoadVocabulary.
Status LoadRewritten(const std::vector<testing::TokenEdit>& edits,
                     const std::function<void(gguf::GgufWriter&)>& more) {
  auto base = OpenSharedModel(kStoriesFile);
  if (!base.ok()) return base.status();
  auto file = RewriteVocabulary(**base, edits, more);
  if (!file.ok()) return file.status();
  return LoadVocabulary(**file).status();
}

// A file holding only the keys `fill` writes.
Status LoadKeys(const std::function<void(gguf::GgufWriter&)>& fill) {
  gguf::GgufWriter writer;
  fill(writer);
  auto bytes = writer.WriteToString();
  if (!bytes.ok()) return bytes.status();
  auto file = gguf::GgufFile::FromBytes(std::move(bytes).value(), "keys.gguf");
  if (!file.ok()) return file.status();
  return LoadVocabulary(**file).status();
}

TEST(VocabularyTest, MissingModelKeyIsNotFound) {
  Status s =
      LoadKeys([](gguf::GgufWriter& w) { w.SetStringArray("tokenizer.ggml.tokens", {"a"}); });
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("tokenizer.ggml.model"));
  EXPECT_THAT(s.message(), HasSubstr("keys.gguf"));
}

TEST(VocabularyTest, MissingTokensIsNotFound) {
  Status s = LoadKeys([](gguf::GgufWriter& w) { w.SetString("tokenizer.ggml.model", "llama"); });
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("tokenizer.ggml.tokens"));
}

TEST(VocabularyTest, OtherTokenizerModelsAreUnimplementedByName) {
  Status s =
      LoadRewritten({}, [](gguf::GgufWriter& w) { w.SetString("tokenizer.ggml.model", "bert"); });
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("'bert'"));
}

TEST(VocabularyTest, ScoresOfAnotherLengthAreDataLoss) {
  Status s = LoadRewritten({}, [](gguf::GgufWriter& w) {
    w.SetFloat32Array("tokenizer.ggml.scores", std::vector<float>(511, 0.0f));
  });
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("tokenizer.ggml.scores' has 511 entries"));
  EXPECT_THAT(s.message(), HasSubstr("512"));
}

TEST(VocabularyTest, TokenTypesOfAnotherLengthAreDataLoss) {
  Status s = LoadRewritten({}, [](gguf::GgufWriter& w) {
    w.SetInt32Array("tokenizer.ggml.token_type", std::vector<int32_t>(600, 1));
  });
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("tokenizer.ggml.token_type' has 600 entries"));
}

TEST(VocabularyTest, ATokenTypeOutsideGgufsIsDataLoss) {
  // Taken as "undefined", every piece decoded to nothing: the model generated empty text.
  Status s = LoadRewritten({}, [](gguf::GgufWriter& w) {
    std::vector<int32_t> types(512, 1);
    types[7] = 99;
    w.SetInt32Array("tokenizer.ggml.token_type", types);
  });
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("'tokenizer.ggml.token_type': token 7 has type 99 (the types are 0 to 6)"));
}

TEST(VocabularyTest, ASpecialIdOutsideTheVocabularyKeepsTheDefaultWithAWarning) {
  // llama.cpp's behaviour ("bad special token ... using default id"): such files exist (a
  // padding id one past a vocabulary never resized) and llama.cpp serves them.
  std::vector<std::string> lines;
  bmad::log::SetSink([&](std::string_view line) { lines.emplace_back(line); });
  auto base = OpenSharedModel(kStoriesFile);
  ASSERT_TRUE(base.ok());
  auto file = RewriteVocabulary(**base, {}, [](gguf::GgufWriter& w) {
    w.SetUint32("tokenizer.ggml.eos_token_id", 512);
    w.SetUint32("tokenizer.ggml.padding_token_id", 4000000000u);
  });
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto vocabulary = LoadVocabulary(**file);
  bmad::log::SetSink(nullptr);
  ASSERT_TRUE(vocabulary.ok()) << vocabulary.status().ToString();
  EXPECT_EQ(vocabulary->eos_id, 2);  // llama's default
  EXPECT_EQ(vocabulary->pad_id, kNoToken);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_THAT(lines[0], HasSubstr("special token id outside the vocabulary"));
  EXPECT_THAT(lines[0], HasSubstr("key=tokenizer.ggml.eos_token_id id=512 vocabulary=512 default=2"));
  EXPECT_THAT(lines[1], HasSubstr("key=tokenizer.ggml.padding_token_id id=4000000000"));
  EXPECT_THAT(lines[1], HasSubstr("default=none"));

  // An eot id outside the vocabulary is as good as none: the end-of-turn token is then found by
  // its text, as llama.cpp finds it.
  bmad::log::SetSink([](std::string_view) {});
  auto with_im_end = RewriteVocabulary(**base, testing::SpecialTokenEdits(), [](gguf::GgufWriter& w) {
    w.SetUint32("tokenizer.ggml.eot_token_id", 600);
  });
  ASSERT_TRUE(with_im_end.ok()) << with_im_end.status().ToString();
  auto eot = LoadVocabulary(**with_im_end);
  bmad::log::SetSink(nullptr);
  ASSERT_TRUE(eot.ok()) << eot.status().ToString();
  const auto im_end = std::find(eot->texts.begin(), eot->texts.end(), "<|im_end|>");
  ASSERT_NE(im_end, eot->texts.end());
  EXPECT_EQ(eot->eot_id, static_cast<int32_t>(im_end - eot->texts.begin()));
}

TEST(VocabularyTest, WrongKeyTypeIsInvalidArgument) {
  Status s = LoadRewritten(
      {}, [](gguf::GgufWriter& w) { w.SetString("tokenizer.ggml.bos_token_id", "one"); });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("tokenizer.ggml.bos_token_id"));
  s = LoadRewritten({},
                    [](gguf::GgufWriter& w) { w.SetUint32("tokenizer.ggml.add_bos_token", 1); });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("tokenizer.ggml.add_bos_token"));
  // It only names the model (and picks Phi-3's attributes), but a number there is a broken file.
  s = LoadRewritten({}, [](gguf::GgufWriter& w) { w.SetUint32("general.name", 3); });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("general.name"));
}

TEST(VocabularyTest, DuplicateTextIsDataLoss) {
  Status s = LoadRewritten({{300, "\xE2\x96\x81Once", TokenType::kNormal}}, {});
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("repeats the text"));
}

TEST(VocabularyTest, MalformedByteTokenIsDataLoss) {
  Status s = LoadRewritten({{3, "<0xZZ>", TokenType::kByte}}, {});
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("byte token 3"));
}

TEST(VocabularyTest, EmptyTextsAreRenamedAndWellKnownTextsBecomeControl) {
  auto base = OpenSharedModel(kStoriesFile);
  ASSERT_TRUE(base.ok());
  auto file = RewriteVocabulary(**base, testing::SpecialTokenEdits(), [](gguf::GgufWriter& w) {
    w.SetUint32("tokenizer.ggml.eom_token_id", 494);
  });
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  Result<Vocabulary> v = LoadVocabulary(**file);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->texts[511], "[EMPTY_511]");
  EXPECT_EQ(v->types[490], TokenType::kControl);  // "<|im_end|>", normal in the file
  EXPECT_EQ(v->types[493], TokenType::kControl);  // "<|fim_pad|>"
  EXPECT_EQ(v->types[491], TokenType::kUserDefined);
  EXPECT_EQ(v->eot_id, 490);
  EXPECT_EQ(v->eom_id, 494);
  EXPECT_EQ(v->end_of_generation_ids, (std::vector<int32_t>{2, 490, 493, 494}));
  EXPECT_TRUE(v->rstrip_ids.empty());
}

TEST(VocabularyTest, Phi3SpecialTokensStripTheSpaceToTheirRight) {
  auto base = OpenSharedModel(kStoriesFile);
  ASSERT_TRUE(base.ok());
  auto file = RewriteVocabulary(**base, testing::Phi3TokenEdits(), [](gguf::GgufWriter& w) {
    w.SetString("general.name", "Phi-3-mini test");
  });
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  Result<Vocabulary> v = LoadVocabulary(**file);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  // </s> (2), "<|im_end|>", "<tool>", "<tool_call>", "<|fim_pad|>", "ab", "<ctl>"; not <unk>,
  // <s> or <|endoftext|> (489).
  EXPECT_EQ(v->rstrip_ids, (std::vector<int32_t>{2, 490, 491, 492, 493, 494, 510}));
}

Vocabulary TinyVocabulary() {
  Vocabulary v;
  v.texts = {"<unk>", "<s>", "</s>", "a"};
  v.scores = {0, 0, 0, -1};
  v.types = {TokenType::kUnknown, TokenType::kControl, TokenType::kControl, TokenType::kNormal};
  return v;
}

TEST(VocabularyTest, ValidateNamesTheProblem) {
  EXPECT_TRUE(ValidateVocabulary(TinyVocabulary()).ok());

  Vocabulary v = TinyVocabulary();
  v.scores.pop_back();
  EXPECT_THAT(ValidateVocabulary(v).message(), HasSubstr("4 texts but 3 scores"));
  v = TinyVocabulary();
  v.texts[3] = "";
  EXPECT_THAT(ValidateVocabulary(v).message(), HasSubstr("token 3 has empty text"));
  v = TinyVocabulary();
  v.bos_id = 4;
  EXPECT_THAT(ValidateVocabulary(v).message(), HasSubstr("bos id 4"));
  v = TinyVocabulary();
  v.eos_id = -7;
  EXPECT_THAT(ValidateVocabulary(v).message(), HasSubstr("eos id -7"));
  v = TinyVocabulary();
  v.bos_id = kNoToken;
  EXPECT_THAT(ValidateVocabulary(v).message(), HasSubstr("add_bos is set but there is no bos"));
  v.add_bos = false;
  EXPECT_TRUE(ValidateVocabulary(v).ok());
  v = TinyVocabulary();
  v.scores[3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THAT(ValidateVocabulary(v).message(), HasSubstr("token 3 has a NaN score"));
  v = TinyVocabulary();
  v.end_of_generation_ids = {9};
  EXPECT_EQ(ValidateVocabulary(v).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateVocabulary(Vocabulary{}).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace bmad::tokenizer
