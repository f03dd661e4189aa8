// The worker's own model (LlamaModel) on a device backend, laid out in memory as a replica lays
// it out (worker::ReplicaMemory: one arena in device memory for weights, KV blocks, workspace and
// scratch), for the GPU parity checks and benchmarks of tests/gpu/. What runs on the GPU there is
// therefore exactly what `worker.backend: cuda` serves with.
//
// Owns its backend, so the backend (which hands its scratch back to the arena when destroyed) is
// gone before the arena's bookkeeping. Callers are tests: sizes are trusted.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/backend.h"
#include "worker/model/kv_cache.h"
#include "worker/model/llama/llama_model.h"
#include "worker/server/replica_memory.h"

namespace bmad::gpu_tests {

struct DeviceModelOptions {
  int64_t max_tokens = 512;  // tokens per step
  int64_t max_seqs = 16;     // sequences per step
  int64_t num_blocks = 64;   // KV blocks (block 0 included, as in the worker)
  int64_t block_size = 16;
};

class DeviceModel {
 public:
  static Result<std::unique_ptr<DeviceModel>> Load(const std::string& path,
                                                   std::unique_ptr<kernels::Backend> backend,
                                                   const DeviceModelOptions& options);
  ~DeviceModel();

  const model::LlamaConfig& config() const { return model_->config(); }
  kernels::Backend& backend() { return *backend_; }
  // Bytes of the matrices each decode step reads (for bandwidth estimates).
  size_t weight_bytes() const { return weight_bytes_; }

  // One step (LlamaModel::Forward through the workspace): the logits of the sequences with
  // logit_rows, [their sum, n_vocab], copied to the host as the engine's sampler gets them.
  Result<std::span<const float>> Forward(std::span<const model::SequenceStep> steps);
  // The greedy token of each row of the last step's logits.
  std::vector<int32_t> Greedy() const;

 private:
  DeviceModel() = default;

  std::unique_ptr<worker::ReplicaMemory> memory_;  // outlives everything below
  std::unique_ptr<kernels::Backend> backend_;
  std::unique_ptr<model::LlamaModel> model_;
  std::unique_ptr<model::KvCache> cache_;
  std::vector<float> logits_;
  int64_t n_logits_ = 0;
  size_t weight_bytes_ = 0;
};

}  // namespace bmad::gpu_tests
