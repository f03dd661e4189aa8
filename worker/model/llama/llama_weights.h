// Views of a Llama model's weights inside a mapped GGUF file, checked for shape and type.
// Matrices stay where they are in the file (any type MatrixWeightType knows, used in place); only
// norm vectors stored in F16 or BF16 are converted (to F32) and owned here.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "kernels/backend.h"
#include "kernels/weight_matrix.h"
#include "worker/model/gguf/gguf_file.h"
#include "worker/model/llama/llama_config.h"
#include "worker/model/llama/llama_shard.h"

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
  // Shapes below are the whole model's; a shard holds the slices its LlamaShard names.
  kernels::WeightMatrix token_embd;  // [n_vocab, n_embd]; first stage only (vocab slice)
  kernels::WeightMatrix output;      // [n_vocab, n_embd]; last stage only (vocab slice)
  const float* output_norm = nullptr;  // last stage only
  const float* rope_freq_factors = nullptr;  // [rope_dim / 2], or null: rope_freqs.weight
  std::vector<LlamaLayerWeights> layers;  // this stage's layers
  std::vector<std::unique_ptr<float[]>> owned;  // converted norm vectors
  std::vector<std::unique_ptr<uint8_t[]>> column_slices;  // copies of column-sliced matrices
  std::vector<std::shared_ptr<const void>> prepared;  // backend-prepared matrices
  size_t bytes = 0;                              // weight bytes this shard references
};

// The kernels' type of a matrix stored as GGUF type `gguf_type`; nullopt for types bmad does
// not compute with.
std::optional<kernels::WeightType> MatrixWeightType(uint32_t gguf_type);

// kUnimplemented naming the first matrix of the file whose type `backend` lacks
// (Backend::HasWeightType): the CUDA backend computes with f32, f16 and q8_0 only. The second form asks by
// the backend's name and `has_type` (BackendHasWeightType), without one.
Status CheckBackendWeightTypes(const gguf::GgufFile& file, const kernels::Backend& backend);
Status CheckBackendWeightTypes(const gguf::GgufFile& file, std::string_view backend,
                               const std::function<bool(kernels::WeightType)>& has_type);

// Maps every tensor the shard needs, slicing for tensor parallelism (row slices stay in the
// file's memory; column slices, of the attention output and down projections, are copied, so a
// rank touches only its own part of the file). Errors name the tensor: missing or wrong shape
// (kInvalidArgument), or a type bmad does not compute with (kUnimplemented).
Result<LlamaWeights> MapLlamaWeights(const gguf::GgufFile& file, const LlamaConfig& config,
                                     const LlamaShard& shard);

// Replaces every matrix MatMul reads (all but the embedding table, which stays in file layout
// for row lookups) by the backend's prepared form, keeping its storage alive in `prepared`.
void PrepareForBackend(LlamaWeights& weights, kernels::Backend& backend);

}  // namespace bmad::model
