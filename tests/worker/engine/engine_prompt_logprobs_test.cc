// Prompt log-probabilities through the engine (stories260K): every prompt position after the
// first exactly once, in order, in chunks within scheduler.max_prompt_logprob_tokens, equal to
// what the model gives the same tokens when it generates them; a cached prefix is not reused
// before them.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "tests/worker/engine/engine_fixture.h"

namespace bmad::engine {
namespace {

struct Scored {
  std::vector<int64_t> offsets;  // each output's prompt_logprob_offset, in order
  std::vector<float> logprobs;
  std::vector<uint32_t> ranks;
  std::vector<int32_t> top_ids;
  std::vector<float> top_logprobs;
  std::vector<int32_t> tokens;  // generated
  std::vector<float> token_logprobs;
};

std::map<uint64_t, Scored> RunScored(Engine& engine) {
  std::map<uint64_t, Scored> out;
  std::vector<RequestOutput> outputs;
  for (int i = 0; i < 2000 && engine.HasWork(); ++i) {
    outputs.clear();
    EXPECT_TRUE(engine.Step(&outputs).ok());
    for (const RequestOutput& o : outputs) {
      EXPECT_NE(o.reason, proto::FinishReason::kError) << o.error;
      Scored& s = out[o.id];
      if (!o.prompt_logprobs.empty()) s.offsets.push_back(o.prompt_logprob_offset);
      s.logprobs.insert(s.logprobs.end(), o.prompt_logprobs.begin(), o.prompt_logprobs.end());
      s.ranks.insert(s.ranks.end(), o.prompt_ranks.begin(), o.prompt_ranks.end());
      s.top_ids.insert(s.top_ids.end(), o.prompt_top_token_ids.begin(), o.prompt_top_token_ids.end());
      s.top_logprobs.insert(s.top_logprobs.end(), o.prompt_top_logprobs.begin(), o.prompt_top_logprobs.end());
      s.tokens.insert(s.tokens.end(), o.token_ids.begin(), o.token_ids.end());
      s.token_logprobs.insert(s.token_logprobs.end(), o.logprobs.begin(), o.logprobs.end());
    }
  }
  EXPECT_FALSE(engine.HasWork());
  return out;
}

TEST(EnginePromptLogprobs, EveryPositionOnceAndAsTheModelGeneratesIt) {
  Fixture f(/*num_blocks=*/64, /*max_batch_tokens=*/64);
  f.options.scheduler.max_prompt_logprob_tokens = 5;  // a 20-token prompt takes several steps
  f.engine = std::make_unique<Engine>(f.options, *f.model, *f.cache, *f.tok, *f.backend, f.clock, nullptr);
  // The reference: 12 greedy tokens after a prompt, each with its log-probability.
  const std::vector<int32_t> prompt = f.tok->Encode("Once upon a time", true);
  EngineRequest generate = Greedy(1, prompt, 12);
  generate.sampling.logprobs = true;
  ASSERT_TRUE(f.engine->Add(generate).ok());
  const Scored reference = RunScored(*f.engine)[1];
  ASSERT_EQ(reference.tokens.size(), 12u);

  // The prompt and those tokens, scored: the same log-probabilities at their positions, each
  // greedy token the most likely (rank 1, first alternative); the prompt's cached blocks (from
  // the run above) are not reused before the positions scored.
  std::vector<int32_t> whole = prompt;
  whole.insert(whole.end(), reference.tokens.begin(), reference.tokens.end());
  EngineRequest score = Greedy(2, whole, 1);
  score.sampling.prompt_logprobs = 2;
  ASSERT_TRUE(f.engine->Add(score).ok());
  const Scored s = RunScored(*f.engine)[2];
  const size_t positions = whole.size() - 1;
  ASSERT_EQ(s.logprobs.size(), positions);
  ASSERT_EQ(s.ranks.size(), positions);
  ASSERT_EQ(s.top_ids.size(), 2 * positions);
  ASSERT_EQ(s.top_logprobs.size(), 2 * positions);
  // In chunks of at most 5 rows, in order, from position 1.
  ASSERT_FALSE(s.offsets.empty());
  EXPECT_EQ(s.offsets.front(), 1);
  for (size_t i = 1; i < s.offsets.size(); ++i) EXPECT_EQ(s.offsets[i] - s.offsets[i - 1], 5) << i;
  for (size_t k = 0; k < reference.tokens.size(); ++k) {
    const size_t entry = prompt.size() - 1 + k;  // position prompt.size() + k
    EXPECT_NEAR(s.logprobs[entry], reference.token_logprobs[k], 2e-3) << "generated token " << k;
    EXPECT_EQ(s.ranks[entry], 1u) << k;
    EXPECT_EQ(s.top_ids[2 * entry], reference.tokens[k]) << k;
    EXPECT_FLOAT_EQ(s.top_logprobs[2 * entry], s.logprobs[entry]) << k;
  }
  for (size_t i = 0; i < positions; ++i) {
    EXPECT_LE(s.logprobs[i], 0.0f);
    EXPECT_GE(s.ranks[i], 1u);
    EXPECT_GE(s.top_logprobs[2 * i], s.top_logprobs[2 * i + 1]);  // most likely first
    EXPECT_GE(s.top_logprobs[2 * i], s.logprobs[i]);
  }
  // And it still generates its token after them.
  EXPECT_EQ(s.tokens.size(), 1u);
}

TEST(EnginePromptLogprobs, ScoredBesideOrdinaryRequestsWithoutAlternatives) {
  Fixture f(/*num_blocks=*/64, /*max_batch_tokens=*/64);
  const std::vector<int32_t> prompt = f.tok->Encode("The little dog ran to the park", true);
  EngineRequest plain = Greedy(1, prompt, 6);
  ASSERT_TRUE(f.engine->Add(plain).ok());
  EngineRequest scored = Greedy(2, prompt, 6);
  scored.sampling.prompt_logprobs = 0;
  ASSERT_TRUE(f.engine->Add(scored).ok());
  std::map<uint64_t, Scored> out = RunScored(*f.engine);
  EXPECT_TRUE(out[1].logprobs.empty());
  EXPECT_EQ(out[2].logprobs.size(), prompt.size() - 1);
  EXPECT_TRUE(out[2].top_ids.empty());
  // The rows beside them do not change what either generates.
  EXPECT_EQ(out[1].tokens, out[2].tokens);
}

}  // namespace
}  // namespace bmad::engine
