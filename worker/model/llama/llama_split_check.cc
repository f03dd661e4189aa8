#include "worker/model/llama/llama_split_check.h"

#include <optional>

#include "kernels/q8_0.h"
#include "worker/model/llama/llama_shard.h"

namespace bmad::model {

Status CheckColumnSlice(const std::string& name, std::string_view type_name, int64_t block_elements,
                        int64_t begin, int64_t count, int64_t tp) {
  if (begin % block_elements == 0 && count % block_elements == 0) return Status::Ok();
  return InvalidArgument("cannot split the model: " + std::string(type_name) + " tensor '" + name +
                         "' would be cut into slices of " + std::to_string(count) + " columns for " +
                         std::to_string(tp) + " tensor-parallel ranks (parallel.tp); " + std::string(type_name) +
                         " weights split only at multiples of " + std::to_string(block_elements) +
                         " columns (use another parallel.tp, or an f16" +
                         (block_elements > kernels::kQ8_0Block ? " or q8_0" : "") + " model)");
}

Status CheckLlamaSplit(const gguf::GgufFile& file, const LlamaConfig& c, int64_t tp, int64_t pp,
                       std::span<const int64_t> stage_layers) {
  for (int64_t stage = 0; stage < pp; ++stage) {
    for (int64_t rank = 0; rank < tp; ++rank) {
      BMAD_ASSIGN_OR_RETURN(LlamaShard shard, MakeLlamaShard(c, tp, rank, pp, stage, stage_layers));
      // The weights a rank slices by columns (the rest it slices by rows, which any type allows).
      for (int64_t l = shard.layer_begin; l < shard.layer_end; ++l) {
        const std::string p = "blk." + std::to_string(l) + ".";
        const struct {
          std::string name;
          int64_t begin, count;
        } sliced[] = {{p + "attn_output.weight", shard.head_begin * c.head_dim, shard.n_head * c.head_dim},
                      {p + "ffn_down.weight", shard.ff_begin, shard.n_ff}};
        for (const auto& s : sliced) {
          const gguf::TensorInfo* t = file.FindTensor(s.name);
          if (t == nullptr) continue;  // missing: the weights loader says so
          const std::optional<gguf::TensorTypeTraits> traits = gguf::GetTensorTypeTraits(t->type);
          if (!traits) continue;  // an unknown type: the weights loader says so
          BMAD_RETURN_IF_ERROR(
              CheckColumnSlice(s.name, traits->name, traits->block_elements, s.begin, s.count, tp));
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace bmad::model
