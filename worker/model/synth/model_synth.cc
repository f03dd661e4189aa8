#include "worker/model/synth/model_synth.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "worker/model/gguf/gguf_file.h"
#include "worker/model/synth/synth_vocab.h"
#include "worker/model/synth/synth_weights.h"

namespace bmad::synth {
namespace {

using gguf::TensorType;

// Whether llama.cpp's Q4_K_M gives layer i of n more bits (its use_more_bits).
bool UseMoreBits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// The layer of "blk.N.<name>", or -1.
int64_t LayerOf(std::string_view tensor) {
  if (!tensor.starts_with("blk.")) return -1;
  int64_t layer = 0;
  for (size_t i = 4; i < tensor.size() && tensor[i] != '.'; ++i) layer = layer * 10 + (tensor[i] - '0');
  return layer;
}

// general.file_type (llama.cpp's LLAMA_FTYPE_ALL_F32, MOSTLY_F16, MOSTLY_Q8_0, MOSTLY_Q4_K_S,
// MOSTLY_Q6_K, MOSTLY_Q4_K_M, MOSTLY_Q5_K_M, MOSTLY_BF16, MOSTLY_Q4_0, MOSTLY_Q5_0, MOSTLY_Q4_1,
// MOSTLY_Q5_1).
uint32_t FileType(SynthDtype dtype) {
  switch (dtype) {
    case SynthDtype::kF32: return 0;
    case SynthDtype::kF16: return 1;
    case SynthDtype::kQ8_0: return 7;
    case SynthDtype::kQ4_K: return 14;
    case SynthDtype::kQ6_K: return 18;
    case SynthDtype::kQ4_K_M: return 15;
    case SynthDtype::kQ5_K_M: return 17;
    case SynthDtype::kBF16: return 32;
    case SynthDtype::kQ4_0: return 2;
    case SynthDtype::kQ5_0: return 8;
    case SynthDtype::kQ4_1: return 3;
    case SynthDtype::kQ5_1: return 9;
  }
  return 0;
}

constexpr SynthDtype kAllDtypes[] = {SynthDtype::kF32,    SynthDtype::kF16,    SynthDtype::kBF16,
                                     SynthDtype::kQ8_0,   SynthDtype::kQ4_0,   SynthDtype::kQ5_0,
                                     SynthDtype::kQ4_1,   SynthDtype::kQ5_1,
                                     SynthDtype::kQ4_K,   SynthDtype::kQ6_K,   SynthDtype::kQ4_K_M,
                                     SynthDtype::kQ5_K_M};

Status CheckRange(const char* field, int64_t value, int64_t lo, int64_t hi) {
  if (value < lo || value > hi) {
    return InvalidArgument(std::string(field) + " must be in [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "], got " + std::to_string(value));
  }
  return Status::Ok();
}

Status CheckParameterCount(const SynthSpec& spec, int64_t vocab) {
  const int64_t params = SynthParameterCount(spec, vocab);
  if (params > kMaxParameters) {
    return InvalidArgument("the model would have " + std::to_string(params) +
                           " parameters, over the limit of " + std::to_string(kMaxParameters));
  }
  return Status::Ok();
}

// A weight matrix of ggml shape [in, out] with random values of standard deviation `stddev`.
Status AddMatrix(gguf::GgufWriter& writer, const std::string& name, int64_t in, int64_t out,
                 float stddev, const SynthSpec& spec) {
  const TensorType type = SynthMatrixType(spec.dtype, name, spec.layers);
  const RandomMatrixSpec matrix{TensorSeed(spec.seed, name), in, out, stddev};
  return writer.AddTensor(name, {in, out}, type, [matrix, type](std::span<uint8_t> bytes) {
    return EncodeRandomMatrix(matrix, type, bytes);
  });
}

// The output matrix, with the rows of `zero_rows` (token ids) set to zero: a zero row in every
// encoding (F32, F16, BF16, and Q8_0, Q4_0 (its scale zero), Q5_0, Q4_1, Q5_1 and K-quant
// blocks with zero scales and mins) is all zero bytes.
Status AddOutputMatrix(gguf::GgufWriter& writer, int64_t in, int64_t vocab, float stddev,
                       const SynthSpec& spec, std::vector<int64_t> zero_rows) {
  const std::string name = "output.weight";
  const TensorType type = SynthMatrixType(spec.dtype, name, spec.layers);
  const RandomMatrixSpec matrix{TensorSeed(spec.seed, name), in, vocab, stddev};
  return writer.AddTensor(name, {in, vocab}, type,
                          [matrix, type, rows = std::move(zero_rows)](std::span<uint8_t> bytes) {
                            BMAD_RETURN_IF_ERROR(EncodeRandomMatrix(matrix, type, bytes));
                            const size_t row_bytes = bytes.size() / static_cast<size_t>(matrix.rows);
                            for (int64_t row : rows) {
                              std::fill_n(bytes.begin() + static_cast<ptrdiff_t>(row_bytes * row),
                                          row_bytes, uint8_t{0});
                            }
                            return Status::Ok();
                          });
}

// Token ids whose type is not NORMAL.
std::vector<int64_t> NonTextTokens(const std::vector<int64_t>& types) {
  std::vector<int64_t> ids;
  for (size_t i = 0; i < types.size(); ++i) {
    if (types[i] != kTokenNormal) ids.push_back(static_cast<int64_t>(i));
  }
  return ids;
}

// An RMSNorm weight: F32 ones (the identity scale), whatever the matrices' type.
Status AddNorm(gguf::GgufWriter& writer, const std::string& name, int64_t dim) {
  const std::vector<float> ones(static_cast<size_t>(dim), 1.0f);
  std::vector<uint8_t> bytes(ones.size() * sizeof(float));
  std::memcpy(bytes.data(), ones.data(), bytes.size());
  return writer.AddTensor(name, {dim}, TensorType::kF32, std::move(bytes));
}

}  // namespace

std::string_view SynthDtypeName(SynthDtype dtype) {
  switch (dtype) {
    case SynthDtype::kF32: return "f32";
    case SynthDtype::kF16: return "f16";
    case SynthDtype::kQ8_0: return "q8_0";
    case SynthDtype::kQ4_K: return "q4_k";
    case SynthDtype::kQ6_K: return "q6_k";
    case SynthDtype::kQ4_K_M: return "q4_k_m";
    case SynthDtype::kQ5_K_M: return "q5_k_m";
    case SynthDtype::kBF16: return "bf16";
    case SynthDtype::kQ4_0: return "q4_0";
    case SynthDtype::kQ5_0: return "q5_0";
    case SynthDtype::kQ4_1: return "q4_1";
    case SynthDtype::kQ5_1: return "q5_1";
  }
  return "?";
}

Result<SynthDtype> ParseSynthDtype(std::string_view name) {
  for (SynthDtype d : kAllDtypes) {
    if (name == SynthDtypeName(d)) return d;
  }
  return InvalidArgument("unknown dtype '" + std::string(name) +
                         "' (expected f32, f16, bf16, q8_0, q4_0, q5_0, q4_1, q5_1, q4_k, q6_k, q4_k_m or q5_k_m)");
}

TensorType SynthMatrixType(SynthDtype dtype, std::string_view tensor, int64_t layers) {
  switch (dtype) {
    case SynthDtype::kF32: return TensorType::kF32;
    case SynthDtype::kF16: return TensorType::kF16;
    case SynthDtype::kQ8_0: return TensorType::kQ8_0;
    case SynthDtype::kBF16: return TensorType::kBF16;
    case SynthDtype::kQ4_0: return TensorType::kQ4_0;
    case SynthDtype::kQ5_0: return TensorType::kQ5_0;
    case SynthDtype::kQ4_1: return TensorType::kQ4_1;
    case SynthDtype::kQ5_1: return TensorType::kQ5_1;
    case SynthDtype::kQ4_K: return TensorType::kQ4_K;
    case SynthDtype::kQ6_K: return TensorType::kQ6_K;
    case SynthDtype::kQ4_K_M:
    case SynthDtype::kQ5_K_M: {
      if (tensor == "output.weight") return TensorType::kQ6_K;
      const bool more_bits_kind = tensor.ends_with(".attn_v.weight") || tensor.ends_with(".ffn_down.weight");
      const int64_t layer = LayerOf(tensor);
      if (more_bits_kind && layer >= 0 && UseMoreBits(layer, layers)) return TensorType::kQ6_K;
      return dtype == SynthDtype::kQ4_K_M ? TensorType::kQ4_K : TensorType::kQ5_K;
    }
  }
  return TensorType::kF32;
}

Status ValidateSynthSpec(const SynthSpec& spec) {
  BMAD_RETURN_IF_ERROR(CheckRange("layers", spec.layers, 1, kMaxLayers));
  BMAD_RETURN_IF_ERROR(CheckRange("dim", spec.dim, 1, kMaxDim));
  BMAD_RETURN_IF_ERROR(CheckRange("heads", spec.heads, 1, kMaxHeads));
  BMAD_RETURN_IF_ERROR(CheckRange("kv_heads", spec.kv_heads, 1, spec.heads));
  BMAD_RETURN_IF_ERROR(CheckRange("ffn", spec.ffn, 1, kMaxFfn));
  BMAD_RETURN_IF_ERROR(CheckRange("ctx", spec.ctx, 1, kMaxContext));
  if (spec.dim % spec.heads != 0) {
    return InvalidArgument("dim " + std::to_string(spec.dim) + " is not divisible by heads " +
                           std::to_string(spec.heads));
  }
  if (spec.heads % spec.kv_heads != 0) {
    return InvalidArgument("heads " + std::to_string(spec.heads) +
                           " is not divisible by kv_heads " + std::to_string(spec.kv_heads));
  }
  const int64_t head_dim = spec.dim / spec.heads;
  if (head_dim % 2 != 0) {
    return InvalidArgument("the head dimension dim/heads = " + std::to_string(head_dim) +
                           " must be even (RoPE rotates pairs)");
  }
  const SynthDtype d = spec.dtype;
  const int64_t block = d == SynthDtype::kQ8_0 || d == SynthDtype::kQ4_0 || d == SynthDtype::kQ5_0 ||
                                d == SynthDtype::kQ4_1 || d == SynthDtype::kQ5_1
                            ? 32
                        : d == SynthDtype::kF32 || d == SynthDtype::kF16 || d == SynthDtype::kBF16 ? 1
                                                                                                   : 256;
  if (spec.dim % block != 0 || spec.ffn % block != 0) {
    return InvalidArgument(std::string(SynthDtypeName(spec.dtype)) + " needs dim and ffn to be multiples of " +
                           std::to_string(block) + ", got dim " + std::to_string(spec.dim) + " and ffn " +
                           std::to_string(spec.ffn));
  }
  if (spec.vocab_from.empty()) {
    BMAD_RETURN_IF_ERROR(CheckRange("vocab", spec.vocab, kMinGeneratedVocabulary, kMaxVocabulary));
    BMAD_RETURN_IF_ERROR(CheckParameterCount(spec, spec.vocab));
  } else {
    // 0 means "the size of the copied vocabulary", checked once it is read.
    BMAD_RETURN_IF_ERROR(CheckRange("vocab", spec.vocab, 0, kMaxVocabulary));
    BMAD_RETURN_IF_ERROR(CheckParameterCount(spec, spec.vocab));
  }
  return Status::Ok();
}

int64_t SynthParameterCount(const SynthSpec& spec, int64_t vocab) {
  const int64_t head_dim = spec.heads > 0 ? spec.dim / spec.heads : 0;
  const int64_t kv_dim = spec.kv_heads * head_dim;
  const int64_t per_layer = 2 * spec.dim                          // attn_norm, ffn_norm
                            + 2 * spec.dim * spec.dim             // attn_q, attn_output
                            + 2 * spec.dim * kv_dim               // attn_k, attn_v
                            + 3 * spec.dim * spec.ffn;            // ffn_gate, ffn_up, ffn_down
  return 2 * vocab * spec.dim + spec.dim + spec.layers * per_layer;
}

Status BuildSynthModel(const SynthSpec& spec, gguf::GgufWriter& writer) {
  BMAD_RETURN_IF_ERROR(ValidateSynthSpec(spec));
  const int64_t head_dim = spec.dim / spec.heads;
  const int64_t kv_dim = spec.kv_heads * head_dim;

  writer.SetString("general.architecture", "llama");
  writer.SetString("general.name", spec.name);
  writer.SetUint32("general.file_type", FileType(spec.dtype));
  // Architecture keys come before the vocabulary, whose size is only known after reading it.
  writer.SetUint32("llama.context_length", static_cast<uint32_t>(spec.ctx));
  writer.SetUint32("llama.embedding_length", static_cast<uint32_t>(spec.dim));
  writer.SetUint32("llama.block_count", static_cast<uint32_t>(spec.layers));
  writer.SetUint32("llama.feed_forward_length", static_cast<uint32_t>(spec.ffn));
  writer.SetUint32("llama.rope.dimension_count", static_cast<uint32_t>(head_dim));
  writer.SetUint32("llama.attention.head_count", static_cast<uint32_t>(spec.heads));
  writer.SetUint32("llama.attention.head_count_kv", static_cast<uint32_t>(spec.kv_heads));
  writer.SetFloat32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  writer.SetFloat32("llama.rope.freq_base", 10000.0f);
  writer.SetUint32("llama.vocab_size", 0);  // placeholder, keeps the key's place

  int64_t vocab = spec.vocab;
  std::vector<int64_t> token_types;
  if (spec.vocab_from.empty()) {
    BMAD_ASSIGN_OR_RETURN(const Vocabulary generated, MakeByteLevelVocabulary(spec.vocab));
    SetVocabulary(generated, writer);
    token_types.assign(generated.types.begin(), generated.types.end());
  } else {
    BMAD_ASSIGN_OR_RETURN(std::unique_ptr<gguf::GgufFile> source,
                          gguf::GgufFile::Open(spec.vocab_from));
    BMAD_ASSIGN_OR_RETURN(const int64_t copied, CopyVocabulary(*source, writer));
    if (vocab != 0 && vocab != copied) {
      return InvalidArgument("vocab " + std::to_string(vocab) + " differs from the " +
                             std::to_string(copied) + " tokens of " + spec.vocab_from +
                             " (leave --vocab out to use its size)");
    }
    vocab = copied;
    BMAD_RETURN_IF_ERROR(CheckParameterCount(spec, vocab));
    if (spec.text_only) {
      Result<std::vector<int64_t>> types = source->GetIntArray("tokenizer.ggml.token_type");
      if (!types.ok() || static_cast<int64_t>(types->size()) != vocab) {
        return InvalidArgument("text_only needs tokenizer.ggml.token_type with one type per token in " +
                               spec.vocab_from);
      }
      token_types = std::move(*types);
    }
  }
  std::vector<int64_t> zero_rows;
  if (spec.text_only) {
    zero_rows = NonTextTokens(token_types);
    if (static_cast<int64_t>(zero_rows.size()) == vocab) {
      return InvalidArgument("text_only: the vocabulary has no NORMAL token to keep");
    }
  }
  writer.SetUint32("llama.vocab_size", static_cast<uint32_t>(vocab));

  const float in_dim_stddev = 1.0f / std::sqrt(static_cast<float>(spec.dim));
  const float in_ffn_stddev = 1.0f / std::sqrt(static_cast<float>(spec.ffn));
  BMAD_RETURN_IF_ERROR(AddMatrix(writer, "token_embd.weight", spec.dim, vocab, 1.0f, spec));
  for (int64_t layer = 0; layer < spec.layers; ++layer) {
    const std::string blk = "blk." + std::to_string(layer) + ".";
    BMAD_RETURN_IF_ERROR(AddNorm(writer, blk + "attn_norm.weight", spec.dim));
    BMAD_RETURN_IF_ERROR(AddMatrix(writer, blk + "attn_q.weight", spec.dim, spec.dim,
                                   in_dim_stddev, spec));
    BMAD_RETURN_IF_ERROR(AddMatrix(writer, blk + "attn_k.weight", spec.dim, kv_dim,
                                   in_dim_stddev, spec));
    BMAD_RETURN_IF_ERROR(AddMatrix(writer, blk + "attn_v.weight", spec.dim, kv_dim,
                                   in_dim_stddev, spec));
    BMAD_RETURN_IF_ERROR(AddMatrix(writer, blk + "attn_output.weight", spec.dim, spec.dim,
                                   in_dim_stddev, spec));
    BMAD_RETURN_IF_ERROR(AddNorm(writer, blk + "ffn_norm.weight", spec.dim));
    BMAD_RETURN_IF_ERROR(AddMatrix(writer, blk + "ffn_gate.weight", spec.dim, spec.ffn,
                                   in_dim_stddev, spec));
    BMAD_RETURN_IF_ERROR(AddMatrix(writer, blk + "ffn_up.weight", spec.dim, spec.ffn,
                                   in_dim_stddev, spec));
    BMAD_RETURN_IF_ERROR(AddMatrix(writer, blk + "ffn_down.weight", spec.ffn, spec.dim,
                                   in_ffn_stddev, spec));
  }
  BMAD_RETURN_IF_ERROR(AddNorm(writer, "output_norm.weight", spec.dim));
  BMAD_RETURN_IF_ERROR(
      AddOutputMatrix(writer, spec.dim, vocab, in_dim_stddev, spec, std::move(zero_rows)));
  return Status::Ok();
}

Status SynthesizeModel(const SynthSpec& spec, const std::string& out_path) {
  gguf::GgufWriter writer;
  BMAD_RETURN_IF_ERROR(BuildSynthModel(spec, writer));
  return writer.WriteFile(out_path);
}

}  // namespace bmad::synth
