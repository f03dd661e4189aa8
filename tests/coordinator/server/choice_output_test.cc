// EchoTexts: what each choice starts with under echo; ChoiceFromChunk: a chunk as a choice.
#include "coordinator/server/choice_output.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "tests/worker/tokenizer/vocabulary_fixtures.h"

namespace bmad::coord {
namespace {

const tokenizer::Tokenizer* EchoTestTokenizer() {
  return &tokenizer::testing::SharedTokenizer(tokenizer::testing::kStoriesFile);
}

std::vector<uint32_t> Tokens(const tokenizer::Tokenizer& tok, const std::string& text) {
  const std::vector<int32_t> ids = tok.Encode(text, /*add_special=*/true);
  return {ids.begin(), ids.end()};
}

TEST(EchoTexts, CompletionsEchoTheTextGivenOrTheTokensDecodedWithoutTheBos) {
  const tokenizer::Tokenizer* loaded = EchoTestTokenizer();
  ASSERT_TRUE(loaded);
  const tokenizer::Tokenizer& tok = *loaded;
  http::CompletionRequest cr;
  cr.prompts = {{false, "Once upon a time", {}}, {true, "", {}}};
  const std::vector<std::vector<uint32_t>> prompts = {Tokens(tok, "Once upon a time"), Tokens(tok, "The cat sat")};
  EXPECT_TRUE(EchoTexts(cr, prompts, tok).empty());  // no echo asked
  cr.echo = true;
  EXPECT_EQ(EchoTexts(cr, prompts, tok), (std::vector<std::string>{"Once upon a time", "The cat sat"}));
  // Cut by truncate_prompt_tokens: what the model saw, decoded (here the last two tokens).
  cr.truncate_prompt_tokens = 2;
  const std::vector<uint32_t> all = Tokens(tok, "Once upon a time");
  const std::vector<std::vector<uint32_t>> cut = {{all.end() - 2, all.end()}};
  const std::vector<int32_t> kept(all.end() - 2, all.end());
  EXPECT_EQ(EchoTexts(cr, cut, tok), (std::vector<std::string>{tok.Decode(kept)}));
  EXPECT_EQ(EchoTexts(cr, cut, tok)[0], "a time");  // as a text would start
  // Per choice: prompt by prompt, n each; past the end, nothing.
  const std::vector<std::string> texts = {"a", "b"};
  EXPECT_EQ(EchoTextOf(texts, 3, 2), "a");
  EXPECT_EQ(EchoTextOf(texts, 3, 3), "b");
  EXPECT_EQ(EchoTextOf(texts, 3, 6), "");
  EXPECT_EQ(EchoTextOf({}, 1, 0), "");
}

TEST(EchoTexts, ChatEchoesTheFinalMessageOnlyWhenItIsTheAssistants) {
  const tokenizer::Tokenizer* loaded = EchoTestTokenizer();
  ASSERT_TRUE(loaded);
  http::CompletionRequest cr;
  cr.chat = true;
  cr.echo = true;
  cr.messages = {{http::ChatRole::kUser, "Hi"}, {http::ChatRole::kAssistant, "Hello, "}};
  EXPECT_EQ(EchoTexts(cr, {{1, 2}}, *loaded), (std::vector<std::string>{"Hello, "}));
  cr.messages.pop_back();
  EXPECT_EQ(EchoTexts(cr, {{1, 2}}, *loaded), (std::vector<std::string>{""}));
}

TEST(PromptLogprobsForTheResponse, EchoedTokensAndVllmsListFromTheScoredPositions) {
  const tokenizer::Tokenizer* loaded = EchoTestTokenizer();
  ASSERT_TRUE(loaded);
  const tokenizer::Tokenizer& tok = *loaded;
  const std::vector<uint32_t> prompt = Tokens(tok, "Once upon a time");  // BOS first
  ASSERT_EQ(prompt.size(), 5u);
  proto::TokenChunk scored;  // positions 1..3 only (4 never came), two alternatives each
  scored.prompt_logprob_offset = 1;
  scored.prompt_logprobs = {-1.0f, -2.0f, -3.0f};
  scored.prompt_ranks = {1, 4, 2};
  scored.prompt_top_token_ids = {prompt[1], 7, 9, 10, prompt[3], 11};
  scored.prompt_top_logprobs = {-1.0f, -1.5f, -0.5f, -0.75f, -2.5f, -3.0f};

  const std::vector<http::TokenLogprob> echoed = EchoedPromptLogprobs(prompt, scored, 1, tok);
  ASSERT_EQ(echoed.size(), 4u);  // the BOS, then positions 1..3
  EXPECT_TRUE(echoed[0].absent);
  EXPECT_EQ(echoed[0].token, "");   // the BOS has no text
  EXPECT_EQ(echoed[1].token, "Once");  // the text's first token, without its space
  EXPECT_EQ(echoed[2].token, " upon");
  EXPECT_FLOAT_EQ(echoed[2].logprob, -2.0f);
  ASSERT_EQ(echoed[2].top.size(), 1u);  // one alternative asked
  EXPECT_EQ(echoed[2].top[0].id, 9);

  const std::vector<http::PromptPositionLogprobs> vllm = VllmPromptLogprobs(prompt, scored, 2, tok);
  ASSERT_EQ(vllm.size(), prompt.size());
  EXPECT_TRUE(vllm[0].absent);
  EXPECT_TRUE(vllm[4].absent);  // never came
  // The prompt's token first with its rank; an alternative that is the token itself is not
  // listed twice.
  ASSERT_EQ(vllm[1].candidates.size(), 2u);
  EXPECT_EQ(vllm[1].candidates[0].id, prompt[1]);
  EXPECT_EQ(vllm[1].candidates[0].rank, 1u);
  EXPECT_EQ(vllm[1].candidates[0].decoded, " Once");
  EXPECT_EQ(vllm[1].candidates[1].id, 7);
  EXPECT_EQ(vllm[1].candidates[1].rank, 2u);
  ASSERT_EQ(vllm[2].candidates.size(), 3u);
  EXPECT_EQ(vllm[2].candidates[0].rank, 4u);
  EXPECT_EQ(vllm[2].candidates[1].rank, 1u);
}

}  // namespace
}  // namespace bmad::coord
