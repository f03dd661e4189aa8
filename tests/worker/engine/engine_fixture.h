// What the engine tests share: an engine over stories260K in a replica's arena (as the worker
// builds it), greedy requests, and `bmad generate`'s text for comparison.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "tests/support/paths.h"
#include "worker/engine/engine.h"
#include "worker/engine/engine_metrics.h"
#include "worker/server/replica_memory.h"
#include "worker/tools/local_generate.h"

namespace bmad::engine {

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
    sizes.workspace_bytes = model->WorkspaceBytes(max_batch_tokens, options.scheduler.max_logit_rows());
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

inline EngineRequest Greedy(uint64_t id, std::vector<int32_t> prompt, uint32_t max_tokens) {
  EngineRequest r;
  r.id = id;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0;
  r.sampling.max_tokens = max_tokens;
  return r;
}

inline std::string LocalText(const std::string& prompt, uint32_t max_tokens) {
  tools::LocalGenerateOptions o;
  o.model_path = testing::SharedModelsDir() + "/stories260K.gguf";
  o.prompt = prompt;
  o.sampling.temperature = 0;
  o.sampling.max_tokens = max_tokens;
  std::string text;
  EXPECT_TRUE(tools::LocalGenerate(o, [&](std::string_view t) { text += t; }).ok());
  return text;
}

}  // namespace bmad::engine
