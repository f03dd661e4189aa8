// Identifiers shared by the KV block manager and its users (scheduler, memory pool, step plan).
#pragma once

#include <cstdint>

namespace bmad::kv {

// Index of one KV block in the memory pool. Block 0 is the reserved "null block": it is never
// handed out, so a zero in a block table or a step plan always means "no block".
using BlockId = int32_t;
inline constexpr BlockId kNullBlockId = 0;

// One sequence (request) in a replica's scheduler.
using SeqId = uint64_t;

}  // namespace bmad::kv
