// RegexConstraint over a small fake vocabulary, and inside the Sampler: which tokens each step
// allows, the end once the output matches, outputs it did not choose, and sampled runs that
// always end in a match.
#include "worker/sampling/regex_constraint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <regex>
#include <set>

#include "tests/worker/sampling/sampling_test_values.h"
#include "worker/sampling/sampler.h"

namespace bmad::sampling {
namespace {

using testing::kInf;
using ::testing::HasSubstr;

constexpr int32_t kEnd = 2;

const std::vector<std::string> kVocabulary = {
    "", "", "",        // 0 unk, 1 bos, 2 eos
    "y", "ye", "yes",  // 3, 4, 5
    "n", "no", " yes", // 6, 7, 8
    "s", "1", "23",    // 9, 10, 11
    "x", "es", "o",    // 12, 13, 14
};

std::shared_ptr<const TokenTexts> Vocabulary() { return std::make_shared<const TokenTexts>(kVocabulary); }

RegexConstraint PatternConstraint(const std::string& pattern) {
  Result<std::shared_ptr<const RegexNfa>> nfa = RegexNfa::Compile(pattern);
  EXPECT_TRUE(nfa.ok()) << nfa.status().ToString();
  return RegexConstraint(Vocabulary(), {kEnd}, *nfa);
}

std::set<int32_t> AllowedByPattern(RegexConstraint& c) {
  std::vector<float> scores(kVocabulary.size(), 0.0f);
  EXPECT_TRUE(c.Mask(scores).ok());
  std::set<int32_t> allowed;
  for (size_t i = 0; i < scores.size(); ++i) {
    if (scores[i] != -kInf) allowed.insert(static_cast<int32_t>(i));
  }
  return allowed;
}

// The order a new state's walk takes: texts sorted as bytes (unsigned; ties by id), each with
// the prefix it shares with the one before.
TEST(TokenTexts, OrdersTextsAndCountsTheirSharedPrefixes) {
  const TokenTexts texts(std::vector<std::string>{"ab", "", "abc", "b", "a\xC3\xA9", "ab", "a"});
  const std::vector<int32_t> order(texts.by_text().begin(), texts.by_text().end());
  EXPECT_EQ(order, (std::vector<int32_t>{1, 6, 0, 5, 2, 4, 3}));
  const std::vector<uint32_t> shared(texts.shared_prefix().begin(), texts.shared_prefix().end());
  EXPECT_EQ(shared, (std::vector<uint32_t>{0, 0, 1, 2, 2, 1, 0}));
  for (size_t k = 0; k < order.size(); ++k) EXPECT_EQ(texts.sorted_text(k), texts.text(order[k])) << k;
}

TEST(RegexConstraint, AllowsWhatCanLeadToAMatchAndTheEndOnlyAfterOne) {
  RegexConstraint c = PatternConstraint("yes|no");
  EXPECT_EQ(AllowedByPattern(c), (std::set<int32_t>{3, 4, 5, 6, 7}));  // not " yes", nor the end
  EXPECT_FALSE(c.complete());
  ASSERT_TRUE(c.Sync(std::vector<int32_t>{4}).ok());  // "ye"
  EXPECT_EQ(AllowedByPattern(c), (std::set<int32_t>{9}));
  ASSERT_TRUE(c.Sync(std::vector<int32_t>{4, 9}).ok());  // "yes"
  EXPECT_EQ(AllowedByPattern(c), (std::set<int32_t>{kEnd}));
  EXPECT_TRUE(c.complete());
  ASSERT_TRUE(c.Sync(std::vector<int32_t>{4, 9, kEnd}).ok());
  // An output read again from its start (a shorter one).
  ASSERT_TRUE(c.Sync(std::vector<int32_t>{3}).ok());
  EXPECT_EQ(AllowedByPattern(c), (std::set<int32_t>{13}));
}

TEST(RegexConstraint, AMatchThatCanGoOnAllowsBoth) {
  RegexConstraint c = PatternConstraint("\\d+");
  EXPECT_EQ(AllowedByPattern(c), (std::set<int32_t>{10, 11}));
  ASSERT_TRUE(c.Sync(std::vector<int32_t>{10}).ok());
  EXPECT_EQ(AllowedByPattern(c), (std::set<int32_t>{kEnd, 10, 11}));
  EXPECT_FALSE(c.complete());
}

TEST(RegexConstraint, RefusesAnOutputItDidNotChoose) {
  RegexConstraint c = PatternConstraint("yes|no");
  Status s = c.Sync(std::vector<int32_t>{8});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("output token 0 (id 8) cannot continue the output towards the pattern"));
  RegexConstraint early = PatternConstraint("yes|no");
  s = early.Sync(std::vector<int32_t>{3, kEnd});
  EXPECT_THAT(s.message(), HasSubstr("ends the output before it matches the pattern"));
  RegexConstraint after = PatternConstraint("no");
  s = after.Sync(std::vector<int32_t>{7, kEnd, 6});
  EXPECT_THAT(s.message(), HasSubstr("follows the end of the output"));
}

TEST(RegexConstraint, AVocabularyThatCannotSpellThePatternIsAnError) {
  RegexConstraint c = PatternConstraint("maybe");
  std::vector<float> scores(kVocabulary.size(), 0.0f);
  const Status s = c.Mask(scores);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("no token can continue the output towards the pattern"));
}

// Sampled through the Sampler, with every token equally likely: each run ends in a match.
TEST(RegexConstraint, SampledOutputsAlwaysMatch) {
  const std::regex oracle("(yes|no|\\d{1,4})");
  proto::SamplingParams params;
  params.temperature = 1.0f;
  params.has_seed = true;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    params.seed = seed;
    Result<std::shared_ptr<const RegexNfa>> nfa = RegexNfa::Compile("yes|no|\\d{1,4}");
    ASSERT_TRUE(nfa.ok());
    Sampler sampler(params, 0, {kEnd}, OutputConstraint(RegexConstraint(Vocabulary(), {kEnd}, *nfa)));
    std::vector<int32_t> out;
    std::string text;
    while (out.size() < 10) {
      Result<SampleResult> r = sampler.Sample(std::vector<float>(kVocabulary.size(), 0.0f), {}, out);
      ASSERT_TRUE(r.ok()) << r.status().ToString() << " after '" << text << "'";
      if (r->token_id == kEnd) break;
      out.push_back(r->token_id);
      text += kVocabulary[static_cast<size_t>(r->token_id)];
    }
    ASSERT_LT(out.size(), 10u) << text;
    EXPECT_TRUE(std::regex_match(text, oracle)) << seed << ": '" << text << "'";
  }
}

}  // namespace
}  // namespace bmad::sampling
