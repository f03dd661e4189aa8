#include "worker/model/llama/llama_weights.h"

#include "common/half.h"

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
    kernels::WeightType type;
    switch (static_cast<gguf::TensorType>(t->type)) {
      case gguf::TensorType::kF32: type = kernels::WeightType::kF32; break;
      case gguf::TensorType::kF16: type = kernels::WeightType::kF16; break;
      case gguf::TensorType::kQ8_0: type = kernels::WeightType::kQ8_0; break;
      default:
        return Unimplemented(file_.path() + ": tensor '" + name + "' has type " +
                             std::string(t->type_name()) +
                             "; bmad computes with f32, f16 and q8_0 weights");
    }
    weights_->bytes += t->nbytes;
    return kernels::MakeWeightMatrix(type, t->data, rows, cols);
  }

  Result<const float*> Vector(const std::string& name, int64_t n) {
    BMAD_ASSIGN_OR_RETURN(const gguf::TensorInfo* t, Find(name, {n}));
    weights_->bytes += t->nbytes;
    if (t->type == static_cast<uint32_t>(gguf::TensorType::kF32)) {
      return reinterpret_cast<const float*>(t->data);
    }
    if (t->type == static_cast<uint32_t>(gguf::TensorType::kF16)) {
      auto converted = std::make_unique<float[]>(static_cast<size_t>(n));
      const auto* h = reinterpret_cast<const uint16_t*>(t->data);
      for (int64_t i = 0; i < n; ++i) converted[i] = HalfToFloat(h[i]);
      weights_->owned.push_back(std::move(converted));
      return weights_->owned.back().get();
    }
    return Unimplemented(file_.path() + ": norm tensor '" + name + "' has type " +
                         std::string(t->type_name()) + "; expected f32 or f16");
  }

 private:
  const gguf::GgufFile& file_;
  LlamaWeights* weights_;
};

}  // namespace

Result<LlamaWeights> MapLlamaWeights(const gguf::GgufFile& file, const LlamaConfig& c) {
  LlamaWeights w;
  Mapper m(file, &w);
  BMAD_ASSIGN_OR_RETURN(w.token_embd, m.Matrix("token_embd.weight", c.n_vocab, c.n_embd));
  if (file.FindTensor("output.weight")) {
    BMAD_ASSIGN_OR_RETURN(w.output, m.Matrix("output.weight", c.n_vocab, c.n_embd));
  } else {
    w.output = w.token_embd;  // tied embeddings
  }
  BMAD_ASSIGN_OR_RETURN(w.output_norm, m.Vector("output_norm.weight", c.n_embd));
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LlamaLayerWeights layer;
    BMAD_ASSIGN_OR_RETURN(layer.wq, m.Matrix(p + "attn_q.weight", c.q_dim(), c.n_embd));
    BMAD_ASSIGN_OR_RETURN(layer.wk, m.Matrix(p + "attn_k.weight", c.kv_dim(), c.n_embd));
    BMAD_ASSIGN_OR_RETURN(layer.wv, m.Matrix(p + "attn_v.weight", c.kv_dim(), c.n_embd));
    BMAD_ASSIGN_OR_RETURN(layer.wo, m.Matrix(p + "attn_output.weight", c.n_embd, c.q_dim()));
    BMAD_ASSIGN_OR_RETURN(layer.w_gate, m.Matrix(p + "ffn_gate.weight", c.n_ff, c.n_embd));
    BMAD_ASSIGN_OR_RETURN(layer.w_up, m.Matrix(p + "ffn_up.weight", c.n_ff, c.n_embd));
    BMAD_ASSIGN_OR_RETURN(layer.w_down, m.Matrix(p + "ffn_down.weight", c.n_embd, c.n_ff));
    BMAD_ASSIGN_OR_RETURN(layer.attn_norm, m.Vector(p + "attn_norm.weight", c.n_embd));
    BMAD_ASSIGN_OR_RETURN(layer.ffn_norm, m.Vector(p + "ffn_norm.weight", c.n_embd));
    w.layers.push_back(layer);
  }
  return w;
}

void PrepareForBackend(LlamaWeights& w, kernels::Backend& backend) {
  auto prepare = [&](kernels::WeightMatrix& m) {
    kernels::PreparedWeight p = backend.PrepareMatMulWeight(m);
    m = p.view;
    if (p.storage) w.prepared.push_back(std::move(p.storage));
  };
  prepare(w.output);
  for (LlamaLayerWeights& l : w.layers) {
    for (kernels::WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      prepare(*m);
    }
  }
}

}  // namespace bmad::model
