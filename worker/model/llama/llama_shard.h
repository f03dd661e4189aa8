// Which part of a Llama model one rank computes: a contiguous range of layers (its pipeline
// stage) and, within each, a slice of the attention heads, KV heads and MLP width (its
// tensor-parallel rank), plus a slice of the vocabulary for the embedding and the LM head.
//
// Tensor parallelism follows the usual split: Q/K/V and gate/up are split by output rows (each
// rank owns whole heads and a slice of the MLP width), the attention output and down projections
// by input columns, so each block ends in one all-reduce of partial sums. The embedding table and
// the LM head are split by vocabulary (an all-reduce assembles embeddings, an all-gather logits).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "common/status.h"
#include "worker/model/llama/llama_config.h"

namespace bmad::model {

struct LlamaShard {
  int64_t tp = 1, tp_rank = 0;
  int64_t pp = 1, stage = 0;
  int64_t layer_begin = 0, layer_end = 0;  // this stage's layers, [begin, end)
  int64_t head_begin = 0, n_head = 0;      // query heads of this rank
  int64_t kv_head_begin = 0, n_kv_head = 0;
  int64_t ff_begin = 0, n_ff = 0;          // MLP width of this rank
  int64_t vocab_begin = 0, n_vocab = 0;    // vocabulary rows of this rank
  int64_t vocab_stride = 0;                // every rank's vocab slice is padded to this many

  bool first_stage() const { return stage == 0; }
  bool last_stage() const { return stage == pp - 1; }
  int64_t n_layers() const { return layer_end - layer_begin; }
  bool whole() const { return tp == 1 && pp == 1; }
  std::string Describe() const;
};

// The whole model on one rank.
LlamaShard WholeModel(const LlamaConfig& config);

// The shard of (tp_rank, stage). `stage_layers` overrides the balanced split (one entry per
// stage, summing to the layer count). kInvalidArgument with the reason for a shape that cannot
// be split: heads or KV heads not divisible by tp, an MLP width not divisible by tp, more stages
// than layers, a stage_layers list that does not fit.
Result<LlamaShard> MakeLlamaShard(const LlamaConfig& config, int64_t tp, int64_t tp_rank,
                                  int64_t pp, int64_t stage, std::span<const int64_t> stage_layers);

}  // namespace bmad::model
