// JsonConstraint over a small fake vocabulary, and inside the Sampler: which tokens each step
// allows, the end once the object closes, outputs it did not choose, and a sampled run that
// always stays on the way to an object.
#include "worker/sampling/json_constraint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <set>

#include "tests/support/json_verdict.h"
#include "tests/worker/sampling/sampling_test_values.h"
#include "worker/sampling/sampler.h"

namespace bmad::sampling {
namespace {

using testing::kInf;
using ::testing::HasSubstr;

constexpr int32_t kEos = 2;

// Ids 0-2 are control tokens (no text), as in a Llama vocabulary.
const std::vector<std::string> kTexts = {
    "", "", "",       // 0 unk, 1 bos, 2 eos
    "{", "}", "\"",   // 3, 4, 5
    "a", " ", "{\"",  // 6, 7, 8
    "\":", "1", "true",  // 9, 10, 11
    "}\n", "x", ",",  // 12, 13, 14
    ":", "\n",        // 15, 16
};

std::shared_ptr<const TokenTexts> Texts() { return std::make_shared<const TokenTexts>(kTexts); }

// The ids Mask leaves finite, over a vocabulary of `size`.
std::set<int32_t> Allowed(const JsonConstraint& c, size_t size = kTexts.size()) {
  std::vector<float> scores(size, 0.0f);
  EXPECT_TRUE(c.Mask(scores).ok());
  std::set<int32_t> allowed;
  for (size_t i = 0; i < scores.size(); ++i) {
    if (scores[i] != -kInf) allowed.insert(static_cast<int32_t>(i));
  }
  return allowed;
}

TEST(JsonConstraint, AllowsOnlyTokensThatCanContinueAnObject) {
  JsonConstraint c(Texts(), {kEos});
  // The start: an object, with nothing before it.
  EXPECT_EQ(Allowed(c), (std::set<int32_t>{3, 8}));
  // In a key: text, but no control character ("}\n", "\n") and no control token.
  ASSERT_TRUE(c.Sync(std::vector<int32_t>{8}).ok());  // {"
  EXPECT_EQ(Allowed(c), (std::set<int32_t>{3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15}));
  // After the key's closing quote and colon: a value.
  ASSERT_TRUE(c.Sync(std::vector<int32_t>{8, 9}).ok());  // {"":
  // ("\":" starts a string holding a colon.)
  EXPECT_EQ(Allowed(c), (std::set<int32_t>{3, 5, 7, 8, 9, 10, 11, 16}));
  ASSERT_TRUE(c.Sync(std::vector<int32_t>{8, 9, 10}).ok());  // {"":1
  EXPECT_EQ(Allowed(c), (std::set<int32_t>{4, 7, 10, 14, 16}));
  EXPECT_FALSE(c.complete());
}

TEST(JsonConstraint, OnceTheObjectClosesOnlyAnEndingTokenMayFollow) {
  JsonConstraint c(Texts(), {kEos, 13});  // "x" is a stop token id here
  ASSERT_TRUE(c.Sync(std::vector<int32_t>{3, 4}).ok());  // {}
  EXPECT_TRUE(c.complete());
  EXPECT_EQ(Allowed(c), (std::set<int32_t>{kEos, 13}));
  // "}\n" would close the object and go on: never allowed at the end.
  JsonConstraint d(Texts(), {kEos});
  ASSERT_TRUE(d.Sync(std::vector<int32_t>{8, 9, 10}).ok());
  EXPECT_FALSE(Allowed(d).count(12));
  // The ending token read, nothing more.
  ASSERT_TRUE(c.Sync(std::vector<int32_t>{3, 4, kEos}).ok());
  std::vector<float> scores(kTexts.size(), 0.0f);
  EXPECT_THAT(c.Mask(scores).message(), HasSubstr("no token may end the output"));
  EXPECT_THAT(c.Sync(std::vector<int32_t>{3, 4, kEos, 3}).message(), HasSubstr("follows the end of the JSON value"));
}

// A stop token id with text ends the output (the output processor stops there and drops the
// text), so it is allowed only once the value is complete, never as a piece of JSON: "\n" may
// otherwise come between a key and its value, and "}" would close an object and end at once.
TEST(JsonConstraint, AStopTokenWithTextIsOnlyAnEnd) {
  JsonConstraint c(Texts(), {kEos, 16, 4});  // "\n" and "}" are stop token ids
  ASSERT_TRUE(c.Sync(std::vector<int32_t>{8, 9}).ok());  // {"":
  EXPECT_FALSE(Allowed(c).count(16));
  ASSERT_TRUE(c.Sync(std::vector<int32_t>{8, 9, 10}).ok());  // {"":1
  EXPECT_FALSE(Allowed(c).count(4));
  EXPECT_FALSE(Allowed(c).count(16));
  EXPECT_TRUE(Allowed(c).count(14));  // "," goes on
  EXPECT_THAT(c.Sync(std::vector<int32_t>{8, 9, 10, 4}).message(),
              HasSubstr("output token 3 (id 4) ends the output before the JSON value is complete"));
  JsonConstraint done(Texts(), {kEos, 16});
  ASSERT_TRUE(done.Sync(std::vector<int32_t>{3, 4}).ok());  // {}
  EXPECT_EQ(Allowed(done), (std::set<int32_t>{kEos, 16}));
  ASSERT_TRUE(done.Sync(std::vector<int32_t>{3, 4, 16}).ok());
}

TEST(JsonConstraint, AnOutputItDidNotChooseIsCheckedTokenByToken) {
  JsonConstraint c(Texts(), {kEos});
  Status bad = c.Sync(std::vector<int32_t>{3, 6});  // {a
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("output token 1 (id 6) cannot continue the JSON value"));
  JsonConstraint early(Texts(), {kEos});
  EXPECT_THAT(early.Sync(std::vector<int32_t>{3, kEos}).message(), HasSubstr("output token 1 (id 2)"));
  // A shorter output than the last one is read again from its start.
  JsonConstraint again(Texts(), {kEos});
  ASSERT_TRUE(again.Sync(std::vector<int32_t>{3, 4}).ok());
  ASSERT_TRUE(again.Sync(std::vector<int32_t>{8}).ok());
  EXPECT_FALSE(again.complete());
  EXPECT_TRUE(Allowed(again).count(9));
}

TEST(JsonConstraint, IdsBeyondTheTextsAreBannedAndAVocabularyWithoutJsonIsAnError) {
  JsonConstraint c(Texts(), {kEos});
  ASSERT_TRUE(c.Sync(std::vector<int32_t>{8, 9}).ok());  // {"": where "\n" (16) may come
  const std::set<int32_t> allowed = Allowed(c, kTexts.size() + 5);
  EXPECT_EQ(*allowed.rbegin(), 16);
  JsonConstraint letters(std::make_shared<const TokenTexts>(std::vector<std::string>{"", "a", "b"}), {0});
  std::vector<float> scores(3, 0.0f);
  Status none = letters.Mask(scores);
  EXPECT_EQ(none.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(none.message(), HasSubstr("no token of the vocabulary can continue the JSON value"));
}

TEST(JsonConstraint, TheSamplerTakesTheBestAllowedTokenAndEndsWithTheObject) {
  proto::SamplingParams greedy;
  greedy.temperature = 0;
  Sampler s(greedy, 1, {kEos}, JsonConstraint(Texts(), {kEos}));
  EXPECT_FALSE(s.device_samplable(0));
  // "x" (13) and the end (2) score highest but cannot come first; "{" (3) is the best that can.
  std::vector<float> logits(kTexts.size(), 0.0f);
  logits[13] = 9;
  logits[kEos] = 8;
  logits[3] = 5;
  logits[4] = 4;
  std::vector<int32_t> out;
  for (int i = 0; i < 3; ++i) {
    Result<SampleResult> r = s.Sample(logits, {}, out);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    out.push_back(r->token_id);
  }
  EXPECT_EQ(out, (std::vector<int32_t>{3, 4, kEos}));  // {} and the end
}

// A NaN on a token the mask bans is still a broken row: an error, not a NaN logprob.
TEST(JsonConstraint, ANonFiniteLogitUnderTheMaskIsAnError) {
  proto::SamplingParams params;
  params.temperature = 0;
  params.logprobs = true;
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), kInf}) {
    Sampler s(params, 1, {kEos}, JsonConstraint(Texts(), {kEos}));
    std::vector<float> logits(kTexts.size(), 0.0f);
    logits[3] = 5;
    logits[13] = bad;  // "x" cannot start a JSON object
    Result<SampleResult> r = s.Sample(logits, {}, {});
    EXPECT_EQ(r.status().code(), StatusCode::kInternal);
    EXPECT_THAT(r.status().message(), HasSubstr("logit of token 13 is"));
  }
}

// At every step of 300 random outputs, what Mask allows (plain tokens inside strings are
// allowed unread) is exactly what feeding each token whole to `reference` (a fresh automaton of
// the same schema) accepts. The vocabulary has whole and partial UTF-8 characters, escapes and
// quotes in the middle of tokens, and every byte alone (as a Llama vocabulary's byte tokens), so
// that no state is a dead end for lack of a token.
template <typename Automaton>
void ExpectMaskIsWhatTheAutomatonAccepts(std::shared_ptr<const JsonSchema> schema, const Automaton& fresh,
                                         const std::vector<std::string>& extra_texts) {
  std::vector<std::string> texts = kTexts;
  for (const char* t : {"caf\xC3\xA9", "\xC3", "\xA9", "\xE2\x82", "\xAC x", "a\"b", "\\", "\\u00", "e9\"",
                        "\\uD83D", "\\uDE00", "[", "]", "-0.5e", "+3", "null", "\"a\":", "\t", "  "}) {
    texts.push_back(t);
  }
  texts.insert(texts.end(), extra_texts.begin(), extra_texts.end());
  for (int b = 1; b < 256; ++b) texts.push_back(std::string(1, static_cast<char>(b)));
  auto shared = std::make_shared<const TokenTexts>(texts);
  std::mt19937 rng(11);
  int compared = 0;
  for (int run = 0; run < 300; ++run) {
    JsonConstraint c(shared, {kEos}, schema);
    Automaton reference = fresh;
    std::vector<int32_t> out;
    for (int step = 0; step < 30; ++step) {
      ASSERT_TRUE(c.Sync(out).ok());
      std::vector<float> scores(texts.size(), 0.0f);
      ASSERT_TRUE(c.Mask(scores).ok());
      std::vector<int32_t> allowed;
      for (size_t id = 0; id < texts.size(); ++id) {
        Automaton probe = reference;
        const bool fits = (!texts[id].empty() && probe.Feed(texts[id])) ||
                          (reference.complete() && static_cast<int32_t>(id) == kEos);
        ASSERT_EQ(scores[id] != -kInf, fits) << "token " << id << " after " << out.size() << " tokens";
        if (fits) allowed.push_back(static_cast<int32_t>(id));
      }
      ++compared;
      const int32_t next = allowed[rng() % allowed.size()];
      if (next == kEos) break;
      ASSERT_TRUE(reference.Feed(texts[static_cast<size_t>(next)]));
      out.push_back(next);
    }
  }
  EXPECT_GT(compared, 2000);
}

TEST(JsonConstraint, TheMaskIsEveryTokenTheAutomatonAcceptsWhole) {
  // JSON mode against JsonAutomaton itself.
  ExpectMaskIsWhatTheAutomatonAccepts(JsonSchema::AnyObject(), JsonAutomaton(JsonAutomaton::TopLevel::kObject), {});
}

TEST(JsonConstraint, UnderASchemaTheMaskIsEveryTokenTheSchemaAutomatonAcceptsWhole) {
  // Keys and enum values are matched, not free text: plain tokens are not allowed unread there.
  Result<std::shared_ptr<const JsonSchema>> schema = JsonSchema::Compile(
      R"({"type":"object","properties":{"name":{"type":"string"},"kind":{"enum":["cat","caterpillar"]},
          "n":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"},"maxItems":2}},
          "required":["name","kind"]})");
  ASSERT_TRUE(schema.ok()) << schema.status().ToString();
  ExpectMaskIsWhatTheAutomatonAccepts(*schema, SchemaAutomaton(schema->get()),
                                      {"{\"name\":\"", "\",\"kind\":", "\"cat", "erpillar\"", "name", "\"n\":", "7}"});
}

TEST(JsonConstraint, UnderLengthsAndBoundsTheMaskIsStillWhatTheAutomatonAccepts) {
  // Plain tokens in a string of bounded length are allowed unread only as far as its room goes.
  Result<std::shared_ptr<const JsonSchema>> schema = JsonSchema::Compile(
      R"({"type":"object","properties":{"code":{"type":"string","minLength":1,"maxLength":3},
          "tags":{"type":"array","items":{"type":"string","maxLength":5},"maxItems":3},
          "n":{"type":"integer","minimum":-20,"maximum":300}},"required":["code","n"]})");
  ASSERT_TRUE(schema.ok()) << schema.status().ToString();
  ExpectMaskIsWhatTheAutomatonAccepts(*schema, SchemaAutomaton(schema->get()),
                                      {"{\"code\":\"", "abcd", "ab", "\xC3\xA9\xC3\xA9", "\",\"n\":", "29", "-2", "300}"});
}

TEST(JsonConstraint, SampledOutputsAlwaysStayOnTheWayToAnObject) {
  // Random logits over the fake vocabulary, 200 outputs of up to 40 tokens, each drawn at
  // temperature 1: every output's text is JSON or the start of some, and those that ended are
  // whole objects.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> logit(-3.0f, 3.0f);
  int ended = 0;
  for (int run = 0; run < 200; ++run) {
    proto::SamplingParams p;
    p.temperature = 1.0f;
    p.seed = static_cast<uint64_t>(run);
    p.has_seed = true;
    Sampler s(p, 0, {kEos}, JsonConstraint(Texts(), {kEos}));
    std::vector<int32_t> out;
    std::string text;
    bool finished = false;
    for (int i = 0; i < 40 && !finished; ++i) {
      std::vector<float> logits(kTexts.size());
      for (float& l : logits) l = logit(rng);
      Result<SampleResult> r = s.Sample(logits, {}, out);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      out.push_back(r->token_id);
      finished = r->token_id == kEos;
      text += kTexts[static_cast<size_t>(r->token_id)];
      ASSERT_NE(testing::JudgeJson(text), testing::JsonVerdict::kInvalid) << text;
      ASSERT_EQ(text[0], '{');
    }
    if (finished) {
      ++ended;
      EXPECT_EQ(testing::JudgeJson(text), testing::JsonVerdict::kWhole) << text;
    }
  }
  EXPECT_GT(ended, 20);
}

}  // namespace
}  // namespace bmad::sampling
