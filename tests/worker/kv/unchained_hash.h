// A block hash that ignores the chain: equal blocks after different prefixes always collide, so
// only the KV manager's own prefix check keeps a block computed after one prefix from being
// reused after another.
#pragma once

#include <cstdint>
#include <span>

#include "common/block_hash.h"

namespace bmad::testing {

inline BlockHash UnchainedHash(BlockHash, std::span<const int32_t> tokens) {
  return HashBlock(kRootBlockHash, tokens);
}

}  // namespace bmad::testing
