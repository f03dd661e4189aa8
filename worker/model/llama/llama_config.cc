#include "worker/model/llama/llama_config.h"

#include <cmath>

namespace bmad::model {
namespace {

constexpr const char* kLlamaFamily[] = {"llama", "mistral"};

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
  BMAD_ASSIGN_OR_RETURN(c.n_layer, file.GetInt(p + "block_count"));
  BMAD_ASSIGN_OR_RETURN(c.n_embd, file.GetInt(p + "embedding_length"));
  BMAD_ASSIGN_OR_RETURN(c.n_head, file.GetInt(p + "attention.head_count"));
  c.n_head_kv = file.GetInt(p + "attention.head_count_kv").value_or(c.n_head);
  BMAD_ASSIGN_OR_RETURN(c.n_ff, file.GetInt(p + "feed_forward_length"));
  BMAD_ASSIGN_OR_RETURN(c.n_ctx_train, file.GetInt(p + "context_length"));
  c.rms_eps = static_cast<float>(
      file.GetFloat(p + "attention.layer_norm_rms_epsilon").value_or(1e-5));
  c.rope_freq_base = static_cast<float>(file.GetFloat(p + "rope.freq_base").value_or(10000.0));

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
  c.rope_dim = file.GetInt(p + "rope.dimension_count").value_or(c.head_dim);
  if (c.rope_dim <= 0 || c.rope_dim > c.head_dim || c.rope_dim % 2 != 0) {
    return bad(p + "rope.dimension_count " + std::to_string(c.rope_dim) +
               " must be even and at most the head size " + std::to_string(c.head_dim));
  }
  if (!(c.rms_eps > 0) || !(c.rope_freq_base > 0) || !std::isfinite(c.rope_freq_base)) {
    return bad("rms epsilon and rope.freq_base must be positive");
  }
  if (auto type = file.GetString(p + "rope.scaling.type"); type.ok() && *type != "none") {
    if (*type != "linear") {
      return Unimplemented(file.path() + ": RoPE scaling '" + std::string(*type) +
                           "' is not supported (none and linear are)");
    }
    const double factor = file.GetFloat(p + "rope.scaling.factor").value_or(1.0);
    if (!(factor > 0)) return bad(p + "rope.scaling.factor must be positive");
    c.rope_freq_scale = static_cast<float>(1.0 / factor);
  } else if (auto factor = file.GetFloat(p + "rope.scale_linear"); factor.ok() && *factor > 0) {
    c.rope_freq_scale = static_cast<float>(1.0 / *factor);
  }
  // The vocabulary size comes from the embedding tensor (the authority llama.cpp uses too).
  const gguf::TensorInfo* embd = file.FindTensor("token_embd.weight");
  if (!embd) return bad("tensor 'token_embd.weight' is missing");
  if (embd->shape.size() != 2) return bad("tensor 'token_embd.weight' must be 2-dimensional");
  c.n_vocab = embd->shape[1];
  return c;
}

}  // namespace bmad::model
