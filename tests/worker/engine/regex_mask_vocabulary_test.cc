// RegexConstraint's mask over the real Llama-2 vocabulary (32,000 tokens, byte tokens, pieces
// sharing long prefixes), against a flat walk of every token's bytes from the output's state:
// the walk in text order, sharing prefixes and passing over dead ones, allows exactly the same
// tokens, step after step, including when the DFA's cache starts over part-way.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tests/worker/tokenizer/vocabulary_fixtures.h"
#include "worker/sampling/regex_constraint.h"
#include "worker/sampling/regex_dfa.h"

namespace bmad::sampling {
namespace {

using tokenizer::testing::kLlama2File;
using tokenizer::testing::SharedTokenizer;

std::shared_ptr<const TokenTexts> Llama2Texts() {
  const tokenizer::Tokenizer& t = SharedTokenizer(kLlama2File);
  std::vector<std::string> pieces(static_cast<size_t>(t.vocab_size()));
  for (int32_t id = 0; id < t.vocab_size(); ++id) pieces[static_cast<size_t>(id)] = t.TokenPiece(id);
  return std::make_shared<const TokenTexts>(pieces);
}

// What the constraint allows after `output`, walked token by token: each token's bytes from the
// output's state through a DFA of its own; an end token when the output matches.
std::set<int32_t> FlatWalk(const TokenTexts& texts, const std::shared_ptr<const RegexNfa>& nfa,
                           const std::string& output, int32_t end_token) {
  RegexDfa dfa(nfa);
  const auto walk = [&](int32_t state, std::string_view bytes) {
    for (const char c : bytes) {
      if (state == RegexDfa::kDead) break;
      state = dfa.Step(state, static_cast<uint8_t>(c));
    }
    return state;
  };
  std::set<int32_t> allowed;
  for (size_t id = 0; id < texts.size(); ++id) {
    // From the start each time: a start-over of this DFA's cache leaves no state to go on from.
    const int32_t after_output = walk(dfa.start(), output);
    if (static_cast<int32_t>(id) == end_token) {
      if (dfa.accepting(after_output)) allowed.insert(end_token);
      continue;
    }
    const std::string_view text = texts.text(static_cast<int64_t>(id));
    if (!text.empty() && walk(after_output, text) != RegexDfa::kDead) allowed.insert(static_cast<int32_t>(id));
  }
  return allowed;
}

TEST(RegexMaskVocabulary, TheSortedWalkAllowsWhatAFlatWalkAllows) {
  const std::shared_ptr<const TokenTexts> texts = Llama2Texts();
  constexpr int32_t kEnd = 2;  // Llama-2's </s>
  std::mt19937 random(7);
  for (const std::string pattern : {"\\d{3}-[a-z]{2,5}( [A-Z][a-z]{1,6})?", "(yes|no|maybe|[A-Z][a-z]+( [a-z]+)*)",
                                    "[^\"]{0,40}", "caf\xC3\xA9|\\u4e2d+|[\\u00e0-\\u00ff]{2}",
                                    "(ab|a)*c?\\s[ -~]{1,3}"}) {
    SCOPED_TRACE(pattern);
    Result<std::shared_ptr<const RegexNfa>> nfa = RegexNfa::Compile(pattern);
    ASSERT_TRUE(nfa.ok()) << nfa.status().ToString();
    RegexConstraint constraint(texts, {kEnd}, *nfa);
    std::vector<int32_t> generated;
    std::string output;
    for (int step = 0; step < 12; ++step) {
      std::vector<float> scores(texts->size(), 0.0f);
      ASSERT_TRUE(constraint.Mask(scores).ok());
      std::vector<int32_t> allowed;
      for (size_t id = 0; id < scores.size(); ++id) {
        if (scores[id] == 0.0f) allowed.push_back(static_cast<int32_t>(id));
      }
      EXPECT_EQ(std::set<int32_t>(allowed.begin(), allowed.end()), FlatWalk(*texts, *nfa, output, kEnd))
          << "after \"" << output << "\"";
      // On with a token drawn from those allowed (the end only when nothing else is).
      std::erase(allowed, kEnd);
      if (allowed.empty()) break;
      const int32_t next = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(random)];
      generated.push_back(next);
      output += texts->text(next);
      ASSERT_TRUE(constraint.Sync(generated).ok());
    }
  }
}

// The DFA's cache bounded to a few states: it starts over again and again within one mask, part
// way through the shared prefixes, and the walk still agrees, step after step.
TEST(RegexMaskVocabulary, AgreesWhenTheDfaStartsOverPartWay) {
  const std::shared_ptr<const TokenTexts> texts = Llama2Texts();
  Result<std::shared_ptr<const RegexNfa>> nfa = RegexNfa::Compile("[A-Z][a-z]{1,8}( [a-z]{1,8}){0,20}");
  ASSERT_TRUE(nfa.ok()) << nfa.status().ToString();
  RegexConstraint constraint(texts, {2}, *nfa, /*max_dfa_states=*/6);
  std::vector<int32_t> generated;
  std::string output;
  for (const std::string next : {"The", " cat", " sat"}) {
    std::vector<float> scores(texts->size(), 0.0f);
    const uint64_t generation = constraint.dfa_generation();
    ASSERT_TRUE(constraint.Mask(scores).ok());
    EXPECT_GT(constraint.dfa_generation(), generation + 1) << "the cache did not start over during the mask";
    std::set<int32_t> allowed;
    for (size_t id = 0; id < scores.size(); ++id) {
      if (scores[id] == 0.0f) allowed.insert(static_cast<int32_t>(id));
    }
    EXPECT_EQ(allowed, FlatWalk(*texts, *nfa, output, 2)) << "after \"" << output << "\"";
    int32_t id = 0;  // the token whose text is `next`
    while (static_cast<size_t>(id) < texts->size() && texts->text(id) != next) ++id;
    ASSERT_LT(static_cast<size_t>(id), texts->size()) << next;
    generated.push_back(id);
    output += next;
    ASSERT_TRUE(constraint.Sync(generated).ok()) << output;
  }
}

}  // namespace
}  // namespace bmad::sampling
