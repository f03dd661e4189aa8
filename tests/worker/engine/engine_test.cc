// The engine on a real model: concurrent requests each get exactly what they get alone, bad
// requests are refused with a reason, cancel frees KV blocks, JSON output stays JSON, and in
// steady state the engine makes no system allocations (its memory comes from the replica's
// arena).
#include "worker/engine/engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>

#include "common/metrics/registry.h"
#include "kernels/cpu/cpu_backend.h"
#include "worker/engine/engine_metrics.h"
#include "tests/support/json_verdict.h"
#include "tests/support/schema_verdict.h"
#include "tests/support/paths.h"
#include "worker/memory/system_allocations.h"
#include "worker/server/replica_memory.h"
#include "worker/tools/local_generate.h"

namespace bmad::engine {
namespace {

struct Fixture {
  explicit Fixture(int64_t num_blocks = 64, int64_t max_batch_tokens = 64,
                   StepOverlap overlap = StepOverlap::kAuto, const Clock& engine_clock = SystemClock::Instance(),
                   EngineMetrics* metrics = nullptr)
      : clock(engine_clock) {
    options.scheduler.overlap_steps = overlap;
    kernels::CpuBackendOptions bo;
    bo.threads = 2;
    backend = std::make_unique<kernels::CpuBackend>(bo);
    model = std::move(model::LlamaModel::Open(testing::SharedModelsDir() + "/stories260K.gguf", *backend)).value();
    tok = std::make_unique<tokenizer::Tokenizer>(*tokenizer::LoadTokenizer(model->file()));
    options.scheduler.max_batch_tokens = max_batch_tokens;
    options.scheduler.max_seqs = 8;
    options.num_blocks = num_blocks;
    options.block_size = 16;
    worker::ReplicaMemorySizes sizes;
    sizes.weights_bytes = model->PreparedWeightBytes();
    sizes.kv_block_bytes = model->CacheShape(1, 16).BytesPerBlock();
    sizes.kv_blocks = num_blocks;
    sizes.workspace_bytes = model->WorkspaceBytes(max_batch_tokens, 8);
    sizes.scratch_bytes = 8 << 20;
    memory = std::move(worker::ReplicaMemory::Create(sizes, 0)).value();
    backend->SetMemoryHooks(memory->BackendHooks());
    model->PrepareWeights();
    cache = std::make_unique<model::KvCache>(model->CacheShape(num_blocks, 16), memory->KvMemory());
    options.workspace = &memory->workspace();
    engine = std::make_unique<Engine>(options, *model, *cache, *tok, *backend, clock, metrics);
  }

  // Runs until every request finished; returns the text and ids of each.
  std::map<uint64_t, std::pair<std::string, std::vector<int32_t>>> RunAll() {
    std::map<uint64_t, std::pair<std::string, std::vector<int32_t>>> out;
    std::vector<RequestOutput> outputs;
    for (int i = 0; i < 10000 && engine->HasWork(); ++i) {
      outputs.clear();
      EXPECT_TRUE(engine->Step(&outputs).ok());
      for (auto& o : outputs) {
        out[o.id].first += o.text;
        out[o.id].second.insert(out[o.id].second.end(), o.token_ids.begin(), o.token_ids.end());
      }
    }
    return out;
  }

  const Clock& clock;
  std::unique_ptr<worker::ReplicaMemory> memory;  // outlives the backend that uses its hooks
  std::unique_ptr<kernels::CpuBackend> backend;
  std::unique_ptr<model::LlamaModel> model;
  std::unique_ptr<tokenizer::Tokenizer> tok;
  std::unique_ptr<model::KvCache> cache;
  EngineOptions options;
  std::unique_ptr<Engine> engine;
};

EngineRequest Greedy(uint64_t id, std::vector<int32_t> prompt, uint32_t max_tokens) {
  EngineRequest r;
  r.id = id;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0;
  r.sampling.max_tokens = max_tokens;
  return r;
}

std::string LocalText(const std::string& prompt, uint32_t max_tokens) {
  tools::LocalGenerateOptions o;
  o.model_path = testing::SharedModelsDir() + "/stories260K.gguf";
  o.prompt = prompt;
  o.sampling.temperature = 0;
  o.sampling.max_tokens = max_tokens;
  std::string text;
  EXPECT_TRUE(tools::LocalGenerate(o, [&](std::string_view t) { text += t; }).ok());
  return text;
}

TEST(EngineTest, ConcurrentRequestsEachGetTheirSoloOutput) {
  Fixture f;
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog",
                                            "Lily and Ben went to the park", "One day"};
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_TRUE(f.engine->Add(Greedy(i + 1, f.tok->Encode(prompts[i]), 20 + 5 * static_cast<uint32_t>(i))).ok());
  }
  auto results = f.RunAll();
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(results[i + 1].first, LocalText(prompts[i], 20 + 5 * static_cast<uint32_t>(i))) << prompts[i];
  }
  EXPECT_EQ(f.engine->kv().GetStats().used_blocks, 0);
}

TEST(EngineTest, SteadyStateMakesNoSystemAllocations) {
  Fixture f;
  auto workload = [&] {
    for (uint64_t id = 1; id <= 6; ++id) {
      std::vector<int32_t> prompt = f.tok->Encode("Once upon a time there was a little " + std::to_string(id));
      prompt.resize(std::min<size_t>(prompt.size(), 4 + id * 3), 1);
      EngineRequest r = Greedy(id, prompt, static_cast<uint32_t>(8 + 4 * id));
      r.sampling.ignore_eos = true;
      ASSERT_TRUE(f.engine->Add(std::move(r)).ok());
    }
    f.RunAll();
  };
  workload();  // warm-up: scratch buffers and workspace reach their sizes
  const uint64_t engine_before = f.engine->SystemAllocations();
  const uint64_t memory_before = memory::SystemAllocations::Count();
  for (int round = 0; round < 3; ++round) workload();
  EXPECT_EQ(f.engine->SystemAllocations(), engine_before);
  EXPECT_EQ(memory::SystemAllocations::Count(), memory_before);
  EXPECT_EQ(f.memory->workspace().overflow_count(), 0u);
}

TEST(EngineTest, StepTimingSplitsTheForwardPassFromTheHostStages) {
  Fixture f;
  EXPECT_EQ(f.engine->step_timing().steps, 0u);
  EngineRequest r = Greedy(1, f.tok->Encode("Once upon a time"), 6);
  r.sampling.ignore_eos = true;
  ASSERT_TRUE(f.engine->Add(std::move(r)).ok());
  const auto results = f.RunAll();
  const StepTiming& t = f.engine->step_timing();
  // The prompt in one step (it samples the first token), then one step per further token.
  EXPECT_EQ(t.steps, 6u);
  EXPECT_GT(t.execute_nanos, 0);
  EXPECT_GT(t.host_nanos(), 0);  // sampling at least
  EXPECT_GE(t.total_nanos, t.execute_nanos + t.plan_nanos);
  EXPECT_GT(t.plan_nanos, 0);
  EXPECT_EQ(results.at(1).second.size(), 6u);
  // Idle calls plan nothing and count nothing.
  const StepTiming before = t;
  std::vector<RequestOutput> outputs;
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(f.engine->Step(&outputs).ok());
  EXPECT_EQ(t.plan_nanos, before.plan_nanos);
  EXPECT_EQ(t.total_nanos, before.total_nanos);
  EXPECT_TRUE(outputs.empty());
}

TEST(EngineTest, BadRequestsAreRefusedWithAReason) {
  Fixture f;
  EXPECT_EQ(f.engine->Add(Greedy(1, {}, 4)).code(), StatusCode::kInvalidArgument);
  Status s = f.engine->Add(Greedy(2, {1, 600}, 4));
  EXPECT_NE(s.message().find("token id 600"), std::string::npos) << s.message();
  s = f.engine->Add(Greedy(3, std::vector<int32_t>(512, 5), 4));
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EngineRequest hot = Greedy(4, {1, 2}, 4);
  hot.sampling.temperature = -1;
  s = f.engine->Add(hot);
  EXPECT_NE(s.message().find("temperature"), std::string::npos) << s.message();
  ASSERT_TRUE(f.engine->Add(Greedy(5, {1, 2}, 4)).ok());
  EXPECT_EQ(f.engine->Add(Greedy(5, {1, 2}, 4)).code(), StatusCode::kInvalidArgument);
  f.engine->StartDraining();
  EXPECT_EQ(f.engine->Add(Greedy(6, {1, 2}, 4)).code(), StatusCode::kFailedPrecondition);
  // The coordinator gives back a request the draining replica runs: the new copy takes the old
  // one's place instead of being refused (and the old one's work lost).
  ASSERT_TRUE(f.engine->Cancel(5, nullptr));
  EngineRequest back = Greedy(5, {1, 2}, 4);
  back.replaces_copy = true;
  EXPECT_TRUE(f.engine->Add(back).ok());
}

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
  // A stop string may begin in text sent before min_tokens allowed stops (", there" over the
  // first two tokens): the output ends where the later token's text begins.
  s.stop_strings = {", there"};
  s.min_tokens = 0;
  EXPECT_EQ(RunBothWays("Once upon a time", s).engine_text, "");
  s.min_tokens = 1;
  BothWays straddling = RunBothWays("Once upon a time", s);
  EXPECT_EQ(straddling.engine_text, ",");
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

TEST(EngineTest, CancelFreesBlocksAndEndsTheStream) {
  Fixture f;
  EngineRequest r = Greedy(1, {1}, 300);
  r.sampling.ignore_eos = true;
  ASSERT_TRUE(f.engine->Add(std::move(r)).ok());
  std::vector<RequestOutput> outputs;
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(f.engine->Step(&outputs).ok());
  EXPECT_GT(f.engine->kv().GetStats().used_blocks, 1);
  RequestOutput last;
  ASSERT_TRUE(f.engine->Cancel(1, &last));
  EXPECT_EQ(last.reason, proto::FinishReason::kCancelled);
  EXPECT_EQ(last.usage.completion_tokens, 40u);
  EXPECT_EQ(f.engine->kv().GetStats().used_blocks, 0);
  EXPECT_FALSE(f.engine->HasWork());
  EXPECT_FALSE(f.engine->Cancel(1, &last));
}

TEST(EngineTest, AReplacedCopyIsDroppedWithoutCountingAFinish) {
  // The coordinator gave the request back (it took this replica for dead): the copy running here
  // goes, and the replacement's end is the request's one finish. The copy used to count as a
  // cancelled request besides.
  metrics::Registry registry;
  EngineMetrics metrics(registry, "r0", 16, 64);
  Fixture f(64, 64, StepOverlap::kAuto, SystemClock::Instance(), &metrics);
  EngineRequest r = Greedy(1, {1}, 300);
  r.sampling.ignore_eos = true;
  ASSERT_TRUE(f.engine->Add(std::move(r)).ok());
  std::vector<RequestOutput> outputs;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(f.engine->Step(&outputs).ok());
  ASSERT_GT(f.engine->kv().GetStats().used_blocks, 0);
  outputs.clear();
  ASSERT_TRUE(f.engine->DropReplaced(1));
  EXPECT_EQ(f.engine->kv().GetStats().used_blocks, 0);
  EXPECT_FALSE(f.engine->HasWork());
  EXPECT_FALSE(f.engine->DropReplaced(1));
  EngineRequest back = Greedy(1, {1}, 4);
  back.replaces_copy = true;
  ASSERT_TRUE(f.engine->Add(std::move(back)).ok());
  for (int i = 0; i < 20 && f.engine->HasWork(); ++i) ASSERT_TRUE(f.engine->Step(&outputs).ok());
  ASSERT_FALSE(outputs.empty());
  EXPECT_EQ(outputs.back().reason, proto::FinishReason::kLength);
  for (const RequestOutput& o : outputs) EXPECT_NE(o.reason, proto::FinishReason::kCancelled);
  std::string text = registry.RenderText();
  EXPECT_NE(text.find("bmad_worker_requests_finished_total{reason=\"cancelled\",replica=\"r0\"} 0\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("bmad_worker_requests_finished_total{reason=\"length\",replica=\"r0\"} 1\n"),
            std::string::npos)
      << text;
  // A replacement cancelled before it was added ends as a cancelled request, counted once.
  EngineRequest unadded = Greedy(2, {1, 2, 3}, 8);
  unadded.generated = {4, 5};
  unadded.received_ns = SystemClock::Instance().NowNanos() - 2'000'000'000;  // taken 2 s ago
  const RequestOutput last = f.engine->CancelUnadded(unadded);
  EXPECT_EQ(last.id, 2u);
  EXPECT_TRUE(last.finished);
  EXPECT_EQ(last.reason, proto::FinishReason::kCancelled);
  EXPECT_EQ(last.token_offset, 2);
  EXPECT_EQ(last.usage.prompt_tokens, 3u);
  EXPECT_EQ(last.usage.completion_tokens, 2u);
  text = registry.RenderText();
  EXPECT_NE(text.find("bmad_worker_requests_finished_total{reason=\"cancelled\",replica=\"r0\"} 1\n"),
            std::string::npos)
      << text;
  // Its end-to-end latency counts from when it was taken (2 s ago), not from its end (0 s).
  EXPECT_NE(text.find("bmad_worker_e2e_request_latency_seconds_count{replica=\"r0\"} 2\n"), std::string::npos) << text;
  const std::string sum_key = "bmad_worker_e2e_request_latency_seconds_sum{replica=\"r0\"} ";
  ASSERT_NE(text.find(sum_key), std::string::npos) << text;
  EXPECT_GE(std::stod(text.substr(text.find(sum_key) + sum_key.size())), 2.0) << text;
}

// A clock that moves on by `tick` at every reading: steps take time without a real model
// being slow, and idle time is added by hand.
class TickingClock final : public Clock {
 public:
  explicit TickingClock(int64_t tick_ns) : tick_ns_(tick_ns) {}
  int64_t NowNanos() const override { return now_.fetch_add(tick_ns_) + tick_ns_; }
  void Advance(int64_t ns) { now_.fetch_add(ns); }

 private:
  const int64_t tick_ns_;
  mutable std::atomic<int64_t> now_{1'000'000'000};
};

TEST(EngineTest, AnIdleEnginesUtilizationFalls) {
  // The heartbeat's utilization weighs routing. It used to keep the last busy second's figure
  // for as long as the engine stayed idle, since only a step closed the one-second window.
  TickingClock clock(10'000'000);
  Fixture f(64, 64, StepOverlap::kAuto, clock);
  EngineRequest r = Greedy(1, {1}, 300);
  r.sampling.ignore_eos = true;
  ASSERT_TRUE(f.engine->Add(std::move(r)).ok());
  std::vector<RequestOutput> outputs;
  for (int i = 0; i < 200 && f.engine->HasWork(); ++i) ASSERT_TRUE(f.engine->Step(&outputs).ok());
  const float busy = f.engine->Load().utilization;
  EXPECT_GT(busy, 0.5f);
  RequestOutput last;
  ASSERT_TRUE(f.engine->Cancel(1, &last));
  clock.Advance(int64_t{20'000'000'000});  // 20 s with nothing to do: no step, no Add
  EXPECT_LT(f.engine->Load().utilization, 0.1f) << "busy: " << busy;
}

TEST(EngineTest, GaugesDescribeTheEmptyCacheBeforeTheFirstRequest) {
  metrics::Registry registry;
  EngineMetrics metrics(registry, "r0", 16, 64);
  Fixture f(64, 64, StepOverlap::kAuto, SystemClock::Instance(), &metrics);
  const std::string text = registry.RenderText();
  // 64 blocks, block 0 reserved: 63 free, not 0 (a full cache to an autoscaler).
  EXPECT_NE(text.find("bmad_worker_kv_free_blocks{replica=\"r0\"} 63\n"), std::string::npos) << text;
  EXPECT_NE(text.find("vllm:num_requests_waiting{replica=\"r0\"} 0\n"), std::string::npos) << text;
}

// One prompt twice at once (the n choices of one request): the second waits a step and reuses
// the first's full blocks, and both get the solo output.
TEST(EngineTest, OnePromptTwiceAtOnceIsComputedOnce) {
  metrics::Registry registry;
  EngineMetrics metrics(registry, "r0", 16, 64);
  Fixture f(64, 64, StepOverlap::kAuto, SystemClock::Instance(), &metrics);
  const std::string prompt = "Once upon a time there was a little girl named Lily who loved to play";
  std::vector<int32_t> ids = f.tok->Encode(prompt);
  ASSERT_GT(ids.size(), 16u);
  const int64_t shared = static_cast<int64_t>((ids.size() - 1) / 16 * 16);  // full blocks before the last token
  ASSERT_TRUE(f.engine->Add(Greedy(1, ids, 12)).ok());
  ASSERT_TRUE(f.engine->Add(Greedy(2, ids, 12)).ok());
  auto results = f.RunAll();
  const std::string solo = LocalText(prompt, 12);
  EXPECT_EQ(results[1].first, solo);
  EXPECT_EQ(results[2].first, solo);
  const std::string text = registry.RenderText();
  EXPECT_NE(text.find("bmad_worker_shared_prefix_waits_total{replica=\"r0\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("bmad_worker_prefix_cache_hits_total{replica=\"r0\"} " + std::to_string(shared) + "\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(f.engine->kv().GetStats().used_blocks, 0);
}

// What a request streamed, all of it.
struct Transcript {
  std::string text;
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  proto::FinishReason reason = proto::FinishReason::kNone;
  proto::Usage usage;
  int outputs_after_finish = 0;
  bool operator==(const Transcript&) const = default;
};

void Record(const std::vector<RequestOutput>& outputs, std::map<uint64_t, Transcript>* out) {
  for (const RequestOutput& o : outputs) {
    Transcript& t = (*out)[o.id];
    if (t.reason != proto::FinishReason::kNone) ++t.outputs_after_finish;
    t.text += o.text;
    t.ids.insert(t.ids.end(), o.token_ids.begin(), o.token_ids.end());
    t.logprobs.insert(t.logprobs.end(), o.logprobs.begin(), o.logprobs.end());
    if (o.finished) {
      t.reason = o.reason;
      t.usage = o.usage;
    }
  }
}

// A mixed workload: greedy and seeded sampling, logprobs, penalties, a stop string, a stop
// token, max_tokens 1, prompts longer than the step budget (chunked), and requests that arrive
// while others run. Returns every request's transcript.
std::map<uint64_t, Transcript> RunMixed(Fixture& f) {
  auto text = [&](const std::string& t) { return f.tok->Encode(t); };
  std::string long_prompt;
  for (int i = 0; i < 12; ++i) long_prompt += "Once upon a time there was a little girl named Lily. ";
  std::vector<EngineRequest> first, later;
  first.push_back(Greedy(1, text("Once upon a time"), 40));
  EngineRequest sampled = Greedy(2, text(long_prompt), 30);
  sampled.sampling.temperature = 0.8f;
  sampled.sampling.top_k = 40;
  sampled.sampling.top_p = 0.9f;
  sampled.sampling.seed = 7;
  sampled.sampling.has_seed = true;
  sampled.sampling.logprobs = true;
  first.push_back(std::move(sampled));
  EngineRequest stop = Greedy(3, text("The little dog"), 60);
  stop.sampling.stop_strings = {" box"};
  first.push_back(std::move(stop));
  EngineRequest penalized = Greedy(4, text("Lily and Ben went to the park"), 25);
  penalized.sampling.temperature = 1.0f;
  penalized.sampling.repetition_penalty = 1.3f;
  penalized.sampling.frequency_penalty = 0.5f;
  penalized.sampling.seed = 3;
  penalized.sampling.has_seed = true;
  later.push_back(std::move(penalized));
  later.push_back(Greedy(5, text("One day"), 1));
  EngineRequest stop_token = Greedy(6, text("Once upon a time"), 40);
  stop_token.sampling.stop_token_ids = {static_cast<uint32_t>(text(" was").back())};
  later.push_back(std::move(stop_token));

  std::map<uint64_t, Transcript> out;
  std::vector<RequestOutput> outputs;
  for (EngineRequest& r : first) EXPECT_TRUE(f.engine->Add(std::move(r)).ok());
  for (int i = 0; i < 3; ++i) {
    outputs.clear();
    EXPECT_TRUE(f.engine->Step(&outputs).ok());
    Record(outputs, &out);
  }
  for (EngineRequest& r : later) EXPECT_TRUE(f.engine->Add(std::move(r)).ok());
  for (int i = 0; i < 2000 && f.engine->HasWork(); ++i) {
    outputs.clear();
    EXPECT_TRUE(f.engine->Step(&outputs).ok());
    Record(outputs, &out);
  }
  EXPECT_FALSE(f.engine->HasWork());
  EXPECT_EQ(f.engine->kv().GetStats().used_blocks, 0);
  return out;
}

TEST(EngineTest, OverlappedStepsGiveTheSameOutputsAsStepsInOrder) {
  Fixture in_order(64, 64, StepOverlap::kOff);
  Fixture overlapped(64, 64, StepOverlap::kOn);
  EXPECT_FALSE(in_order.engine->overlaps_steps());
  EXPECT_TRUE(overlapped.engine->overlaps_steps());
  const auto expected = RunMixed(in_order);
  const auto got = RunMixed(overlapped);
  ASSERT_EQ(expected.size(), 6u);
  for (const auto& [id, t] : expected) {
    EXPECT_NE(t.reason, proto::FinishReason::kNone) << "request " << id;
    EXPECT_EQ(t.outputs_after_finish, 0) << "request " << id;
    ASSERT_TRUE(got.count(id)) << "request " << id;
    EXPECT_EQ(got.at(id), t) << "request " << id << ": '" << got.at(id).text << "' against '" << t.text << "'";
  }
  EXPECT_EQ(expected.at(3).reason, proto::FinishReason::kStop);  // the stop string was hit
  EXPECT_EQ(expected.at(6).reason, proto::FinishReason::kStop);  // the stop token was hit
  EXPECT_EQ(expected.at(2).logprobs.size(), expected.at(2).ids.size());
  EXPECT_EQ(expected.at(5).ids.size(), 1u);
  EXPECT_EQ(in_order.engine->step_timing().overlapped_steps, 0u);
  const StepTiming& t = overlapped.engine->step_timing();
  // Every step but the last ones (nothing left to plan) had its successor planned while it ran.
  EXPECT_GT(t.overlapped_steps, t.steps / 2);
  EXPECT_EQ(t.steps, in_order.engine->step_timing().steps);
}

// A sequence longer than the whole KV cache could never run (it would preempt itself forever):
// the context is cut to what the cache holds, prompts beyond it are refused with the reason, and
// generation stops there with finish reason length.
TEST(EngineTest, TheContextIsCutToWhatTheKvCacheHolds) {
  Fixture f(5, 64);  // 4 usable blocks of 16 tokens; the model's context is 512
  EXPECT_EQ(f.engine->context_length(), 64);
  Status refused = f.engine->Add(Greedy(1, std::vector<int32_t>(64, 5), 4));
  EXPECT_EQ(refused.code(), StatusCode::kOutOfRange);
  EXPECT_NE(refused.message().find("all the KV cache holds (4 blocks of 16 tokens)"), std::string::npos)
      << refused.message();
  EngineRequest r = Greedy(2, f.tok->Encode("Once upon a time"), 500);
  r.sampling.ignore_eos = true;
  const auto prompt_len = static_cast<uint32_t>(r.prompt.size());
  ASSERT_TRUE(f.engine->Add(std::move(r)).ok());
  uint32_t generated = 0;
  proto::FinishReason reason = proto::FinishReason::kNone;
  std::vector<RequestOutput> outputs;
  for (int i = 0; i < 200 && f.engine->HasWork(); ++i) {
    outputs.clear();
    ASSERT_TRUE(f.engine->Step(&outputs).ok());
    for (const RequestOutput& o : outputs) {
      generated += static_cast<uint32_t>(o.token_ids.size());
      if (o.finished) reason = o.reason;
    }
  }
  EXPECT_FALSE(f.engine->HasWork());
  EXPECT_EQ(reason, proto::FinishReason::kLength);
  EXPECT_EQ(generated, 64 - prompt_len);
  EXPECT_EQ(f.engine->scheduler().stats().preemptions_total, 0u);
}

TEST(EngineTest, OverlappedStepsUnderKvPressurePreemptAndGiveTheSameTokens) {
  // 9 usable blocks of 16 tokens for four 70-token sequences: decodes preempt.
  auto run = [](StepOverlap overlap, uint64_t* preemptions) {
    Fixture f(10, 64, overlap);
    const std::vector<std::string> prompts = {"Once upon a time", "The little dog",
                                              "Lily and Ben went to the park", "One day"};
    for (size_t i = 0; i < prompts.size(); ++i) {
      EngineRequest r = Greedy(i + 1, f.tok->Encode(prompts[i]), 60);
      r.sampling.ignore_eos = true;
      EXPECT_TRUE(f.engine->Add(std::move(r)).ok());
    }
    auto out = f.RunAll();
    *preemptions = f.engine->scheduler().stats().preemptions_total;
    EXPECT_EQ(f.engine->kv().GetStats().used_blocks, 0);
    return out;
  };
  uint64_t preempted_in_order = 0, preempted_overlapped = 0;
  const auto expected = run(StepOverlap::kOff, &preempted_in_order);
  const auto got = run(StepOverlap::kOn, &preempted_overlapped);
  EXPECT_GT(preempted_in_order, 0u);
  EXPECT_GT(preempted_overlapped, 0u);
  EXPECT_EQ(got, expected);
  for (const auto& [id, r] : got) EXPECT_EQ(r.second.size(), 60u) << "request " << id;
}

TEST(EngineTest, CancelWhileItsStepRunsDropsItsResult) {
  Fixture f(64, 64, StepOverlap::kOn);
  EngineRequest endless = Greedy(1, f.tok->Encode("Once upon a time"), 300);
  endless.sampling.ignore_eos = true;
  ASSERT_TRUE(f.engine->Add(std::move(endless)).ok());
  ASSERT_TRUE(f.engine->Add(Greedy(2, f.tok->Encode("The little dog"), 20)).ok());
  std::vector<RequestOutput> outputs;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(f.engine->Step(&outputs).ok());
  // Step 6 is in flight with both requests in it.
  EXPECT_EQ(f.engine->scheduler().stats().steps_total, 6u);
  RequestOutput last;
  ASSERT_TRUE(f.engine->Cancel(1, &last));
  EXPECT_EQ(last.reason, proto::FinishReason::kCancelled);
  EXPECT_EQ(last.usage.completion_tokens, 5u);
  // Its id comes back at once as a new request: the running step's row for the old one is not
  // the new one's.
  ASSERT_TRUE(f.engine->Add(Greedy(1, f.tok->Encode("One day"), 10)).ok());
  std::map<uint64_t, std::pair<std::string, std::vector<int32_t>>> rest = f.RunAll();
  EXPECT_EQ(rest[1].first, LocalText("One day", 10));
  std::string text;
  for (const RequestOutput& o : outputs) {
    if (o.id == 2) text += o.text;
  }
  EXPECT_EQ(text + rest[2].first, LocalText("The little dog", 20));
  EXPECT_EQ(f.engine->kv().GetStats().used_blocks, 0);
  EXPECT_FALSE(f.engine->HasWork());
}

}  // namespace
}  // namespace bmad::engine
