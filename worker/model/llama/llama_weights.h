// Views of a Llama model's weights inside a mapped GGUF file, checked for shape and type.
// Matrices stay where they are in the file (F32, F16 or Q8_0 used in place); only norm vectors
// stored in F16 are converted (to F32) and owned here.
#pragma once

#include <memory>
#include <vector>

#include "common/status.h"
#include "kernels/backend.h"
#include "kernels/weight_matrix.h"
#include "worker/model/gguf/gguf_file.h"
#include "worker/model/llama/llama_config.h"

namespace bmad::model {

struct LlamaLayerWeights {
  kernels::WeightMatrix wq;      // [q_dim rows, n_embd cols]
  kernels::WeightMatrix wk;      // [kv_dim, n_embd]
  kernels::WeightMatrix wv;      // [kv_dim, n_embd]
  kernels::WeightMatrix wo;      // [n_embd, q_dim]
  kernels::WeightMatrix w_gate;  // [n_ff, n_embd]
  kernels::WeightMatrix w_up;    // [n_ff, n_embd]
  kernels::WeightMatrix w_down;  // [n_embd, n_ff]
  const float* attn_norm = nullptr;  // [n_embd]
  const float* ffn_norm = nullptr;   // [n_embd]
};

struct LlamaWeights {
  kernels::WeightMatrix token_embd;  // [n_vocab, n_embd]
  kernels::WeightMatrix output;      // [n_vocab, n_embd]; token_embd when the model ties them
  const float* output_norm = nullptr;
  std::vector<LlamaLayerWeights> layers;
  std::vector<std::unique_ptr<float[]>> owned;  // converted norm vectors
  std::vector<std::shared_ptr<const void>> prepared;  // backend-prepared matrices
  size_t bytes = 0;                              // weight bytes referenced
};

// Maps every tensor the model needs. Errors name the tensor: missing (kInvalidArgument), wrong
// shape (kInvalidArgument), or a type bmad does not compute with (kUnimplemented).
Result<LlamaWeights> MapLlamaWeights(const gguf::GgufFile& file, const LlamaConfig& config);

// Replaces every matrix MatMul reads (all but the embedding table, which stays in file layout
// for row lookups) by the backend's prepared form, keeping its storage alive in `prepared`.
void PrepareForBackend(LlamaWeights& weights, kernels::Backend& backend);

}  // namespace bmad::model
