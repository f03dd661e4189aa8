// The engine on a real model: concurrent requests each get exactly what they get alone, bad
// requests are refused with a reason, cancel frees KV blocks, and in steady state the engine
// makes no system allocations (its memory comes from the replica's arena).
#include "worker/engine/engine.h"

#include <gtest/gtest.h>

#include <map>

#include "kernels/cpu/cpu_backend.h"
#include "tests/support/paths.h"
#include "worker/memory/system_allocations.h"
#include "worker/server/replica_memory.h"
#include "worker/tools/local_generate.h"

namespace bmad::engine {
namespace {

struct Fixture {
  explicit Fixture(int64_t num_blocks = 64, int64_t max_batch_tokens = 64) {
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
    engine = std::make_unique<Engine>(options, *model, *cache, *tok, *backend, clock, nullptr);
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

  SystemClock& clock = SystemClock::Instance();
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

}  // namespace
}  // namespace bmad::engine
