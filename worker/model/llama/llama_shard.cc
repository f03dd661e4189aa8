#include "worker/model/llama/llama_shard.h"

#include <algorithm>

namespace bmad::model {

std::string LlamaShard::Describe() const {
  return "stage " + std::to_string(stage) + "/" + std::to_string(pp) + " layers [" +
         std::to_string(layer_begin) + ", " + std::to_string(layer_end) + "), tp rank " +
         std::to_string(tp_rank) + "/" + std::to_string(tp) + " heads [" +
         std::to_string(head_begin) + ", " + std::to_string(head_begin + n_head) + ")";
}

LlamaShard WholeModel(const LlamaConfig& c) {
  LlamaShard s;
  s.layer_end = c.n_layer;
  s.n_head = c.n_head;
  s.n_kv_head = c.n_head_kv;
  s.n_ff = c.n_ff;
  s.n_vocab = c.n_vocab;
  s.vocab_stride = c.n_vocab;
  return s;
}

Result<LlamaShard> MakeLlamaShard(const LlamaConfig& c, int64_t tp, int64_t tp_rank, int64_t pp,
                                  int64_t stage, std::span<const int64_t> stage_layers) {
  auto bad = [](const std::string& why) { return InvalidArgument("cannot split the model: " + why); };
  if (tp < 1 || pp < 1 || tp_rank < 0 || tp_rank >= tp || stage < 0 || stage >= pp) {
    return bad("rank (tp " + std::to_string(tp_rank) + "/" + std::to_string(tp) + ", stage " +
               std::to_string(stage) + "/" + std::to_string(pp) + ") is out of range");
  }
  if (c.n_head % tp != 0) {
    return bad(std::to_string(c.n_head) + " attention heads do not divide over " +
               std::to_string(tp) + " tensor-parallel ranks (parallel.tp)");
  }
  if (c.n_head_kv % tp != 0) {
    return bad(std::to_string(c.n_head_kv) + " KV heads do not divide over " + std::to_string(tp) +
               " tensor-parallel ranks (parallel.tp)");
  }
  if (c.n_ff % tp != 0) {
    return bad("the MLP width " + std::to_string(c.n_ff) + " does not divide over " +
               std::to_string(tp) + " tensor-parallel ranks (parallel.tp)");
  }
  if (pp > c.n_layer) {
    return bad(std::to_string(pp) + " pipeline stages (parallel.pp) for a model of " +
               std::to_string(c.n_layer) + " layer" + (c.n_layer == 1 ? "" : "s") +
               ": every stage needs at least one layer");
  }
  LlamaShard s;
  s.tp = tp;
  s.tp_rank = tp_rank;
  s.pp = pp;
  s.stage = stage;
  if (!stage_layers.empty()) {
    if (static_cast<int64_t>(stage_layers.size()) != pp) {
      return bad("parallel.stage_layers has " + std::to_string(stage_layers.size()) +
                 " entries for " + std::to_string(pp) + " stages");
    }
    int64_t total = 0;
    for (int64_t n : stage_layers) {
      if (n < 1) return bad("parallel.stage_layers gives a stage no layer");
      // Checked before summing: entries near INT64_MAX wrapped around to a right-looking total.
      if (n > c.n_layer) {
        return bad("parallel.stage_layers gives a stage " + std::to_string(n) + " layers; the model has " +
                   std::to_string(c.n_layer));
      }
      total += n;
    }
    if (total != c.n_layer) {
      return bad("parallel.stage_layers sums to " + std::to_string(total) + " but the model has " +
                 std::to_string(c.n_layer) + " layers");
    }
    for (int64_t i = 0; i < stage; ++i) s.layer_begin += stage_layers[static_cast<size_t>(i)];
    s.layer_end = s.layer_begin + stage_layers[static_cast<size_t>(stage)];
  } else {
    // Balanced by layer count; the first stages take the remainder.
    const int64_t base = c.n_layer / pp, extra = c.n_layer % pp;
    s.layer_begin = stage * base + std::min(stage, extra);
    s.layer_end = s.layer_begin + base + (stage < extra ? 1 : 0);
  }
  s.n_head = c.n_head / tp;
  s.head_begin = tp_rank * s.n_head;
  s.n_kv_head = c.n_head_kv / tp;
  s.kv_head_begin = tp_rank * s.n_kv_head;
  s.n_ff = c.n_ff / tp;
  s.ff_begin = tp_rank * s.n_ff;
  s.vocab_stride = (c.n_vocab + tp - 1) / tp;
  s.vocab_begin = tp_rank * s.vocab_stride;
  s.n_vocab = std::max<int64_t>(0, std::min(s.vocab_stride, c.n_vocab - s.vocab_begin));
  return s;
}

}  // namespace bmad::model
