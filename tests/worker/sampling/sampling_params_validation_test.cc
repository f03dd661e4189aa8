#include "worker/sampling/sampling_params_validation.h"
#include "tests/worker/sampling/sampling_test_values.h"

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace bmad::sampling {
namespace {

using testing::kInf;
using ::testing::HasSubstr;

constexpr int32_t kVocab = 32000;
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

struct Case {
  std::string name;
  std::function<void(proto::SamplingParams&)> mutate;
  std::vector<std::string> message_parts;  // each must appear in the error message
};

void ExpectRejected(const Case& c) {
  proto::SamplingParams params;
  c.mutate(params);
  const Status status = ValidateSamplingParams(params, kVocab);
  ASSERT_FALSE(status.ok()) << c.name;
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << c.name;
  for (const std::string& part : c.message_parts) {
    EXPECT_THAT(status.message(), HasSubstr(part)) << c.name;
  }
}

TEST(ValidateSamplingParams, DefaultsAreValid) {
  EXPECT_TRUE(ValidateSamplingParams(proto::SamplingParams{}, kVocab).ok());
}

TEST(ValidateSamplingParams, RejectsEachBadFieldNamingItAndItsRange) {
  const std::vector<Case> cases = {
      {"temperature < 0", [](auto& p) { p.temperature = -0.1f; },
       {"'temperature'", "[0, 2]", "-0.1"}},
      {"temperature > 2", [](auto& p) { p.temperature = 2.5f; }, {"'temperature'", "2.5"}},
      {"temperature nan", [](auto& p) { p.temperature = kNan; }, {"'temperature'", "nan"}},
      {"temperature inf", [](auto& p) { p.temperature = kInf; }, {"'temperature'", "inf"}},
      {"top_k < 0", [](auto& p) { p.top_k = -1; }, {"'top_k'", ">= 0", "-1"}},
      {"top_p = 0", [](auto& p) { p.top_p = 0.0f; }, {"'top_p'", "(0, 1]", "got 0"}},
      {"top_p < 0", [](auto& p) { p.top_p = -0.5f; }, {"'top_p'"}},
      {"top_p > 1", [](auto& p) { p.top_p = 1.01f; }, {"'top_p'", "1.01"}},
      {"top_p nan", [](auto& p) { p.top_p = kNan; }, {"'top_p'", "nan"}},
      {"top_p -inf", [](auto& p) { p.top_p = -kInf; }, {"'top_p'", "-inf"}},
      {"min_p < 0", [](auto& p) { p.min_p = -0.01f; }, {"'min_p'", "[0, 1]"}},
      {"min_p > 1", [](auto& p) { p.min_p = 1.5f; }, {"'min_p'", "1.5"}},
      {"min_p nan", [](auto& p) { p.min_p = kNan; }, {"'min_p'", "nan"}},
      {"repetition_penalty 0", [](auto& p) { p.repetition_penalty = 0.0f; },
       {"'repetition_penalty'", "(0, inf)"}},
      {"repetition_penalty < 0", [](auto& p) { p.repetition_penalty = -1.0f; },
       {"'repetition_penalty'"}},
      {"repetition_penalty nan", [](auto& p) { p.repetition_penalty = kNan; },
       {"'repetition_penalty'", "nan"}},
      {"repetition_penalty inf", [](auto& p) { p.repetition_penalty = kInf; },
       {"'repetition_penalty'", "inf"}},
      {"presence_penalty > 2", [](auto& p) { p.presence_penalty = 2.01f; },
       {"'presence_penalty'", "[-2, 2]"}},
      {"presence_penalty < -2", [](auto& p) { p.presence_penalty = -3.0f; },
       {"'presence_penalty'", "-3"}},
      {"presence_penalty nan", [](auto& p) { p.presence_penalty = kNan; },
       {"'presence_penalty'", "nan"}},
      {"presence_penalty -inf", [](auto& p) { p.presence_penalty = -kInf; },
       {"'presence_penalty'"}},
      {"frequency_penalty > 2", [](auto& p) { p.frequency_penalty = 7.0f; },
       {"'frequency_penalty'", "[-2, 2]"}},
      {"frequency_penalty nan", [](auto& p) { p.frequency_penalty = kNan; },
       {"'frequency_penalty'", "nan"}},
      {"frequency_penalty inf", [](auto& p) { p.frequency_penalty = kInf; },
       {"'frequency_penalty'"}},
      {"max_tokens 0", [](auto& p) { p.max_tokens = 0; }, {"'max_tokens'", ">= 1"}},
      {"top_logprobs 21",
       [](auto& p) {
         p.logprobs = true;
         p.top_logprobs = 21;
       },
       {"'top_logprobs'", "at most 20", "21"}},
      {"top_logprobs without logprobs", [](auto& p) { p.top_logprobs = 2; },
       {"'top_logprobs'", "'logprobs'"}},
      {"stop token = vocab", [](auto& p) { p.stop_token_ids = {2, kVocab}; },
       {"'stop_token_ids[1]'", "32000", "[0, 32000)"}},
      {"stop token huge", [](auto& p) { p.stop_token_ids = {0xFFFFFFFFu}; },
       {"'stop_token_ids[0]'", "4294967295"}},
      {"too many stop tokens",
       [](auto& p) { p.stop_token_ids.assign(kMaxStopTokenIds + 1, 1u); },
       {"'stop_token_ids'", "at most 64"}},
      {"too many stop strings",
       [](auto& p) { p.stop_strings.assign(kMaxStopStrings + 1, "x"); },
       {"'stop'", "9 strings", "at most 8"}},
      {"empty stop string", [](auto& p) { p.stop_strings = {"ok", ""}; }, {"'stop[1]'", "empty"}},
      {"long stop string",
       [](auto& p) { p.stop_strings = {std::string(kMaxStopStringBytes + 1, 'a')}; },
       {"'stop[0]'", "129 bytes", "at most 128"}},
      {"invalid utf-8 stop string", [](auto& p) { p.stop_strings = {"a\xC3"}; },
       {"'stop[0]'", "UTF-8"}},
      {"min_tokens > max_tokens",
       [](auto& p) {
         p.max_tokens = 4;
         p.min_tokens = 5;
       },
       {"'min_tokens' (5)", "'max_tokens' (4)"}},
      {"allowed_token_ids outside the vocabulary", [](auto& p) { p.allowed_token_ids = {3, kVocab}; },
       {"'allowed_token_ids[1]' is 32000", "outside the vocabulary"}},
      {"too many allowed_token_ids",
       [](auto& p) { p.allowed_token_ids.assign(kMaxAllowedTokenIds + 1, 1); },
       {"'allowed_token_ids' holds 262145 ids", "at most 262144"}},
      {"empty bad word sequence", [](auto& p) { p.bad_words = {{5}, {}}; },
       {"'bad_words' sequence 1 holds 0 tokens"}},
      {"long bad word sequence", [](auto& p) { p.bad_words = {std::vector<uint32_t>(kMaxBadWordTokens + 1, 5)}; },
       {"'bad_words' sequence 0 holds 65 tokens", "1 to 64"}},
      {"bad word outside the vocabulary", [](auto& p) { p.bad_words = {{5, kVocab + 1}}; },
       {"'bad_words' sequence 0 token 1 is 32001"}},
      {"too many bad word sequences",
       [](auto& p) { p.bad_words.assign(kMaxBadWordSequences + 1, {5}); },
       {"129 token sequences", "at most 128"}},
      {"logit_bias token outside the vocabulary",
       [](auto& p) { p.logit_bias = {{1, 1.0f}, {kVocab, 1.0f}}; },
       {"'logit_bias' for token 32000", "outside the vocabulary [0, 32000)"}},
      {"logit_bias above 100", [](auto& p) { p.logit_bias = {{7, 100.5f}}; },
       {"'logit_bias' for token 7", "[-100, 100]", "100.5"}},
      {"logit_bias below -100", [](auto& p) { p.logit_bias = {{7, -101.0f}}; },
       {"'logit_bias' for token 7", "-101"}},
      {"logit_bias nan", [](auto& p) { p.logit_bias = {{7, kNan}}; }, {"'logit_bias' for token 7", "nan"}},
      {"logit_bias -inf", [](auto& p) { p.logit_bias = {{7, -kInf}}; }, {"'logit_bias' for token 7", "-inf"}},
      {"logit_bias twice", [](auto& p) { p.logit_bias = {{7, 1.0f}, {8, 1.0f}, {7, 2.0f}}; },
       {"'logit_bias' for token 7", "given twice"}},
      {"too many logit_bias entries",
       [](auto& p) {
         for (uint32_t i = 0; i <= kMaxLogitBias; ++i) p.logit_bias.push_back({i, 1.0f});
       },
       {"'logit_bias' holds 4097 tokens", "at most 4096"}},
      {"json_object with min_tokens",
       [](auto& p) {
         p.response_format = proto::ResponseFormat::kJsonObject;
         p.min_tokens = 1;
       },
       {"'min_tokens' cannot be used with response_format \"json_object\"", "ends when the JSON value does"}},
      {"json_object with ignore_eos",
       [](auto& p) {
         p.response_format = proto::ResponseFormat::kJsonObject;
         p.ignore_eos = true;
       },
       {"'ignore_eos' cannot be used"}},
      {"json_schema with ignore_eos",
       [](auto& p) {
         p.response_format = proto::ResponseFormat::kJsonSchema;
         p.json_schema = "{}";
         p.ignore_eos = true;
       },
       {"'ignore_eos' cannot be used with response_format \"json_schema\""}},
      {"json_schema the compiler refuses",
       [](auto& p) {
         p.response_format = proto::ResponseFormat::kJsonSchema;
         p.json_schema = R"({"type":"object","properties":{"a":{"type":"string","pattern":"a+"}}})";
       },
       {"'response_format.json_schema.schema' at /properties/a: keyword 'pattern' is not supported"}},
      {"json_schema empty",
       [](auto& p) { p.response_format = proto::ResponseFormat::kJsonSchema; },
       {"'response_format.json_schema.schema' the schema is not valid JSON"}},
      {"a schema without its format",
       [](auto& p) {
         p.response_format = proto::ResponseFormat::kJsonObject;
         p.json_schema = "{}";
       },
       {"'json_schema' is set, but response_format is \"json_object\", not \"json_schema\""}},
      {"reasoning end token outside the vocabulary",
       [](auto& p) {
         p.response_format = proto::ResponseFormat::kJsonObject;
         p.reasoning_end_token = kVocab;
       },
       {"'reasoning_end_token' is 32000, outside the vocabulary"}},
      {"reasoning start token below -1",
       [](auto& p) {
         p.response_format = proto::ResponseFormat::kJsonObject;
         p.reasoning_end_token = 5;
         p.reasoning_start_token = -2;
       },
       {"'reasoning_start_token' is -2; -1 means none"}},
      {"reasoning start without an end",
       [](auto& p) {
         p.response_format = proto::ResponseFormat::kJsonObject;
         p.reasoning_start_token = 5;
       },
       {"'reasoning_start_token' is set without 'reasoning_end_token'"}},
      {"reasoning start and end the same token",
       [](auto& p) {
         p.response_format = proto::ResponseFormat::kJsonObject;
         p.reasoning_end_token = 5;
         p.reasoning_start_token = 5;
       },
       {"'reasoning_start_token' and 'reasoning_end_token' are both 5"}},
      {"a reasoning gate without a format", [](auto& p) { p.reasoning_end_token = 5; },
       {"'reasoning_end_token' is set, but response_format is \"text\""}},
      {"a stop token that ends the block",
       [](auto& p) {
         p.response_format = proto::ResponseFormat::kJsonObject;
         p.reasoning_end_token = 5;
         p.stop_token_ids = {9, 5};
       },
       {"'stop_token_ids' holds the token that ends the model's reasoning (5)", "could never begin"}},
      {"allowed tokens without the block's end",
       [](auto& p) {
         p.response_format = proto::ResponseFormat::kJsonObject;
         p.reasoning_end_token = 5;
         p.reasoning_start_token = 4;
         p.allowed_token_ids = {3, 4};
       },
       {"'allowed_token_ids' leaves out the token that ends the model's reasoning (5)"}},
      {"a bad word that is the block's end",
       [](auto& p) {
         p.response_format = proto::ResponseFormat::kJsonObject;
         p.reasoning_end_token = 5;
         p.bad_words = {{7, 8}, {5}};
       },
       {"'bad_words' bans the token that ends the model's reasoning (5)"}},
  };
  for (const Case& c : cases) ExpectRejected(c);
}

TEST(ValidateSamplingParams, AcceptsTheBoundaries) {
  const std::vector<std::function<void(proto::SamplingParams&)>> mutations = {
      [](auto& p) { p.temperature = 0.0f; },
      [](auto& p) { p.temperature = 2.0f; },
      [](auto& p) { p.top_k = 0; },
      [](auto& p) { p.top_k = kVocab * 4; },  // more than the vocabulary: no filtering
      [](auto& p) { p.top_p = 1e-6f; },
      [](auto& p) { p.top_p = 1.0f; },
      [](auto& p) { p.min_p = 0.0f; },
      [](auto& p) { p.min_p = 1.0f; },
      [](auto& p) { p.repetition_penalty = 1e-3f; },
      [](auto& p) { p.repetition_penalty = 50.0f; },
      [](auto& p) { p.presence_penalty = -2.0f; },
      [](auto& p) { p.frequency_penalty = 2.0f; },
      [](auto& p) { p.max_tokens = 1; },
      [](auto& p) {
        p.logprobs = true;
        p.top_logprobs = kMaxTopLogprobs;
      },
      [](auto& p) { p.stop_token_ids = {0, kVocab - 1}; },
      [](auto& p) { p.stop_token_ids.assign(kMaxStopTokenIds, 7u); },
      [](auto& p) { p.stop_strings.assign(kMaxStopStrings, "\n\n"); },
      [](auto& p) { p.stop_strings = {std::string(kMaxStopStringBytes, 'z')}; },
      [](auto& p) { p.stop_strings = {"Ende", "終わり", "🛑"}; },
      [](auto& p) {
        p.max_tokens = 9;
        p.min_tokens = 9;
      },
      [](auto& p) { p.logit_bias = {{0, -100.0f}, {kVocab - 1, 100.0f}}; },
      [](auto& p) {
        p.response_format = proto::ResponseFormat::kJsonSchema;
        p.json_schema = R"({"type":"object","properties":{"a":{"enum":["x","y"]}},"required":["a"]})";
      },
      [](auto& p) {
        for (uint32_t i = 0; i < kMaxLogitBias; ++i) p.logit_bias.push_back({i, 0.5f});
      },
      [](auto& p) {
        p.response_format = proto::ResponseFormat::kRegex;
        p.regex = "a+";
        p.reasoning_end_token = kVocab - 1;
        p.reasoning_start_token = 0;
      },
      [](auto& p) {  // the block cannot open, so its end does not matter
        p.response_format = proto::ResponseFormat::kJsonObject;
        p.reasoning_end_token = 5;
        p.reasoning_start_token = 4;
        p.stop_token_ids = {4, 5};
      },
      [](auto& p) {
        p.response_format = proto::ResponseFormat::kJsonObject;
        p.reasoning_end_token = 5;
        p.allowed_token_ids = {3, 5};
        p.bad_words = {{5, 5}};
      },
  };
  for (size_t i = 0; i < mutations.size(); ++i) {
    proto::SamplingParams params;
    mutations[i](params);
    EXPECT_TRUE(ValidateSamplingParams(params, kVocab).ok())
        << "case " << i << ": " << ValidateSamplingParams(params, kVocab).ToString();
  }
}

TEST(ValidateSamplingParams, RejectsANonPositiveVocabulary) {
  for (int32_t vocab : {0, -5}) {
    const Status status = ValidateSamplingParams(proto::SamplingParams{}, vocab);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr("vocab_size"));
  }
}

TEST(IsValidUtf8, AcceptsWellFormedText) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii\n"));
  EXPECT_TRUE(IsValidUtf8("caf\xC3\xA9"));              // U+00E9
  EXPECT_TRUE(IsValidUtf8("\xE2\x82\xAC"));             // U+20AC
  EXPECT_TRUE(IsValidUtf8("\xF0\x9F\x9B\x91"));         // U+1F6D1
  EXPECT_TRUE(IsValidUtf8("\xF4\x8F\xBF\xBF"));         // U+10FFFF, the last code point
  EXPECT_TRUE(IsValidUtf8(std::string_view("a\0b", 3)));  // NUL is a character
}

TEST(IsValidUtf8, RejectsMalformedText) {
  EXPECT_FALSE(IsValidUtf8("\x80"));                  // lone continuation byte
  EXPECT_FALSE(IsValidUtf8("\xC3"));                  // truncated
  EXPECT_FALSE(IsValidUtf8("\xE2\x82"));              // truncated
  EXPECT_FALSE(IsValidUtf8("\xC3\x28"));              // bad continuation
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));              // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xE0\x80\xAF"));          // overlong
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));          // surrogate U+D800
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));      // above U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xF8\x88\x80\x80\x80"));  // 5-byte form
  EXPECT_FALSE(IsValidUtf8("\xFF"));
}

}  // namespace
}  // namespace bmad::sampling
