// The hyperparameters of a Llama-family model, read from GGUF metadata and validated.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "worker/model/gguf/gguf_file.h"

namespace bmad::model {

struct LlamaConfig {
  std::string architecture;     // "llama", ...
  std::string name;             // general.name (may be empty)
  int64_t n_layer = 0;
  int64_t n_embd = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;         // n_embd / n_head
  int64_t n_ff = 0;
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;      // context length the model was trained for
  float rms_eps = 1e-5f;
  int64_t rope_dim = 0;         // rotated dims per head
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f; // 1 / linear scaling factor

  int64_t q_dim() const { return n_head * head_dim; }
  int64_t kv_dim() const { return n_head_kv * head_dim; }
  // Parameters (weights) in the model.
  int64_t ParameterCount() const;
  std::string Summary() const;  // one line for logs
};

// Architectures whose graph is Llama's (RMSNorm, RoPE, GQA attention, SwiGLU MLP).
bool IsLlamaFamily(std::string_view architecture);

// Reads and checks the hyperparameters. Errors name the file and the key: an unsupported
// architecture or RoPE scaling type (kUnimplemented), a missing or inconsistent key
// (kInvalidArgument).
Result<LlamaConfig> ReadLlamaConfig(const gguf::GgufFile& file);

// The context to serve `model` with: `configured` (model.context_length; 0: the model's own).
// One beyond the context the model was trained for is refused, naming `model_path`, as vLLM
// refuses a max_model_len beyond the model's: positions past it were never trained, and were
// silently cut to the model's.
Result<int64_t> ContextLengthToServe(const LlamaConfig& model, int64_t configured, const std::string& model_path);

}  // namespace bmad::model
