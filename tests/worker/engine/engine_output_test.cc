// What a request's sampling parameters make of its output, through the engine and through
// `bmad generate`'s loop alike: min_tokens, the stop that ended it (vLLM's stop_reason),
// logit_bias, JSON output (json_object and json_schema), migrated requests that continue
// exactly, and cached prompt tokens.
#include "worker/engine/engine.h"

#include <gtest/gtest.h>

#include <map>

#include "tests/support/json_verdict.h"
#include "tests/support/schema_verdict.h"
#include "tests/worker/engine/engine_fixture.h"

namespace bmad::engine {
namespace {

// One request through the engine and through `bmad generate`'s loop, with the same sampling.
struct BothWays {
  std::string engine_text, local_text;
  std::vector<int32_t> engine_ids, local_ids;
  proto::FinishReason engine_reason = proto::FinishReason::kNone, local_reason = proto::FinishReason::kNone;
  std::string engine_stop_string;     // the engine's last output's stop cause
  int64_t engine_stop_token_id = -1;
};

BothWays RunBothWays(const std::string& prompt, const proto::SamplingParams& sampling) {
  BothWays r;
  Fixture f;
  EngineRequest request;
  request.id = 1;
  request.prompt = f.tok->Encode(prompt);
  request.sampling = sampling;
  EXPECT_TRUE(f.engine->Add(request).ok());
  std::vector<RequestOutput> outputs;
  for (int i = 0; i < 1000 && f.engine->HasWork(); ++i) {
    outputs.clear();
    EXPECT_TRUE(f.engine->Step(&outputs).ok());
    for (const RequestOutput& o : outputs) {
      r.engine_text += o.text;
      r.engine_ids.insert(r.engine_ids.end(), o.token_ids.begin(), o.token_ids.end());
      if (o.finished) {
        r.engine_reason = o.reason;
        r.engine_stop_string = o.stop_string;
        r.engine_stop_token_id = o.stop_token_id;
      }
    }
  }
  tools::LocalGenerateOptions local;
  local.model_path = testing::SharedModelsDir() + "/stories260K.gguf";
  local.prompt = prompt;
  local.sampling = sampling;
  auto stats = tools::LocalGenerate(local, [&](std::string_view t) { r.local_text += t; });
  EXPECT_TRUE(stats.ok()) << stats.status().ToString();
  if (stats.ok()) {
    r.local_ids = stats->generated_ids;
    r.local_reason = stats->finish_reason;
  }
  EXPECT_EQ(r.engine_text, r.local_text);
  EXPECT_EQ(r.engine_ids, r.local_ids);
  EXPECT_EQ(r.engine_reason, r.local_reason);
  return r;
}

TEST(EngineTest, MinTokensKeepsStopTokensAndStopStringsFromEndingTheOutputEarly) {
  // Greedy from "Once upon a time": ", there was a little girl named Lily. She loved to play
  // outside in the park. One day, she saw", whose first token is "," (432) and fourth " a" (261).
  proto::SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 32;
  p.stop_token_ids = {261};
  BothWays plain = RunBothWays("Once upon a time", p);
  EXPECT_EQ(plain.engine_ids, (std::vector<int32_t>{432, 383, 286, 261}));
  EXPECT_EQ(plain.engine_reason, proto::FinishReason::kStop);

  p.min_tokens = 10;
  BothWays held = RunBothWays("Once upon a time", p);
  ASSERT_GE(held.engine_ids.size(), 10u);
  for (size_t i = 0; i < 10; ++i) EXPECT_NE(held.engine_ids[i], 261) << "token " << i;

  // As in vLLM, stop strings count only once the output has more than min_tokens tokens: the
  // "," of the first token ends nothing at min_tokens 1 (it did, one token early), the next ","
  // does.
  proto::SamplingParams s;
  s.temperature = 0;
  s.max_tokens = 32;
  s.stop_strings = {","};
  EXPECT_EQ(RunBothWays("Once upon a time", s).engine_text, "");
  for (uint32_t min_tokens : {1u, 3u}) {
    s.min_tokens = min_tokens;
    s.stop_strings = {","};
    BothWays later = RunBothWays("Once upon a time", s);
    EXPECT_EQ(later.engine_text,
              ", there was a little girl named Lily. She loved to play outside in the park. One day")
        << min_tokens;
    // A longer stop beside it keeps the first "," among the bytes looked at again: it still
    // ends nothing.
    s.stop_strings = {",", "zebra"};
    later = RunBothWays("Once upon a time", s);
    EXPECT_EQ(later.engine_text,
              ", there was a little girl named Lily. She loved to play outside in the park. One day")
        << min_tokens;
    EXPECT_EQ(later.engine_reason, proto::FinishReason::kStop);
  }
  // A stop string may begin in text from before min_tokens allowed stops (", there" over the
  // first two tokens): that beginning was held back, and the output ends where it begins, as in
  // vLLM (the "," was sent at once, and stayed).
  s.stop_strings = {", there"};
  s.min_tokens = 0;
  EXPECT_EQ(RunBothWays("Once upon a time", s).engine_text, "");
  s.min_tokens = 1;
  BothWays straddling = RunBothWays("Once upon a time", s);
  EXPECT_EQ(straddling.engine_text, "");
  EXPECT_EQ(straddling.engine_reason, proto::FinishReason::kStop);
  EXPECT_EQ(straddling.engine_ids.size(), 2u);
}

// What ended a stop finish (vLLM's stop_reason): the stop string, the stop_token_ids entry, or
// neither for the end-of-generation token.
TEST(EngineTest, AStopFinishSaysWhichStopEndedIt) {
  proto::SamplingParams s;
  s.temperature = 0;
  s.max_tokens = 64;
  s.stop_strings = {"zebra", " girl"};
  BothWays by_string = RunBothWays("Once upon a time", s);
  EXPECT_EQ(by_string.engine_reason, proto::FinishReason::kStop);
  EXPECT_EQ(by_string.engine_stop_string, " girl");
  EXPECT_EQ(by_string.engine_stop_token_id, -1);

  s.stop_strings.clear();
  s.logit_bias = {{261, 100.0f}};  // " a", every time
  s.stop_token_ids = {261};
  BothWays by_token = RunBothWays("Once upon a time", s);
  EXPECT_EQ(by_token.engine_reason, proto::FinishReason::kStop);
  EXPECT_EQ(by_token.engine_stop_token_id, 261);
  EXPECT_EQ(by_token.engine_stop_string, "");

  s.logit_bias = {{2, 100.0f}};  // the end-of-generation token, at once
  s.stop_token_ids.clear();
  BothWays by_eos = RunBothWays("Once upon a time", s);
  EXPECT_EQ(by_eos.engine_reason, proto::FinishReason::kStop);
  EXPECT_EQ(by_eos.engine_stop_token_id, -1);
  EXPECT_EQ(by_eos.engine_stop_string, "");
  // Listed in stop_token_ids too, it still ends as end of generation (vLLM checks that first);
  // with ignore_eos it is only a stop token.
  s.stop_token_ids = {2};
  by_eos = RunBothWays("Once upon a time", s);
  EXPECT_EQ(by_eos.engine_reason, proto::FinishReason::kStop);
  EXPECT_EQ(by_eos.engine_stop_token_id, -1);
  s.ignore_eos = true;
  BothWays by_listed = RunBothWays("Once upon a time", s);
  EXPECT_EQ(by_listed.engine_reason, proto::FinishReason::kStop);
  EXPECT_EQ(by_listed.engine_stop_token_id, 2);
}

TEST(EngineTest, LogitBiasSteersGreedyOutput) {
  proto::SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 8;
  p.logit_bias = {{432, -100.0f}};  // ","
  BothWays banned = RunBothWays("Once upon a time", p);
  ASSERT_FALSE(banned.engine_ids.empty());
  for (int32_t t : banned.engine_ids) EXPECT_NE(t, 432);
  p.logit_bias = {{261, 100.0f}};  // " a", every time
  BothWays forced = RunBothWays("Once upon a time", p);
  EXPECT_EQ(forced.engine_ids, std::vector<int32_t>(8, 261));
}

// The id of the token whose text is exactly `text`.
int32_t TokenWithText(const tokenizer::Tokenizer& tok, std::string_view text) {
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (tok.TokenPiece(id) == text) return id;
  }
  ADD_FAILURE() << "no token is \"" << text << "\"";
  return -1;
}

// Four runs both ways of "Once upon a time" under `p`: greedy, then seeds 1-3 at temperature 1.
std::vector<BothWays> GreedyAndSeeded(proto::SamplingParams p) {
  std::vector<BothWays> runs;
  p.temperature = 0;
  for (uint64_t seed = 0; seed < 4; ++seed) {
    if (seed > 0) {
      p.temperature = 1.0f;
      p.seed = seed;
      p.has_seed = true;
    }
    runs.push_back(RunBothWays("Once upon a time", p));
  }
  return runs;
}

// response_format json_object: the engine and `bmad generate` draw the same tokens under the
// constraint; the text is always an object or the start of one, and an output that ends is one.
TEST(EngineTest, JsonOutputIsAnObjectOrTheStartOfOne) {
  proto::SamplingParams p;
  p.response_format = proto::ResponseFormat::kJsonObject;
  p.max_tokens = 40;
  for (const BothWays& r : GreedyAndSeeded(p)) {
    ASSERT_FALSE(r.engine_text.empty());
    EXPECT_EQ(r.engine_text[0], '{') << r.engine_text;
    if (r.engine_reason == proto::FinishReason::kStop) {
      EXPECT_EQ(testing::JudgeJson(r.engine_text), testing::JsonVerdict::kWhole) << r.engine_text;
    } else {
      EXPECT_EQ(r.engine_reason, proto::FinishReason::kLength);
      EXPECT_NE(testing::JudgeJson(r.engine_text), testing::JsonVerdict::kInvalid) << r.engine_text;
    }
  }
}

// response_format json_schema: the same under a schema; an output that ends is a value the
// schema allows (tests/support/schema_verdict.h judges), keys in the order declared.
TEST(EngineTest, JsonSchemaOutputIsAValueTheSchemaAllows) {
  const std::string schema = R"({"type":"object","properties":{
      "mood":{"enum":["happy","sad","sleepy"]},"name":{"type":"string","minLength":2,"maxLength":12},
      "age":{"type":"integer","minimum":1,"maximum":99},
      "friends":{"type":"array","items":{"enum":["Tim","Sue","Max"]},"maxItems":2}},
    "required":["mood","name","age"],"additionalProperties":false})";
  proto::SamplingParams p;
  p.response_format = proto::ResponseFormat::kJsonSchema;
  p.json_schema = schema;
  p.max_tokens = 200;
  int whole = 0;
  for (const BothWays& r : GreedyAndSeeded(p)) {
    ASSERT_FALSE(r.engine_text.empty());
    EXPECT_EQ(r.engine_text[0], '{') << r.engine_text;
    if (r.engine_reason == proto::FinishReason::kStop) {
      ++whole;
      ASSERT_EQ(testing::JudgeJson(r.engine_text), testing::JsonVerdict::kWhole) << r.engine_text;
      EXPECT_EQ(testing::SchemaViolation(nlohmann::json::parse(r.engine_text), nlohmann::json::parse(schema)), "")
          << r.engine_text;
      std::vector<std::string> keys;
      const nlohmann::ordered_json value = nlohmann::ordered_json::parse(r.engine_text);
      for (const auto& [key, field] : value.items()) keys.push_back(key);
      EXPECT_EQ(std::vector<std::string>(keys.begin(), keys.begin() + 3),
                (std::vector<std::string>{"mood", "name", "age"}))
          << r.engine_text;
    } else {
      EXPECT_EQ(r.engine_reason, proto::FinishReason::kLength);
      EXPECT_NE(testing::JudgeJson(r.engine_text), testing::JsonVerdict::kInvalid) << r.engine_text;
    }
  }
  EXPECT_GT(whole, 0);
}

TEST(EngineTest, AJsonOutputEndsWhenItsObjectCloses) {
  Fixture f;
  const int32_t open = TokenWithText(*f.tok, "{"), close = TokenWithText(*f.tok, "}");
  proto::SamplingParams p;
  p.response_format = proto::ResponseFormat::kJsonObject;
  p.max_tokens = 16;
  p.temperature = 0;
  p.logit_bias = {{static_cast<uint32_t>(open), 100.0f}, {static_cast<uint32_t>(close), 100.0f}};
  const BothWays r = RunBothWays("Once upon a time", p);
  EXPECT_EQ(r.engine_text, "{}");
  EXPECT_EQ(r.engine_ids, (std::vector<int32_t>{open, close, f.tok->eos()}));
  EXPECT_EQ(r.engine_reason, proto::FinishReason::kStop);
  EXPECT_EQ(r.engine_stop_token_id, -1);  // the end-of-generation token, not a stop
}

TEST(EngineTest, AMigratedJsonOutputMustBeTheStartOfAnObject) {
  Fixture f;
  const int32_t open = TokenWithText(*f.tok, "{"), letter = TokenWithText(*f.tok, "a");
  EngineRequest bad = Greedy(1, f.tok->Encode("Once upon a time"), 20);
  bad.sampling.response_format = proto::ResponseFormat::kJsonObject;
  bad.generated = {open, letter};
  Status refused = f.engine->Add(bad);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("output token 1 (id " + std::to_string(letter) + ") cannot continue the JSON value"),
            std::string::npos)
      << refused.message();
  EngineRequest good = bad;
  good.generated = {open};
  ASSERT_TRUE(f.engine->Add(good).ok());
  auto out = f.RunAll();
  EXPECT_NE(testing::JudgeJson("{" + out[1].first), testing::JsonVerdict::kInvalid) << out[1].first;
  EXPECT_EQ(f.engine->kv().GetStats().used_blocks, 0);
}

TEST(EngineTest, CachedPromptTokensNeverExceedThePrompt) {
  // A request given back with the tokens it generated (migration) finds them in the prefix
  // cache too; the usage counts only the prompt's as cached.
  Fixture f;
  const std::vector<int32_t> prompt = f.tok->Encode("Once upon a time");
  EngineRequest first = Greedy(1, prompt, 40);
  first.sampling.ignore_eos = true;
  ASSERT_TRUE(f.engine->Add(first).ok());
  const std::vector<int32_t> generated = f.RunAll()[1].second;
  ASSERT_EQ(generated.size(), 40u);
  EngineRequest again = first;
  again.id = 2;
  again.generated.assign(generated.begin(), generated.begin() + 36);
  ASSERT_TRUE(f.engine->Add(again).ok());
  std::vector<RequestOutput> outputs;
  proto::Usage usage;
  for (int i = 0; i < 100 && f.engine->HasWork(); ++i) {
    outputs.clear();
    ASSERT_TRUE(f.engine->Step(&outputs).ok());
    for (const RequestOutput& o : outputs) {
      if (o.finished) usage = o.usage;
    }
  }
  EXPECT_EQ(usage.prompt_tokens, prompt.size());
  EXPECT_EQ(usage.completion_tokens, 40u);
  EXPECT_EQ(usage.cached_prompt_tokens, prompt.size());  // 32 tokens reused, 5 of them the prompt's
}

TEST(EngineTest, AMigratedSeededRequestDrawsWhatItsFirstReplicaWouldHave) {
  // Seeded sampling used to start its draws over on the replica a request moved to: the tokens
  // after the move differed from those the first replica went on to draw. A second engine
  // stands for the replica it moved to.
  const std::vector<int32_t> prompt = Fixture().tok->Encode("Once upon a time");
  EngineRequest first = Greedy(1, prompt, 40);
  first.sampling.temperature = 1.0f;
  first.sampling.has_seed = true;
  first.sampling.seed = 1234;
  first.sampling.ignore_eos = true;
  Fixture where_it_began;
  ASSERT_TRUE(where_it_began.engine->Add(first).ok());
  const std::vector<int32_t> all = where_it_began.RunAll()[1].second;
  ASSERT_EQ(all.size(), 40u);
  for (size_t moved_after : {size_t{1}, size_t{15}, size_t{39}}) {
    Fixture where_it_moved;
    EngineRequest moved = first;
    moved.id = 7;  // the coordinator's id is kept; another one here shows the seed alone decides
    moved.generated.assign(all.begin(), all.begin() + static_cast<long>(moved_after));
    ASSERT_TRUE(where_it_moved.engine->Add(moved).ok());
    EXPECT_EQ(where_it_moved.RunAll()[7].second, std::vector<int32_t>(all.begin() + static_cast<long>(moved_after), all.end()))
        << "moved after " << moved_after << " tokens";
  }
}


}  // namespace
}  // namespace bmad::engine
