#include "worker/model/llama/llama_weights.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/bfloat16.h"
#include "common/half.h"
#include "kernels/q8_0.h"
#include "worker/model/llama/llama_split_check.h"

namespace bmad::model {
namespace {

class Mapper {
 public:
  Mapper(const gguf::GgufFile& file, LlamaWeights* weights) : file_(file), weights_(weights) {}

  Result<const gguf::TensorInfo*> Find(const std::string& name, std::vector<int64_t> shape) {
    const gguf::TensorInfo* t = file_.FindTensor(name);
    if (!t) return InvalidArgument(file_.path() + ": tensor '" + name + "' is missing");
    if (t->shape != shape) {
      std::string want = "[";
      for (size_t i = 0; i < shape.size(); ++i) want += (i ? ", " : "") + std::to_string(shape[i]);
      return InvalidArgument(file_.path() + ": tensor '" + name + "' has shape " +
                             t->ShapeString() + ", expected " + want + "]");
    }
    return t;
  }

  // A matrix of `rows` outputs by `cols` inputs (GGUF shape [cols, rows]).
  Result<kernels::WeightMatrix> Matrix(const std::string& name, int64_t rows, int64_t cols) {
    BMAD_ASSIGN_OR_RETURN(const gguf::TensorInfo* t, Find(name, {cols, rows}));
    const std::optional<kernels::WeightType> type = MatrixWeightType(t->type);
    if (!type) {
      return Unimplemented(file_.path() + ": tensor '" + name + "' has type " +
                           std::string(t->type_name()) +
                           "; bmad computes with f32, f16, bf16, q8_0, q4_0, q5_0, q4_1, q5_1, q4_K, q5_K and q6_K "
                           "weights");
    }
    weights_->bytes += t->nbytes;
    return kernels::MakeWeightMatrix(*type, t->data, rows, cols);
  }

  Result<const float*> Vector(const std::string& name, int64_t n) {
    BMAD_ASSIGN_OR_RETURN(const gguf::TensorInfo* t, Find(name, {n}));
    weights_->bytes += t->nbytes;
    if (t->type == static_cast<uint32_t>(gguf::TensorType::kF32)) {
      return reinterpret_cast<const float*>(t->data);
    }
    const bool f16 = t->type == static_cast<uint32_t>(gguf::TensorType::kF16);
    if (f16 || t->type == static_cast<uint32_t>(gguf::TensorType::kBF16)) {
      auto converted = std::make_unique<float[]>(static_cast<size_t>(n));
      const auto* h = reinterpret_cast<const uint16_t*>(t->data);
      for (int64_t i = 0; i < n; ++i) converted[i] = f16 ? HalfToFloat(h[i]) : Bf16ToFloat(h[i]);
      weights_->owned.push_back(std::move(converted));
      return weights_->owned.back().get();
    }
    return Unimplemented(file_.path() + ": tensor '" + name + "' has type " +
                         std::string(t->type_name()) + "; expected f32, f16 or bf16");
  }

 private:
  const gguf::GgufFile& file_;
  LlamaWeights* weights_;
};

// Columns [begin, begin + count) of every row, copied (they are not contiguous in the file).
Result<kernels::WeightMatrix> CopyColumns(const kernels::WeightMatrix& m, int64_t begin,
                                          int64_t count, const std::string& name, LlamaWeights* w) {
  if (begin == 0 && count == m.cols) return m;
  BMAD_RETURN_IF_ERROR(CheckColumnSlice(name, kernels::WeightTypeName(m.type), kernels::BlockElements(m.type),
                                        begin, count, m.cols / count));
  const size_t row_bytes = kernels::RowBytes(m.type, count);
  const size_t offset = kernels::RowBytes(m.type, begin);
  auto data = std::make_unique<uint8_t[]>(row_bytes * static_cast<size_t>(m.rows));
  for (int64_t r = 0; r < m.rows; ++r) {
    std::memcpy(data.get() + static_cast<size_t>(r) * row_bytes, m.Row(r) + offset, row_bytes);
  }
  kernels::WeightMatrix out = kernels::MakeWeightMatrix(m.type, data.get(), m.rows, count);
  w->column_slices.push_back(std::move(data));
  return out;
}

// Every tensor of the file is one the model uses (llama.cpp's loader refuses "wrong number of
// tensors" too): a block_count smaller than the file's layers, or tensors of another
// architecture (biases the llama graph here does not apply), would otherwise run a different
// model silently.
Status CheckEveryTensorIsUsed(const gguf::GgufFile& file, const LlamaConfig& c) {
  static const char* const kLayerTensors[] = {"attn_norm", "attn_q",   "attn_k",  "attn_v",   "attn_output",
                                              "ffn_norm",  "ffn_gate", "ffn_up",  "ffn_down"};
  std::vector<std::string> unused;
  size_t count = 0;
  for (const gguf::TensorInfo& t : file.tensors()) {
    const std::string& n = t.name;
    bool used = n == "token_embd.weight" || n == "output_norm.weight" || n == "output.weight" ||
                n == "rope_freqs.weight";
    if (!used && n.starts_with("blk.")) {
      const size_t dot = n.find('.', 4);
      const std::string index = n.substr(4, dot == std::string::npos ? 0 : dot - 4);
      const bool number = !index.empty() && index.size() <= 9 &&
                          index.find_first_not_of("0123456789") == std::string::npos &&
                          (index.size() == 1 || index[0] != '0');
      if (number && std::stoll(index) < c.n_layer) {
        for (const char* name : kLayerTensors) used = used || n.substr(dot + 1) == std::string(name) + ".weight";
      }
    }
    if (used) continue;
    ++count;
    if (unused.size() < 5) unused.push_back("'" + n + "'");
  }
  if (count == 0) return Status::Ok();
  std::string names;
  for (const std::string& u : unused) names += (names.empty() ? "" : ", ") + u;
  return InvalidArgument(file.path() + ": " + std::to_string(count) + " tensor(s) the model does not use: " +
                         names + (count > unused.size() ? ", ..." : "") + " (the file's block_count is " +
                         std::to_string(c.n_layer) + "; bias tensors and other architectures' tensors "
                         "are not applied by bmad's llama model)");
}

}  // namespace

std::optional<kernels::WeightType> MatrixWeightType(uint32_t gguf_type) {
  switch (static_cast<gguf::TensorType>(gguf_type)) {
    case gguf::TensorType::kF32: return kernels::WeightType::kF32;
    case gguf::TensorType::kF16: return kernels::WeightType::kF16;
    case gguf::TensorType::kQ8_0: return kernels::WeightType::kQ8_0;
    case gguf::TensorType::kBF16: return kernels::WeightType::kBF16;
    case gguf::TensorType::kQ4_0: return kernels::WeightType::kQ4_0;
    case gguf::TensorType::kQ5_0: return kernels::WeightType::kQ5_0;
    case gguf::TensorType::kQ4_1: return kernels::WeightType::kQ4_1;
    case gguf::TensorType::kQ5_1: return kernels::WeightType::kQ5_1;
    case gguf::TensorType::kQ4_K: return kernels::WeightType::kQ4_K;
    case gguf::TensorType::kQ5_K: return kernels::WeightType::kQ5_K;
    case gguf::TensorType::kQ6_K: return kernels::WeightType::kQ6_K;
    default: return std::nullopt;
  }
}

Status CheckBackendWeightTypes(const gguf::GgufFile& file, std::string_view backend,
                               const std::function<bool(kernels::WeightType)>& has_type) {
  for (const gguf::TensorInfo& t : file.tensors()) {
    if (t.shape.size() != 2) continue;  // norm vectors: converted to F32 on the host
    const std::optional<kernels::WeightType> type = MatrixWeightType(t.type);
    if (!type || has_type(*type)) continue;  // unknown types: the mapper names them
    return Unimplemented(file.path() + ": tensor '" + t.name + "' has type " + std::string(t.type_name()) +
                         ", which the " + std::string(backend) +
                         " backend does not compute with (it takes f32, f16 and q8_0); serve this file "
                         "on the cpu backend, or convert it to q8_0");
  }
  return Status::Ok();
}

Status CheckBackendWeightTypes(const gguf::GgufFile& file, const kernels::Backend& backend) {
  return CheckBackendWeightTypes(file, backend.name(),
                                 [&](kernels::WeightType type) { return backend.HasWeightType(type); });
}

Result<LlamaWeights> MapLlamaWeights(const gguf::GgufFile& file, const LlamaConfig& c,
                                     const LlamaShard& shard) {
  BMAD_RETURN_IF_ERROR(CheckEveryTensorIsUsed(file, c));
  LlamaWeights w;
  Mapper m(file, &w);
  const int64_t hd = c.head_dim;
  if (shard.first_stage()) {
    BMAD_ASSIGN_OR_RETURN(kernels::WeightMatrix embd, m.Matrix("token_embd.weight", c.n_vocab, c.n_embd));
    w.token_embd = embd.RowSlice(shard.vocab_begin, shard.n_vocab);
  }
  if (shard.last_stage()) {
    const char* name = file.FindTensor("output.weight") ? "output.weight" : "token_embd.weight";  // tied
    BMAD_ASSIGN_OR_RETURN(kernels::WeightMatrix out, m.Matrix(name, c.n_vocab, c.n_embd));
    w.output = out.RowSlice(shard.vocab_begin, shard.n_vocab);
    BMAD_ASSIGN_OR_RETURN(w.output_norm, m.Vector("output_norm.weight", c.n_embd));
  }
  if (file.FindTensor("rope_freqs.weight") != nullptr) {
    // Llama-3.1 and later: the "llama3" RoPE scaling, as llama.cpp's converter stores it (one
    // divisor per rotated pair; no rope.scaling.type key). Ignored, long prompts go wrong.
    const int64_t n = c.rope_dim / 2;
    if (n > kernels::kMaxRopeFreqFactors) {
      return Unimplemented(file.path() + ": tensor 'rope_freqs.weight' needs " + std::to_string(n) +
                           " factors; bmad supports at most " +
                           std::to_string(kernels::kMaxRopeFreqFactors));
    }
    BMAD_ASSIGN_OR_RETURN(w.rope_freq_factors, m.Vector("rope_freqs.weight", n));
    for (int64_t i = 0; i < n; ++i) {
      const float f = w.rope_freq_factors[i];
      if (!std::isfinite(f) || f <= 0.0f) {
        return InvalidArgument(file.path() + ": tensor 'rope_freqs.weight' value " + std::to_string(i) +
                               " is " + std::to_string(f) + "; RoPE frequency factors must be finite "
                               "and positive");
      }
    }
  }
  for (int64_t l = shard.layer_begin; l < shard.layer_end; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LlamaLayerWeights layer;
    BMAD_ASSIGN_OR_RETURN(kernels::WeightMatrix wq, m.Matrix(p + "attn_q.weight", c.q_dim(), c.n_embd));
    layer.wq = wq.RowSlice(shard.head_begin * hd, shard.n_head * hd);
    BMAD_ASSIGN_OR_RETURN(kernels::WeightMatrix wk, m.Matrix(p + "attn_k.weight", c.kv_dim(), c.n_embd));
    layer.wk = wk.RowSlice(shard.kv_head_begin * hd, shard.n_kv_head * hd);
    BMAD_ASSIGN_OR_RETURN(kernels::WeightMatrix wv, m.Matrix(p + "attn_v.weight", c.kv_dim(), c.n_embd));
    layer.wv = wv.RowSlice(shard.kv_head_begin * hd, shard.n_kv_head * hd);
    BMAD_ASSIGN_OR_RETURN(kernels::WeightMatrix wo, m.Matrix(p + "attn_output.weight", c.n_embd, c.q_dim()));
    BMAD_ASSIGN_OR_RETURN(layer.wo, CopyColumns(wo, shard.head_begin * hd, shard.n_head * hd,
                                                p + "attn_output.weight", &w));
    BMAD_ASSIGN_OR_RETURN(kernels::WeightMatrix gate, m.Matrix(p + "ffn_gate.weight", c.n_ff, c.n_embd));
    layer.w_gate = gate.RowSlice(shard.ff_begin, shard.n_ff);
    BMAD_ASSIGN_OR_RETURN(kernels::WeightMatrix up, m.Matrix(p + "ffn_up.weight", c.n_ff, c.n_embd));
    layer.w_up = up.RowSlice(shard.ff_begin, shard.n_ff);
    BMAD_ASSIGN_OR_RETURN(kernels::WeightMatrix down, m.Matrix(p + "ffn_down.weight", c.n_embd, c.n_ff));
    BMAD_ASSIGN_OR_RETURN(layer.w_down, CopyColumns(down, shard.ff_begin, shard.n_ff,
                                                    p + "ffn_down.weight", &w));
    BMAD_ASSIGN_OR_RETURN(layer.attn_norm, m.Vector(p + "attn_norm.weight", c.n_embd));
    BMAD_ASSIGN_OR_RETURN(layer.ffn_norm, m.Vector(p + "ffn_norm.weight", c.n_embd));
    w.layers.push_back(layer);
  }
  if (!shard.whole()) {
    // Count what this rank uses, not whole tensors.
    w.bytes = 0;
    auto add = [&](const kernels::WeightMatrix& x) { w.bytes += x.row_bytes * static_cast<size_t>(x.rows); };
    if (shard.first_stage()) add(w.token_embd);
    if (shard.last_stage()) add(w.output);
    for (const LlamaLayerWeights& l : w.layers) {
      for (const kernels::WeightMatrix* x : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) add(*x);
    }
  }
  return w;
}

void PrepareForBackend(LlamaWeights& w, kernels::Backend& backend) {
  bool all_relaid = true;
  auto prepare = [&](kernels::WeightMatrix& m) {
    if (m.rows == 0 || m.data == nullptr) return;
    kernels::PreparedWeight p = backend.PrepareMatMulWeight(m);
    all_relaid = all_relaid && p.view.data != m.data;
    m = p.view;
    if (p.storage) w.prepared.push_back(std::move(p.storage));
  };
  prepare(w.output);
  for (LlamaLayerWeights& l : w.layers) {
    for (kernels::WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      prepare(*m);
    }
  }
  // The backend copied every matrix into its own layout: the column-slice copies are garbage
  // once the copies have landed (a device backend's uploads may still be reading them).
  if (all_relaid) {
    (void)backend.Synchronize();  // a failure is reported by the caller's Synchronize
    w.column_slices.clear();
  }
}

}  // namespace bmad::model
