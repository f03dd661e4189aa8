// Synthesized Llama models: random weights, real file layout.
//
// SynthesizeModel writes a GGUF v3 file with llama.cpp's architecture keys, tensor names and
// ggml shapes ([in, out]), so bmad and llama.cpp both load it. The weights are deterministic in
// `seed` (the same spec gives a byte-identical file) and scaled so activations stay O(1):
// matrices have standard deviation 1/sqrt(in), the embedding 1.0, the norms are 1.0 (F32).
// Benchmarks and tests use it to get models of any size without downloading any.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "worker/model/gguf/gguf_writer.h"

namespace bmad::synth {

// The type of every matrix, embedding and output included; kQ4_K_M and kQ5_K_M mix Q4_K or Q5_K
// with Q6_K as llama.cpp's presets of those names do for a Llama model (SynthMatrixType).
enum class SynthDtype { kF32, kF16, kQ8_0, kQ4_K, kQ6_K, kQ4_K_M, kQ5_K_M, kBF16, kQ4_0, kQ5_0, kQ4_1, kQ5_1 };

// "f32", "f16", "q8_0", "q4_k", "q6_k", "q4_k_m", "q5_k_m", "bf16", "q4_0", "q5_0", "q4_1", "q5_1"
std::string_view SynthDtypeName(SynthDtype dtype);
// kInvalidArgument naming the accepted names.
Result<SynthDtype> ParseSynthDtype(std::string_view name);

struct SynthSpec {
  int64_t layers = 0;
  int64_t dim = 0;             // embedding width; divisible by heads
  int64_t heads = 0;
  int64_t kv_heads = 0;        // divides heads (grouped-query attention when fewer)
  int64_t ffn = 0;             // feed-forward width
  int64_t vocab = 0;           // 0 with vocab_from: take the vocabulary's size
  int64_t ctx = 2048;          // llama.context_length
  SynthDtype dtype = SynthDtype::kF16;
  uint64_t seed = 0;
  std::string vocab_from;      // a GGUF file whose tokenizer.* keys are copied; empty: generate
  std::string name = "bmad-synth";  // general.name
  // Zero the output rows of every token that is not NORMAL text (byte fallbacks, control and
  // unknown tokens), so greedy decoding only emits text pieces and the output is always valid
  // UTF-8. For benchmarks against servers that abort a stream on invalid UTF-8 (llama-server
  // does, and a random model emits lone byte tokens); the logits of the other tokens are
  // unchanged, so the compute is the same.
  bool text_only = false;
};

// Limits: far above the models bmad serves, low enough that a typo fails fast.
inline constexpr int64_t kMaxLayers = 1024;
inline constexpr int64_t kMaxDim = 65536;
inline constexpr int64_t kMaxHeads = 1024;
inline constexpr int64_t kMaxFfn = int64_t{1} << 20;
inline constexpr int64_t kMaxContext = int64_t{1} << 24;
inline constexpr int64_t kMaxParameters = int64_t{1} << 36;

// Checks the shape: positive sizes under the limits, dim divisible by heads, heads by kv_heads,
// an even head dimension (RoPE rotates pairs), dim and ffn multiples of 32 for Q8_0 (256 for
// the K-quants), a vocab
// of at least 259 when generated. kInvalidArgument naming the field.
Status ValidateSynthSpec(const SynthSpec& spec);

// Weights in the model (all tensors) for a vocabulary of `vocab` tokens.
int64_t SynthParameterCount(const SynthSpec& spec, int64_t vocab);

// The GGUF type of matrix `tensor` (its name, e.g. "blk.3.attn_v.weight") of a model of
// `layers` layers. For kQ4_K_M (kQ5_K_M), llama.cpp's choice for Llama: Q6_K for output.weight,
// and for attn_v and ffn_down in the layers that get more bits (the first and last eighth, and
// every third between); Q4_K (Q5_K) for the rest.
gguf::TensorType SynthMatrixType(SynthDtype dtype, std::string_view tensor, int64_t layers);

// Sets the model's metadata and adds its tensors to `writer`; the weights are generated when
// the writer writes. Validates the spec; reads vocab_from (kNotFound, kDataLoss, ... from
// GgufFile; kInvalidArgument when its size differs from a nonzero `vocab`).
Status BuildSynthModel(const SynthSpec& spec, gguf::GgufWriter& writer);

// BuildSynthModel, then writes `out_path` (kIoError naming it on failure).
Status SynthesizeModel(const SynthSpec& spec, const std::string& out_path);

}  // namespace bmad::synth
