#include "worker/model/llama/llama_config.h"

#include <cmath>
#include <cstdio>

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

// 1 / factor as the float the kernels use: finite and positive only when the factor is a
// finite positive number whose inverse a float can hold (a denormal factor's cannot).
std::string Number(double value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", value);
  return buf;
}

bool HasFloatInverse(double factor) {
  if (!std::isfinite(factor) || !(factor > 0)) return false;
  const auto inverse = static_cast<float>(1.0 / factor);
  return std::isfinite(inverse) && inverse > 0;
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
    return Unimplemented(file.path() + ": architecture '" + c.architecture +
                         "' is not supported (bmad runs Llama-family models: llama, mistral)");
  }
  if (auto name = file.GetString("general.name"); name.ok()) c.name = std::string(*name);
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
  c.rms_eps = static_cast<float>(rms_eps);
  c.rope_freq_base = static_cast<float>(freq_base);

  auto bad = [&](const std::string& what) {
    return InvalidArgument(file.path() + ": " + what);
  };
  if (c.n_layer <= 0 || c.n_embd <= 0 || c.n_head <= 0 || c.n_head_kv <= 0 || c.n_ff <= 0 ||
      c.n_ctx_train <= 0) {
    return bad("model sizes must be positive (" + c.Summary() + ")");
  }
  if (c.n_embd % c.n_head != 0) {
    return bad(p + "embedding_length " + std::to_string(c.n_embd) +
               " is not a multiple of the head count " + std::to_string(c.n_head));
  }
  if (c.n_head % c.n_head_kv != 0) {
    return bad(p + "attention.head_count " + std::to_string(c.n_head) +
               " is not a multiple of head_count_kv " + std::to_string(c.n_head_kv));
  }
  c.head_dim = c.n_embd / c.n_head;
  BMAD_ASSIGN_OR_RETURN(c.rope_dim, Optional(file.GetInt(p + "rope.dimension_count"), c.head_dim));
  if (c.rope_dim <= 0 || c.rope_dim > c.head_dim || c.rope_dim % 2 != 0) {
    return bad(p + "rope.dimension_count " + std::to_string(c.rope_dim) +
               " must be even and at most the head size " + std::to_string(c.head_dim));
  }
  if (!(std::isfinite(c.rms_eps) && c.rms_eps > 0)) {
    return bad(p + "attention.layer_norm_rms_epsilon must be a finite positive number, got " +
               Number(rms_eps));
  }
  if (!(std::isfinite(c.rope_freq_base) && c.rope_freq_base > 0)) {
    return bad(p + "rope.freq_base must be a finite positive number, got " + Number(freq_base));
  }
  BMAD_ASSIGN_OR_RETURN(const std::string_view scaling,
                        Optional(file.GetString(p + "rope.scaling.type"), std::string_view("none")));
  if (scaling != "none") {
    if (scaling != "linear") {
      return Unimplemented(file.path() + ": RoPE scaling '" + std::string(scaling) +
                           "' is not supported (none and linear are)");
    }
    BMAD_ASSIGN_OR_RETURN(const double factor, Optional(file.GetFloat(p + "rope.scaling.factor"), 1.0));
    if (!HasFloatInverse(factor)) {
      return bad(p + "rope.scaling.factor must be a finite positive number with a finite inverse, got " +
                 Number(factor));
    }
    c.rope_freq_scale = static_cast<float>(1.0 / factor);
  } else {
    // The older key, from before rope.scaling.*: 0 (as some converters write) means none.
    BMAD_ASSIGN_OR_RETURN(const double factor, Optional(file.GetFloat(p + "rope.scale_linear"), 0.0));
    if (factor != 0) {
      if (!HasFloatInverse(factor)) {
        return bad(p + "rope.scale_linear must be a finite positive number with a finite inverse, got " +
                   Number(factor));
      }
      c.rope_freq_scale = static_cast<float>(1.0 / factor);
    }
  }
  // The vocabulary size comes from the embedding tensor (the authority llama.cpp uses too).
  const gguf::TensorInfo* embd = file.FindTensor("token_embd.weight");
  if (!embd) return bad("tensor 'token_embd.weight' is missing");
  if (embd->shape.size() != 2) return bad("tensor 'token_embd.weight' must be 2-dimensional");
  c.n_vocab = embd->shape[1];
  return c;
}

}  // namespace bmad::model
