// The hash of a full KV block: its tokens chained with the hash of the block before it, so a
// block's hash identifies the whole prefix up to and including it. Workers key their prefix
// cache by it and the coordinator computes the same values from the same token ids, which is
// how the router knows, without asking, which replica already caches a prompt's prefix.
//
// The function is part of the protocol between processes: never change it without changing
// proto::kProtocolVersion.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace bmad {

using BlockHash = uint64_t;

// The parent of a sequence's first block.
inline constexpr BlockHash kRootBlockHash = 0x6a09e667f3bcc908ull;

// The parent of the first block of a sequence with vLLM's `cache_salt`: kRootBlockHash for none
// (empty), else a value from the salt's bytes, so that equal prompts with different salts share
// no block. Not cryptographic: a client that does not know a salt cannot aim at its chain, which
// is what isolation needs; a 64-bit collision is as unlikely as between two prompts.
BlockHash RootBlockHash(std::string_view cache_salt);

BlockHash HashBlock(BlockHash parent, std::span<const int32_t> tokens);

// Hashes of the full blocks of `tokens` (a trailing partial block has none), chained from `root`.
std::vector<BlockHash> HashFullBlocks(std::span<const int32_t> tokens, int64_t block_size,
                                      BlockHash root = kRootBlockHash);

}  // namespace bmad
