#include "worker/sampling/sampler.h"

#include "kernels/sample_row.h"
#include "tests/worker/sampling/sampling_test_values.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace bmad::sampling {
namespace {

using testing::kInf;
using testing::kNoTokens;
using ::testing::HasSubstr;

proto::SamplingParams Params(float temperature, uint64_t seed = 1234) {
  proto::SamplingParams params;
  params.temperature = temperature;
  params.seed = seed;
  params.has_seed = true;
  return params;
}

int32_t Next(Sampler& sampler, const std::vector<float>& logits,
             const std::vector<int32_t>& prompt = kNoTokens,
             const std::vector<int32_t>& generated = kNoTokens) {
  Result<SampleResult> result = sampler.Sample(logits, prompt, generated);
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  return result.ok() ? result->token_id : -1;
}

// Empirical frequency of each token over `draws` draws from the same logits.
std::vector<double> Frequencies(Sampler& sampler, const std::vector<float>& logits, int draws) {
  std::vector<double> counts(logits.size(), 0.0);
  for (int i = 0; i < draws; ++i) {
    const int32_t token = Next(sampler, logits);
    if (token < 0) break;
    counts[static_cast<size_t>(token)] += 1.0;
  }
  for (double& c : counts) c /= draws;
  return counts;
}

std::vector<double> Softmax(const std::vector<float>& logits, double temperature) {
  const double max = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double sum = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    p[i] = std::exp((logits[i] - max) / temperature);
    sum += p[i];
  }
  for (double& x : p) x /= sum;
  return p;
}

// Probabilities normalised over `keep` only.
std::vector<double> Restricted(std::vector<double> p, const std::set<size_t>& keep) {
  double sum = 0.0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (!keep.count(i)) p[i] = 0.0;
    sum += p[i];
  }
  for (double& x : p) x /= sum;
  return p;
}

// With 100k draws one standard deviation is at most 0.0016: 0.01 is over six of them.
void ExpectFrequencies(const std::vector<double>& observed, const std::vector<double>& expected) {
  ASSERT_EQ(observed.size(), expected.size());
  for (size_t i = 0; i < observed.size(); ++i) {
    EXPECT_NEAR(observed[i], expected[i], 0.01) << "token " << i;
    if (expected[i] == 0.0) {
      EXPECT_EQ(observed[i], 0.0) << "token " << i;
    }
  }
}

// Logits whose softmax (temperature 1) is `p`.
std::vector<float> LogitsOf(const std::vector<double>& p) {
  std::vector<float> logits;
  for (double x : p) logits.push_back(static_cast<float>(std::log(x)));
  return logits;
}

// Random logits drawn from few distinct values, so that ties are common.
std::vector<float> TiedLogits(std::mt19937_64& rng, size_t vocab) {
  std::vector<float> logits(vocab);
  for (float& l : logits) l = static_cast<float>(rng() % 16) * 0.5f - 4.0f;
  return logits;
}

int32_t FirstArgmax(const std::vector<float>& logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

TEST(Sampler, GreedyIsTheArgmaxWithTiesToTheLowestId) {
  std::mt19937_64 rng(1);
  Sampler sampler(Params(0.0f), 0);
  EXPECT_TRUE(sampler.greedy());
  for (int trial = 0; trial < 200; ++trial) {
    const std::vector<float> logits = TiedLogits(rng, 1 + rng() % 500);
    ASSERT_EQ(Next(sampler, logits), FirstArgmax(logits));
  }
  EXPECT_EQ(Next(sampler, {1.0f, 5.0f, 5.0f, 5.0f}), 1);
  EXPECT_EQ(Next(sampler, {-kInf, -2.0f, -kInf}), 1);
}

TEST(Sampler, ATemperatureBelowOneHundredThousandthIsGreedy) {
  // vLLM's threshold: clients send 1e-6 to mean "greedy"; divided by, it made near-ties a draw.
  std::vector<int32_t> order;
  const std::vector<float> near_ties = {1.0f, 1.0f, 0.9999995f};
  for (const float t : {1e-6f, 9.9e-6f}) {
    Sampler sampler(Params(t, 7), 0);
    EXPECT_TRUE(sampler.greedy()) << t;
    for (int i = 0; i < 50; ++i) ASSERT_EQ(Next(sampler, near_ties), 0) << t;
    EXPECT_EQ(kernels::SampleRow(near_ties, kernels::RowSampling{t, 0, 1.0f, 0.0f, 0.9}, order), 0) << t;
  }
  EXPECT_FALSE(Sampler(Params(1e-5f, 7), 0).greedy());
}

TEST(Sampler, GreedyDoesNotDependOnTheSeed) {
  Sampler a(Params(0.0f, 1), 0);
  Sampler b(Params(0.0f, 2), 0);
  const std::vector<float> logits = {0.1f, 0.3f, 0.2f};
  for (int i = 0; i < 10; ++i) ASSERT_EQ(Next(a, logits), Next(b, logits));
}

TEST(Sampler, TheSameSeedGivesTheSameTokensAndOtherSeedsDiffer) {
  std::mt19937_64 rng(5);
  std::vector<std::vector<float>> steps;
  for (int i = 0; i < 200; ++i) steps.push_back(TiedLogits(rng, 64));
  auto run = [&](uint64_t seed) {
    Sampler sampler(Params(1.0f, seed), 0);
    std::vector<int32_t> tokens;
    for (const auto& logits : steps) tokens.push_back(Next(sampler, logits));
    return tokens;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

TEST(Sampler, WithoutASeedTheDefaultSeedIsUsed) {
  proto::SamplingParams unseeded = Params(1.0f, 99);
  unseeded.has_seed = false;
  Sampler a(unseeded, 7);
  Sampler b(Params(1.0f, 7), 12345);  // has_seed: the default seed is ignored
  Sampler c(unseeded, 8);
  EXPECT_EQ(a.seed(), 7u);
  EXPECT_EQ(b.seed(), 7u);
  const std::vector<float> logits(50, 0.0f);
  std::vector<int32_t> ta, tb, tc;
  for (int i = 0; i < 100; ++i) {
    ta.push_back(Next(a, logits));
    tb.push_back(Next(b, logits));
    tc.push_back(Next(c, logits));
  }
  EXPECT_EQ(ta, tb);
  EXPECT_NE(ta, tc);
}

// The generator and the uniform are specified exactly (sampler.h), so this sequence is the same
// on every platform; a change here changes every seeded request's output.
TEST(Sampler, AFixedSeedGivesAFixedSequence) {
  Sampler sampler(Params(1.0f, 2024), 0);
  const std::vector<float> logits = {0.0f, 1.0f, 2.0f, 3.0f};
  std::vector<int32_t> tokens;
  for (int i = 0; i < 16; ++i) tokens.push_back(Next(sampler, logits));
  EXPECT_EQ(tokens, (std::vector<int32_t>{3, 3, 2, 2, 0, 2, 3, 3, 2, 3, 3, 3, 3, 3, 1, 2}));
}

TEST(Sampler, FrequenciesMatchSoftmaxOfLogitsOverTemperature) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f, 1.5f, -kInf};
  for (float temperature : {0.5f, 1.0f, 1.7f}) {
    SCOPED_TRACE(temperature);
    Sampler sampler(Params(temperature), 0);  // top_k = 0, top_p = 1: the full distribution
    ExpectFrequencies(Frequencies(sampler, logits, 100000), Softmax(logits, temperature));
  }
}

TEST(Sampler, ATopKLargerThanTheVocabularyKeepsEverything) {
  const std::vector<float> logits = {0.5f, 0.0f, 1.0f};
  proto::SamplingParams params = Params(1.0f);
  params.top_k = 1000;
  Sampler sampler(params, 0);
  ExpectFrequencies(Frequencies(sampler, logits, 100000), Softmax(logits, 1.0));
}

TEST(Sampler, TopKOneIsGreedy) {
  std::mt19937_64 rng(3);
  proto::SamplingParams params = Params(1.3f);
  params.top_k = 1;
  Sampler sampler(params, 0);
  for (int trial = 0; trial < 200; ++trial) {
    const std::vector<float> logits = TiedLogits(rng, 1 + rng() % 500);
    ASSERT_EQ(Next(sampler, logits), FirstArgmax(logits));
  }
}

TEST(Sampler, TopKKeepsTheKBestAndRenormalises) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 0.5f, 2.5f};
  proto::SamplingParams params = Params(1.0f);
  params.top_k = 2;
  Sampler sampler(params, 0);
  ExpectFrequencies(Frequencies(sampler, logits, 100000), Restricted(Softmax(logits, 1.0), {1, 4}));
}

TEST(Sampler, TopKBreaksTiesTowardsLowerIds) {
  proto::SamplingParams params = Params(1.0f);
  params.top_k = 2;
  Sampler sampler(params, 0);
  const std::vector<float> logits = {1.0f, 2.0f, 1.0f, 2.0f, 2.0f};
  ExpectFrequencies(Frequencies(sampler, logits, 20000), {0.0, 0.5, 0.0, 0.5, 0.0});
}

TEST(Sampler, ATinyTopPAlwaysGivesTheTopToken) {
  std::mt19937_64 rng(4);
  proto::SamplingParams params = Params(1.5f);
  params.top_p = 1e-6f;
  Sampler sampler(params, 0);
  for (int trial = 0; trial < 200; ++trial) {
    const std::vector<float> logits = TiedLogits(rng, 1 + rng() % 500);
    ASSERT_EQ(Next(sampler, logits), FirstArgmax(logits));
  }
}

TEST(Sampler, TopPKeepsTheSmallestSetReachingIt) {
  const std::vector<double> p = {0.15, 0.5, 0.05, 0.3};
  proto::SamplingParams params = Params(1.0f);
  params.top_p = 0.7f;  // 0.5 < 0.7 <= 0.5 + 0.3
  Sampler sampler(params, 0);
  ExpectFrequencies(Frequencies(sampler, LogitsOf(p), 100000), Restricted(p, {1, 3}));
}

TEST(Sampler, TopPOverALargeVocabularyKeepsExactlyTheNucleus) {
  constexpr size_t kVocab = 5000;
  std::mt19937_64 rng(6);
  std::normal_distribution<double> normal(0.0, 2.0);  // implementation-defined, but only data
  std::vector<float> logits(kVocab);
  for (float& l : logits) l = static_cast<float>(normal(rng));
  const std::vector<double> p = Softmax(logits, 1.0);
  std::vector<size_t> order(kVocab);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
  // The nucleus for 0.9, widened by a hair so float rounding cannot matter at its edge.
  std::set<size_t> nucleus;
  double mass = 0.0;
  for (size_t i : order) {
    nucleus.insert(i);
    mass += p[i];
    if (mass >= 0.9 + 1e-4) break;
  }
  ASSERT_GT(nucleus.size(), 200u);  // several rounds of the chunked partial sort
  ASSERT_LT(nucleus.size(), kVocab / 2);

  proto::SamplingParams params = Params(1.0f);
  params.top_p = 0.9f;
  Sampler sampler(params, 0);
  size_t top_count = 0;
  constexpr int kDraws = 4000;
  for (int i = 0; i < kDraws; ++i) {
    const int32_t token = Next(sampler, logits);
    ASSERT_TRUE(nucleus.count(static_cast<size_t>(token))) << token;
    if (static_cast<size_t>(token) == order[0]) ++top_count;
  }
  // The top token's renormalised probability is p / 0.9; 4000 draws: loose bound.
  EXPECT_NEAR(static_cast<double>(top_count) / kDraws, p[order[0]] / 0.9, 0.03);
}

TEST(Sampler, MinPDropsTokensBelowAFractionOfTheTop) {
  const std::vector<double> p = {0.5, 0.3, 0.15, 0.05};
  proto::SamplingParams params = Params(1.0f);
  params.min_p = 0.2f;  // threshold 0.1: drops 0.05 only
  Sampler sampler(params, 0);
  ExpectFrequencies(Frequencies(sampler, LogitsOf(p), 100000), Restricted(p, {0, 1, 2}));
}

TEST(Sampler, MinPOneKeepsOnlyTheTop) {
  proto::SamplingParams params = Params(2.0f);
  params.min_p = 1.0f;
  Sampler sampler(params, 0);
  ExpectFrequencies(Frequencies(sampler, {0.2f, 0.9f, 0.8f}, 5000), {0.0, 1.0, 0.0});
}

TEST(Sampler, TopKAppliesBeforeTopP) {
  const std::vector<double> p = {0.4, 0.3, 0.2, 0.1};
  proto::SamplingParams params = Params(1.0f);
  params.top_k = 3;    // {0.444, 0.333, 0.222} after renormalising
  params.top_p = 0.75f;  // reached by two of those (on the full distribution it would take three)
  Sampler sampler(params, 0);
  ExpectFrequencies(Frequencies(sampler, LogitsOf(p), 100000), Restricted(p, {0, 1}));
}

TEST(Sampler, ATinyTemperatureIsGreedy) {
  std::mt19937_64 rng(8);
  Sampler sampler(Params(1e-4f), 0);
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<float> logits(100);  // distinct values 0.1 apart, shuffled
    for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(i) * 0.1f;
    std::shuffle(logits.begin(), logits.end(), rng);
    ASSERT_EQ(Next(sampler, logits), FirstArgmax(logits));
  }
}

TEST(Sampler, MinusInfinityIsNeverChosen) {
  std::vector<float> logits(40, 0.0f);
  for (size_t i = 0; i < logits.size(); i += 2) logits[i] = -kInf;
  struct Config {
    float temperature;
    int32_t top_k;  // 30: more than the 20 finite logits
    float top_p;
  };
  for (const Config& config : {Config{0.0f, 0, 1.0f}, Config{2.0f, 0, 1.0f},
                               Config{2.0f, 30, 1.0f}, Config{2.0f, 0, 0.99f},
                               Config{2.0f, 30, 0.99f}}) {
    proto::SamplingParams params = Params(config.temperature);
    params.top_k = config.top_k;
    params.top_p = config.top_p;
    Sampler sampler(params, 0);
    std::set<int32_t> seen;
    for (int i = 0; i < 5000; ++i) {
      const int32_t token = Next(sampler, logits);
      ASSERT_EQ(token % 2, 1);
      seen.insert(token);
    }
    // Every finite token remains possible (top_p 0.99 of 20 equal tokens keeps all 20).
    EXPECT_EQ(seen.size(), config.temperature == 0.0f ? 1u : 20u);
  }
}

TEST(Sampler, RepetitionPenaltyFlipsTheGreedyChoice) {
  proto::SamplingParams params = Params(0.0f);
  params.repetition_penalty = 2.0f;
  Sampler sampler(params, 0);
  const std::vector<float> logits = {2.0f, 1.5f, 0.0f};  // 2 / 2 = 1 < 1.5
  EXPECT_EQ(Next(sampler, logits), 0);
  EXPECT_EQ(Next(sampler, logits, {0}, {}), 1);  // the prompt counts
  EXPECT_EQ(Next(sampler, logits, {2}, {0}), 1);  // and the output
  EXPECT_EQ(Next(sampler, {-1.0f, -1.5f}, {}, {0}), 1);  // -1 * 2 = -2 < -1.5
}

TEST(Sampler, LogitBiasMovesTheGreedyChoiceAndCanBanAToken) {
  proto::SamplingParams params = Params(0.0f);
  params.logit_bias = {{2, 1.5f}};
  Sampler sampler(params, 0);
  EXPECT_EQ(Next(sampler, {2.0f, 1.0f, 0.6f}), 2);  // 0.6 + 1.5 = 2.1 > 2
  EXPECT_EQ(Next(sampler, {2.0f, 1.0f, 0.4f}), 0);  // 1.9 < 2
  EXPECT_FALSE(sampler.device_samplable(0));
  EXPECT_FALSE(sampler.device_samplable(100));
  // -100 bans in practice: a token 100 logits behind has probability e^-100 (well under one
  // draw in 10^40), and none of 20,000 draws takes it.
  proto::SamplingParams ban = Params(1.0f, 7);
  ban.logit_bias = {{0, -100.0f}};
  Sampler banning(ban, 0);
  const std::vector<double> freq = Frequencies(banning, {3.0f, 0.0f, 0.0f}, 20000);
  EXPECT_EQ(freq[0], 0.0);
  EXPECT_NEAR(freq[1], 0.5, 0.02);
}

// vLLM's allowed_token_ids and bad_words (token_bans.h): draws avoid what they ban, logprobs
// stay raw, the row is sampled on the host, and a request that bans everything is told so.
TEST(Sampler, AllowedTokenIdsAndBadWordsBanTheirTokens) {
  proto::SamplingParams params = Params(0.0f);
  params.logprobs = true;
  params.allowed_token_ids = {1, 2, 3};
  params.bad_words = {{3}, {1, 2}};
  Sampler sampler(params, 0);
  EXPECT_FALSE(sampler.device_samplable(0));
  const std::vector<float> logits = {9.0f, 1.0f, 4.0f, 8.0f};
  Result<SampleResult> r = sampler.Sample(logits, kNoTokens, kNoTokens);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->token_id, 2);  // 0 not allowed, 3 a bad word
  EXPECT_NEAR(*r->logprob, LogSoftmaxAt(logits, 2), 1e-6);
  EXPECT_EQ(Next(sampler, logits, {}, {2}), 2);
  EXPECT_EQ(Next(sampler, logits, {}, {2, 1}), 1);  // "1 2" would complete a bad word
  EXPECT_EQ(Next(sampler, logits, {1}, {}), 2);  // the prompt does not count
  // Sampled: nothing banned is ever drawn.
  proto::SamplingParams sampled = Params(1.0f, 5);
  sampled.allowed_token_ids = {0, 2};
  sampled.bad_words = {{0, 0}};
  Sampler drawing(sampled, 0);
  std::vector<int32_t> out;
  for (int i = 0; i < 500; ++i) {
    const int32_t t = Next(drawing, {1.0f, 1.0f, 1.0f, 1.0f}, {}, out);
    ASSERT_TRUE(t == 0 || t == 2) << t;
    ASSERT_FALSE(!out.empty() && out.back() == 0 && t == 0) << i;
    out.push_back(t);
  }
  // Everything banned: the client's error, named.
  proto::SamplingParams none = Params(0.0f);
  none.allowed_token_ids = {1};
  none.bad_words = {{1}};
  Sampler nothing(none, 0);
  Result<SampleResult> empty = nothing.Sample(logits, kNoTokens, kNoTokens);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(empty.status().message(), HasSubstr("'allowed_token_ids' and 'bad_words'"));
  // A broken logit behind a ban is still an error.
  Sampler broken(params, 0);
  auto nan = broken.Sample(std::vector<float>{std::nanf(""), 1.0f, 2.0f, 0.0f}, kNoTokens, kNoTokens);
  ASSERT_FALSE(nan.ok());
  EXPECT_THAT(nan.status().message(), HasSubstr("logit of token 0 is nan"));
}

TEST(Sampler, LogitBiasComesBeforeTheRepetitionPenalty) {
  // vLLM's order: the bias is added first, so the penalty divides the biased logit.
  proto::SamplingParams params = Params(0.0f);
  params.logit_bias = {{0, 2.0f}};
  params.repetition_penalty = 2.0f;
  Sampler sampler(params, 0);
  // Token 0 is in the prompt, with a negative logit, where the two orders disagree: biased
  // first (-1 + 2) / 2 = 0.5, penalised first -1 * 2 + 2 = 0.
  EXPECT_EQ(Next(sampler, {-1.0f, 0.3f}, {0}, {}), 0);   // 0.5 > 0.3
  EXPECT_EQ(Next(sampler, {-1.0f, 0.6f}, {0}, {}), 1);   // 0.5 < 0.6
}

TEST(Sampler, MinTokensHoldsBackEveryEndingTokenUntilReached) {
  proto::SamplingParams params = Params(0.0f);
  params.min_tokens = 2;
  Sampler sampler(params, 0, /*end_tokens=*/{0, 3});
  const std::vector<float> logits = {5.0f, 1.0f, 2.0f, 4.0f};
  EXPECT_EQ(Next(sampler, logits, {9}, {}), 2);      // 0 and 3 held back: 2 is next best
  EXPECT_EQ(Next(sampler, logits, {9}, {2}), 2);     // one token so far, still fewer than 2
  EXPECT_EQ(Next(sampler, logits, {9}, {2, 2}), 0);  // two: ending tokens are back
  // On the host while it holds ending tokens back; then the device may draw again.
  EXPECT_FALSE(sampler.device_samplable(0));
  EXPECT_FALSE(sampler.device_samplable(1));
  EXPECT_TRUE(sampler.device_samplable(2));
  // Sampled, not greedy: nothing ending is ever drawn while held back.
  proto::SamplingParams sampled = Params(1.0f, 3);
  sampled.min_tokens = 5;
  Sampler drawing(sampled, 0, {0, 3});
  for (int i = 0; i < 2000; ++i) {
    const int32_t t = Next(drawing, logits, {9}, {1, 1});
    ASSERT_TRUE(t == 1 || t == 2) << t;
  }
  // Without ending tokens (ignore_eos and no stop ids) min_tokens changes nothing.
  Sampler no_end(params, 0, {});
  EXPECT_EQ(Next(no_end, logits, {9}, {}), 0);
  EXPECT_TRUE(no_end.device_samplable(0));
  // A broken logit behind a held-back token is still an error, not hidden by the -inf.
  Sampler broken(params, 0, {0, 3});
  const std::vector<float> broken_logits = {std::nanf(""), 1.0f, 2.0f, 0.0f};
  auto nan = broken.Sample(broken_logits, kNoTokens, kNoTokens);
  ASSERT_FALSE(nan.ok());
  EXPECT_THAT(nan.status().message(), HasSubstr("logit of token 0 is nan"));
}

TEST(Sampler, LogprobsStayRawUnderLogitBiasAndMinTokens) {
  proto::SamplingParams params = Params(0.0f);
  params.logprobs = true;
  params.logit_bias = {{1, 10.0f}};
  params.min_tokens = 1;
  Sampler sampler(params, 0, {0});
  const std::vector<float> logits = {3.0f, 1.0f, 0.0f};
  Result<SampleResult> r = sampler.Sample(logits, kNoTokens, kNoTokens);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->token_id, 1);
  EXPECT_NEAR(*r->logprob, LogSoftmaxAt(logits, 1), 1e-6);
}

TEST(Sampler, PresenceAndFrequencyPenaltiesCountTheOutputOnly) {
  proto::SamplingParams presence = Params(0.0f);
  presence.presence_penalty = 0.5f;
  Sampler p(presence, 0);
  EXPECT_EQ(Next(p, {1.0f, 0.8f}, {0, 0}, {}), 0);  // prompt only: no penalty
  EXPECT_EQ(Next(p, {1.0f, 0.8f}, {0, 0}, {0}), 1);  // 0.5 < 0.8

  proto::SamplingParams frequency = Params(0.0f);
  frequency.frequency_penalty = 0.15f;
  Sampler f(frequency, 0);
  EXPECT_EQ(Next(f, {1.0f, 0.8f}, {}, {0}), 0);     // 0.85 > 0.8
  EXPECT_EQ(Next(f, {1.0f, 0.8f}, {}, {0, 0}), 1);  // 0.70 < 0.8
}

TEST(Sampler, PenaltiesShapeTheSampledDistribution) {
  proto::SamplingParams params = Params(1.0f);
  params.presence_penalty = 1.0f;
  Sampler sampler(params, 0);
  const std::vector<float> logits = {0.0f, 0.0f};
  const std::vector<int32_t> generated = {0};
  int zeros = 0;
  constexpr int kDraws = 100000;
  for (int i = 0; i < kDraws; ++i) zeros += Next(sampler, logits, {}, generated) == 0;
  const double expected = std::exp(-1.0) / (1.0 + std::exp(-1.0));
  EXPECT_NEAR(static_cast<double>(zeros) / kDraws, expected, 0.01);
}

// The engine's loop: each step appends the chosen token. The incrementally counting Sampler must
// choose what a fresh Sampler (counting from scratch) chooses, including after a rollback.
TEST(Sampler, IncrementalPenaltyCountsMatchAFreshRecount) {
  std::mt19937_64 rng(9);
  proto::SamplingParams params = Params(0.0f);
  params.repetition_penalty = 1.3f;
  params.presence_penalty = 0.2f;
  params.frequency_penalty = 0.1f;
  Sampler running(params, 0);
  const std::vector<int32_t> prompt = {1, 2, 3, 2};
  std::vector<int32_t> generated;
  for (int step = 0; step < 300; ++step) {
    if (step == 150) generated.resize(40);  // e.g. rejected speculative tokens
    std::vector<float> logits(30);
    for (float& l : logits) l = static_cast<float>(rng() % 100) * 0.05f;
    Sampler fresh(params, 0);
    const int32_t expected = Next(fresh, logits, prompt, generated);
    ASSERT_EQ(Next(running, logits, prompt, generated), expected) << "step " << step;
    generated.push_back(expected);
  }
}

TEST(Sampler, LogprobIsTheRawLogSoftmaxOfTheChosenToken) {
  proto::SamplingParams params = Params(0.0f);
  params.logprobs = true;
  Sampler sampler(params, 0);
  Result<SampleResult> result =
      sampler.Sample(std::vector<float>{1.0f, 2.0f, 3.0f, -kInf}, kNoTokens, kNoTokens);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->token_id, 2);
  ASSERT_TRUE(result->logprob.has_value());
  const double expected = 3.0 - std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  EXPECT_NEAR(*result->logprob, expected, 1e-6);  // -0.4076
}

TEST(Sampler, LogprobIgnoresPenaltiesTemperatureAndFilters) {
  proto::SamplingParams params = Params(0.6f);
  params.logprobs = true;
  params.repetition_penalty = 1.5f;
  params.frequency_penalty = 0.3f;
  params.top_k = 3;
  Sampler sampler(params, 0);
  const std::vector<float> logits = {0.5f, 1.5f, -0.5f, 1.0f, 0.0f};
  double norm = 0.0;
  for (float l : logits) norm += std::exp(static_cast<double>(l));
  for (int i = 0; i < 50; ++i) {
    Result<SampleResult> result = sampler.Sample(logits, kNoTokens, std::vector<int32_t>{1, 1});
    ASSERT_TRUE(result.ok());
    ASSERT_TRUE(result->logprob.has_value());
    const double expected = logits[static_cast<size_t>(result->token_id)] - std::log(norm);
    ASSERT_NEAR(*result->logprob, expected, 1e-6);
  }
}

TEST(Sampler, TopLogprobsAreTheMostLikelyRawTokensInOrder) {
  // A sampled run with penalties and top-k: the alternatives are still the raw distribution's.
  proto::SamplingParams params = Params(0.8f);
  params.logprobs = true;
  params.top_logprobs = 3;
  params.repetition_penalty = 1.3f;
  params.top_k = 2;
  Sampler sampler(params, 7);
  std::mt19937 rng(11);
  for (int step = 0; step < 100; ++step) {
    std::vector<float> logits(50);
    for (float& l : logits) l = static_cast<float>(rng() % 40) * 0.1f;  // many ties
    logits[3] = -kInf;
    Result<SampleResult> result = sampler.Sample(logits, kNoTokens, std::vector<int32_t>{5});
    ASSERT_TRUE(result.ok());
    // Brute force: order by logit, ties by lower id.
    std::vector<int32_t> order(logits.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
    ASSERT_EQ(result->top.size(), 3u);
    for (size_t j = 0; j < 3; ++j) {
      EXPECT_EQ(result->top[j].token_id, order[j]) << "step " << step << " rank " << j;
      EXPECT_EQ(result->top[j].logprob, LogSoftmaxAt(logits, order[j]));
    }
    EXPECT_EQ(*result->logprob, LogSoftmaxAt(logits, result->token_id));
  }
}

TEST(Sampler, TopLogprobsOfAGreedyTokenMatchItsOwn) {
  proto::SamplingParams params = Params(0.0f);
  params.logprobs = true;
  params.top_logprobs = 20;
  Sampler sampler(params, 0);
  // Fewer finite logits than asked for: only those are listed.
  Result<SampleResult> result =
      sampler.Sample(std::vector<float>{1.0f, 3.0f, -kInf, 2.0f}, kNoTokens, kNoTokens);
  ASSERT_TRUE(result.ok());
  ASSERT_EQ(result->top.size(), 3u);
  EXPECT_EQ(result->top[0].token_id, result->token_id);
  EXPECT_EQ(result->top[0].logprob, *result->logprob);  // bit for bit
  EXPECT_EQ(result->top[1].token_id, 3);
  EXPECT_EQ(result->top[2].token_id, 0);
  // Without logprobs, top_logprobs asks for nothing (the validator refuses that pairing).
  params.logprobs = false;
  Sampler plain(params, 0);
  Result<SampleResult> none = plain.Sample(std::vector<float>{1.0f, 3.0f}, kNoTokens, kNoTokens);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->top.empty());
}

TEST(Sampler, LogprobIsOnlyComputedWhenRequested) {
  Sampler sampler(Params(0.0f), 0);
  Result<SampleResult> result = sampler.Sample(std::vector<float>{1.0f}, kNoTokens, kNoTokens);
  ASSERT_TRUE(result.ok());
  EXPECT_FALSE(result->logprob.has_value());
}

TEST(Sampler, BadLogitsAreErrorsNotCrashes) {
  for (float temperature : {0.0f, 1.0f}) {
    Sampler sampler(Params(temperature), 0);
    Result<SampleResult> empty = sampler.Sample({}, kNoTokens, kNoTokens);
    EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);

    Result<SampleResult> nan = sampler.Sample(
        std::vector<float>{0.0f, 1.0f, std::nanf("")}, kNoTokens, kNoTokens);
    EXPECT_EQ(nan.status().code(), StatusCode::kInternal);
    EXPECT_THAT(nan.status().message(), HasSubstr("token 2 is nan"));

    Result<SampleResult> inf =
        sampler.Sample(std::vector<float>{kInf, 1.0f}, kNoTokens, kNoTokens);
    EXPECT_EQ(inf.status().code(), StatusCode::kInternal);
    EXPECT_THAT(inf.status().message(), HasSubstr("token 0 is +inf"));

    Result<SampleResult> banned =
        sampler.Sample(std::vector<float>{-kInf, -kInf}, kNoTokens, kNoTokens);
    EXPECT_EQ(banned.status().code(), StatusCode::kInternal);
    EXPECT_THAT(banned.status().message(), HasSubstr("-inf"));
  }
}

TEST(Sampler, HistoryIsCheckedOnlyWhenAPenaltyReadsIt) {
  const std::vector<float> logits = {0.0f, 0.4f};
  const std::vector<int32_t> bad = {0, 7};
  Sampler plain(Params(0.0f), 0);
  EXPECT_TRUE(plain.Sample(logits, bad, bad).ok());

  proto::SamplingParams params = Params(0.0f);
  params.frequency_penalty = 0.5f;
  Sampler penalized(params, 0);
  Result<SampleResult> result = penalized.Sample(logits, kNoTokens, bad);
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("token id 7 at position 1"));
  EXPECT_EQ(Next(penalized, logits, {}, {1}), 0);  // recovers: 0.4 - 0.5 < 0
}

// Results depend only on the logits, the history and how many draws came before: not on the
// sizes and filters of earlier calls (scratch buffers are reused), nor on failed calls.
TEST(Sampler, ResultsDoNotDependOnEarlierCallsBeyondTheDrawCount) {
  proto::SamplingParams params = Params(1.0f, 77);
  params.top_k = 5;
  params.top_p = 0.95f;
  params.min_p = 0.01f;
  params.repetition_penalty = 1.2f;
  std::mt19937_64 rng(10);
  std::vector<float> big(2000);
  for (float& l : big) l = static_cast<float>(rng() % 1000) * 0.01f;
  std::vector<std::vector<float>> small;
  for (int i = 0; i < 100; ++i) small.push_back(TiedLogits(rng, 10));

  Sampler a(params, 0);
  Sampler b(params, 0);
  Next(a, big, {5, 6, 7}, {1999});                     // a large, penalized first call
  Next(b, small[0], {}, {});                           // a small, unpenalized one
  EXPECT_FALSE(a.Sample({}, kNoTokens, kNoTokens).ok());  // failed calls draw nothing
  EXPECT_FALSE(b.Sample(std::vector<float>{std::nanf("")}, kNoTokens, kNoTokens).ok());
  std::vector<int32_t> history_a, history_b;
  for (const auto& logits : small) {
    history_a.push_back(Next(a, logits, {1}, history_a));
    history_b.push_back(Next(b, logits, {1}, history_b));
  }
  EXPECT_EQ(history_a, history_b);
}

TEST(Sampler, InvalidParamsAreTamedNotTrusted) {
  const std::vector<float> logits = {0.5f, 2.0f, 1.0f};
  proto::SamplingParams nan = Params(std::nanf(""));
  nan.top_p = std::nanf("");
  nan.min_p = std::nanf("");
  nan.repetition_penalty = std::nanf("");
  nan.presence_penalty = kInf;
  nan.frequency_penalty = -kInf;
  Sampler nan_sampler(nan, 0);
  EXPECT_TRUE(nan_sampler.greedy());
  EXPECT_EQ(Next(nan_sampler, logits, {1}, {1, 1}), 1);

  proto::SamplingParams extreme = Params(1.0f);
  extreme.top_k = -3;
  extreme.top_p = 0.0f;  // still keeps one token
  extreme.min_p = 7.0f;
  extreme.repetition_penalty = -1.0f;
  Sampler extreme_sampler(extreme, 0);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(Next(extreme_sampler, logits, {}, {1}), 1);

  Sampler hot(Params(kInf), 0);
  EXPECT_TRUE(hot.greedy());
}

}  // namespace
}  // namespace bmad::sampling
