// Whether a Llama model splits into a replica's tensor-parallel ranks and pipeline stages, from
// the file's metadata and tensor types alone: what each rank would refuse at start-up, asked
// before anything starts (`bmad model check`, the launcher before it stops a running cluster).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"
#include "worker/model/gguf/gguf_file.h"
#include "worker/model/llama/llama_config.h"

namespace bmad::model {

// OK when every (tp rank, stage) of the layout has a shard (MakeLlamaShard) and every weight a
// rank slices by columns can be sliced so (whole blocks: 32 columns for q8_0, 256 for q4_K and
// q6_K). kInvalidArgument
// naming the parallel key and the reason otherwise.
Status CheckLlamaSplit(const gguf::GgufFile& file, const LlamaConfig& config, int64_t tp, int64_t pp,
                       std::span<const int64_t> stage_layers);

// kInvalidArgument when columns [begin, begin + count) of tensor `name` (of type `type_name`,
// whose blocks hold `block_elements` columns) cannot be a rank's slice: blocks are not cut.
Status CheckColumnSlice(const std::string& name, std::string_view type_name, int64_t block_elements,
                        int64_t begin, int64_t count, int64_t tp);

}  // namespace bmad::model
