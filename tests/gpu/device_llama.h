// A Llama forward pass whose weights, activations, KV cache and logits all live in a backend's
// own memory, for the GPU parity checks and benchmarks (tests/gpu/).
//
// Why it exists: worker/model/llama's LlamaModel keeps its norm weights in the mapped file, its
// step buffers, token ids and positions in host memory, and copies rows with std::copy_n, so it
// can only drive a backend that computes on host memory. Until the worker's model is made
// device-resident (the worker part of issue 6), this runner does the same steps in the same
// order through the same Backend ops, with every buffer obtained from a DeviceMemory. With the
// CPU backend and plain host memory it must produce LlamaModel's logits bit for bit, which a
// unit test checks in CI (tests/gpu/device_llama_cpu_test.cc); with the CUDA backend it is what
// tests/gpu/run.sh compares with the CPU.
//
// The whole model only (no tensor or pipeline parallelism); no validation beyond sizes: the
// callers are tests.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/backend.h"
#include "worker/model/kv_cache.h"
#include "worker/model/llama/llama_model.h"

namespace bmad::gpu_tests {

// Where a DeviceLlama's buffers live, and how bytes move in and out.
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // Freed when this object is destroyed.
  virtual Result<void*> Allocate(size_t bytes) = 0;
  virtual Status ToDevice(void* dst, const void* host_src, size_t bytes) = 0;
  // After every op issued so far.
  virtual Status ToHost(void* host_dst, const void* src, size_t bytes) = 0;
  // In order with the ops.
  virtual Status OnDevice(void* dst, const void* src, size_t bytes) = 0;
};

// Plain host memory: for the CPU backend.
class HostMemory final : public DeviceMemory {
 public:
  Result<void*> Allocate(size_t bytes) override;
  Status ToDevice(void* dst, const void* host_src, size_t bytes) override;
  Status ToHost(void* host_dst, const void* src, size_t bytes) override;
  Status OnDevice(void* dst, const void* src, size_t bytes) override;

 private:
  std::vector<std::unique_ptr<unsigned char[]>> blocks_;
};

struct DeviceLlamaOptions {
  int64_t max_tokens = 512;  // tokens per step
  int64_t max_seqs = 16;     // sequences per step
  int64_t num_blocks = 64;   // KV blocks (block 0 included, as in the worker)
  int64_t block_size = 16;
};

class DeviceLlama {
 public:
  static Result<std::unique_ptr<DeviceLlama>> Load(const std::string& path,
                                                   kernels::Backend& backend, DeviceMemory& memory,
                                                   const DeviceLlamaOptions& options);

  const model::LlamaConfig& config() const { return model_->config(); }
  // Bytes of the matrices each decode step reads (for bandwidth estimates).
  size_t weight_bytes() const { return weight_bytes_; }

  // One step, as LlamaModel::Forward: each sequence's tokens at its positions, through its
  // block table (block ids < options.num_blocks). Logits of the sequences with want_logits stay
  // in device memory, [n_logits, n_vocab], until the next step.
  Status Forward(std::span<const model::SequenceStep> steps, int64_t* n_logits);
  Result<std::vector<float>> LogitsToHost(int64_t n_logits);
  // The greedy token of each of the last step's logit rows (Argmax on the device).
  Result<std::vector<int32_t>> Greedy(int64_t n_logits);

 private:
  DeviceLlama(kernels::Backend& backend, DeviceMemory& memory, DeviceLlamaOptions options)
      : backend_(backend), memory_(memory), options_(options) {}
  Status Init(const std::string& path);
  Result<float*> Floats(int64_t count);
  void RunLayer(int64_t layer, int64_t n, std::span<const int32_t> positions);

  struct Layer {
    kernels::WeightMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
    const float* attn_norm = nullptr;
    const float* ffn_norm = nullptr;
  };

  kernels::Backend& backend_;
  DeviceMemory& memory_;
  DeviceLlamaOptions options_;
  std::unique_ptr<model::LlamaModel> model_;  // opened (mapped), never prepared
  std::vector<std::shared_ptr<const void>> prepared_;
  kernels::WeightMatrix token_embd_, output_;
  const float* output_norm_ = nullptr;
  std::vector<Layer> layers_;
  std::unique_ptr<model::KvCache> cache_;
  kernels::RopeConfig rope_;
  float *x_ = nullptr, *h_ = nullptr, *q_ = nullptr, *k_ = nullptr, *v_ = nullptr, *attn_ = nullptr,
        *proj_ = nullptr, *gate_ = nullptr, *up_ = nullptr, *last_ = nullptr, *logits_ = nullptr;
  int32_t* next_ = nullptr;
  std::vector<int32_t> ids_, positions_;
  std::vector<kernels::AttentionSequence> prefill_, decode_;
  size_t weight_bytes_ = 0;
};

}  // namespace bmad::gpu_tests
