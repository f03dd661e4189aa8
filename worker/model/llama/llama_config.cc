#include "worker/model/llama/llama_config.h"

#include <cfloat>
#include <cstdint>
#include <cmath>
#include <cstdio>

#include "common/utf8.h"

namespace bmad::model {
namespace {

constexpr const char* kLlamaFamily[] = {"llama", "mistral"};

// An optional key: its value, `fallback` when it is absent, the getter's error when it has
// another type (a string where a number belongs is a broken file, not a default).
template <typename T, typename U>
Result<T> Optional(Result<T> got, U fallback) {
  if (got.ok() || got.status().code() != StatusCode::kNotFound) return got;
  return T(fallback);
}

// Whether `value` (from a float64 key, or 1 / a factor) is a positive finite float as the
// kernels use it: not past the float range (the cast would be undefined) and not rounding to 0
// (a denormal factor's inverse, say). NaN fails every comparison.
bool IsPositiveFloat(double value) {
  return value > 0 && value <= FLT_MAX && static_cast<float>(value) > 0;
}

std::string Number(double value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", value);
  return buf;
}

}  // namespace

bool IsLlamaFamily(std::string_view architecture) {
  for (const char* a : kLlamaFamily) {
    if (architecture == a) return true;
  }
  return false;
}

int64_t LlamaConfig::ParameterCount() const {
  const int64_t per_layer = n_embd * q_dim() + 2 * n_embd * kv_dim() + q_dim() * n_embd +
                            3 * n_embd * n_ff + 2 * n_embd;
  return n_layer * per_layer + 2 * n_vocab * n_embd + n_embd;
}

std::string LlamaConfig::Summary() const {
  return architecture + " '" + name + "': " + std::to_string(n_layer) + " layers, width " +
         std::to_string(n_embd) + ", " + std::to_string(n_head) + " heads (" +
         std::to_string(n_head_kv) + " kv), ffn " + std::to_string(n_ff) + ", vocab " +
         std::to_string(n_vocab) + ", context " + std::to_string(n_ctx_train);
}

Result<LlamaConfig> ReadLlamaConfig(const gguf::GgufFile& file) {
  LlamaConfig c;
  BMAD_ASSIGN_OR_RETURN(std::string_view arch, file.GetString("general.architecture"));
  c.architecture = std::string(arch);
  if (!IsLlamaFamily(arch)) {
    return Unimplemented(file.path() + ": architecture " + QuotedText(c.architecture) +
                         " is not supported (bmad runs Llama-family models: llama, mistral)");
  }
  // Optional, but of the wrong type the file is broken (llama.cpp refuses it too).
  BMAD_ASSIGN_OR_RETURN(const std::string_view name, Optional(file.GetString("general.name"), std::string_view()));
  c.name = std::string(name);
  const std::string p = c.architecture + ".";
  // Mixtral and its kind call themselves llama too; without this they fail on a missing
  // feed-forward tensor, which says nothing about why.
  BMAD_ASSIGN_OR_RETURN(const int64_t experts, Optional(file.GetInt(p + "expert_count"), 0));
  if (experts > 0) {
    return Unimplemented(file.path() + ": a mixture-of-experts model (" + p + "expert_count " +
                         std::to_string(experts) + ") is not supported (bmad runs dense models)");
  }
  BMAD_ASSIGN_OR_RETURN(c.n_layer, file.GetInt(p + "block_count"));
  BMAD_ASSIGN_OR_RETURN(c.n_embd, file.GetInt(p + "embedding_length"));
  BMAD_ASSIGN_OR_RETURN(c.n_head, file.GetInt(p + "attention.head_count"));
  BMAD_ASSIGN_OR_RETURN(c.n_head_kv, Optional(file.GetInt(p + "attention.head_count_kv"), c.n_head));
  BMAD_ASSIGN_OR_RETURN(c.n_ff, file.GetInt(p + "feed_forward_length"));
  BMAD_ASSIGN_OR_RETURN(c.n_ctx_train, file.GetInt(p + "context_length"));
  BMAD_ASSIGN_OR_RETURN(const double rms_eps,
                        Optional(file.GetFloat(p + "attention.layer_norm_rms_epsilon"), 1e-5));
  BMAD_ASSIGN_OR_RETURN(const double freq_base, Optional(file.GetFloat(p + "rope.freq_base"), 10000.0));

  auto bad = [&](const std::string& what) {
    return InvalidArgument(file.path() + ": " + what);
  };
  for (const auto& [key, value] : {std::pair<const char*, int64_t>{"block_count", c.n_layer},
                                   {"embedding_length", c.n_embd},
                                   {"attention.head_count", c.n_head},
                                   {"attention.head_count_kv", c.n_head_kv},
                                   {"feed_forward_length", c.n_ff},
                                   {"context_length", c.n_ctx_train}}) {
    if (value <= 0) return bad(p + key + " is " + std::to_string(value) + "; model sizes must be positive");
  }
  // Positions are 32-bit (llama.cpp keeps the context length in 32 bits too); a larger value
  // would overflow the sizes derived from it.
  if (c.n_ctx_train > INT32_MAX) {
    return bad(p + "context_length " + std::to_string(c.n_ctx_train) + " is more than " +
               std::to_string(INT32_MAX) + " tokens");
  }
  if (c.n_embd % c.n_head != 0) {
    return bad(p + "embedding_length " + std::to_string(c.n_embd) +
               " is not a multiple of the head count " + std::to_string(c.n_head));
  }
  if (c.n_head % c.n_head_kv != 0) {
    return bad(p + "attention.head_count " + std::to_string(c.n_head) +
               " is not a multiple of head_count_kv " + std::to_string(c.n_head_kv));
  }
  if (!IsPositiveFloat(rms_eps)) {
    return bad(p + "attention.layer_norm_rms_epsilon must be a finite positive number, got " +
               Number(rms_eps));
  }
  if (!IsPositiveFloat(freq_base)) {
    return bad(p + "rope.freq_base must be a finite positive number, got " + Number(freq_base));
  }
  c.rms_eps = static_cast<float>(rms_eps);
  c.rope_freq_base = static_cast<float>(freq_base);
  c.head_dim = c.n_embd / c.n_head;
  // Some models set the head size apart from the width (key_length); the kernels derive it from
  // the width, so such a file would fail later on a tensor shape that says nothing about why.
  for (const char* key : {"attention.key_length", "attention.value_length"}) {
    BMAD_ASSIGN_OR_RETURN(const int64_t length, Optional(file.GetInt(p + key), c.head_dim));
    if (length != c.head_dim) {
      return Unimplemented(file.path() + ": " + p + key + " " + std::to_string(length) +
                           " differs from embedding_length / head_count = " + std::to_string(c.head_dim) +
                           " (bmad runs models whose head size is the width over the head count)");
    }
  }
  BMAD_ASSIGN_OR_RETURN(c.rope_dim, Optional(file.GetInt(p + "rope.dimension_count"), c.head_dim));
  if (c.rope_dim <= 0 || c.rope_dim > c.head_dim || c.rope_dim % 2 != 0) {
    return bad(p + "rope.dimension_count " + std::to_string(c.rope_dim) +
               " must be even and at most the head size " + std::to_string(c.head_dim));
  }
  // As llama.cpp reads them: the type is linear unless the file says otherwise; the factor is
  // rope.scaling.factor, or the older rope.scale_linear (from before rope.scaling.*), whatever
  // the type; a factor of 0 (as some converters write) or none means no scaling, and so does the
  // type none, whatever the factor.
  BMAD_ASSIGN_OR_RETURN(const std::string_view scaling,
                        Optional(file.GetString(p + "rope.scaling.type"), std::string_view("linear")));
  if (scaling != "none" && scaling != "linear") {
    return Unimplemented(file.path() + ": RoPE scaling " + QuotedText(scaling) +
                         " is not supported (none and linear are)");
  }
  const std::string factor_key =
      p + (file.Has(p + "rope.scaling.factor") ? "rope.scaling.factor" : "rope.scale_linear");
  BMAD_ASSIGN_OR_RETURN(const double factor, Optional(file.GetFloat(factor_key), 0.0));
  // The linear factor divides positions: the kernels take its inverse.
  if (factor != 0 && scaling == "linear") {
    const double inverse = factor > 0 ? 1.0 / factor : 0.0;  // 0: fails the check below
    if (!IsPositiveFloat(inverse)) {
      return bad(factor_key + " must be a finite positive number with a finite inverse, got " +
                 Number(factor));
    }
    c.rope_freq_scale = static_cast<float>(inverse);
  }
  // The vocabulary size comes from the embedding tensor (the authority llama.cpp uses too).
  const gguf::TensorInfo* embd = file.FindTensor("token_embd.weight");
  if (!embd) return bad("tensor 'token_embd.weight' is missing");
  if (embd->shape.size() != 2) return bad("tensor 'token_embd.weight' must be 2-dimensional");
  c.n_vocab = embd->shape[1];
  return c;
}

Result<int64_t> ContextLengthToServe(const LlamaConfig& model, int64_t configured, const std::string& model_path) {
  if (configured <= 0) return model.n_ctx_train;
  if (configured > model.n_ctx_train) {
    return InvalidArgument("model.context_length " + std::to_string(configured) + " is more than " + model_path +
                           " was trained for (" + std::to_string(model.n_ctx_train) +
                           " tokens, its context_length): set at most that, or 0 for the model's own");
  }
  return configured;
}

}  // namespace bmad::model
