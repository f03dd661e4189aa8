#include "common/block_hash.h"

namespace bmad {
namespace {

// SplitMix64's finalizer: a bijective mix with full avalanche.
inline uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

}  // namespace

BlockHash HashBlock(BlockHash parent, std::span<const int32_t> tokens) {
  uint64_t h = Mix(parent ^ (0x9e3779b97f4a7c15ull * (tokens.size() + 1)));
  for (int32_t t : tokens) h = Mix(h ^ static_cast<uint32_t>(t)) + 0x9e3779b97f4a7c15ull;
  return Mix(h);
}

std::vector<BlockHash> HashFullBlocks(std::span<const int32_t> tokens, int64_t block_size) {
  std::vector<BlockHash> hashes;
  if (block_size <= 0) return hashes;
  BlockHash parent = kRootBlockHash;
  for (size_t start = 0; start + static_cast<size_t>(block_size) <= tokens.size();
       start += static_cast<size_t>(block_size)) {
    parent = HashBlock(parent, tokens.subspan(start, static_cast<size_t>(block_size)));
    hashes.push_back(parent);
  }
  return hashes;
}

}  // namespace bmad
