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

BlockHash RootBlockHash(std::string_view cache_salt) {
  if (cache_salt.empty()) return kRootBlockHash;
  // Domain-separated from every block hash (a different start and length mix), byte by byte.
  uint64_t h = Mix(kRootBlockHash ^ 0x5a17c0de5a17c0deull ^ (0x9e3779b97f4a7c15ull * (cache_salt.size() + 1)));
  for (const char c : cache_salt) h = Mix(h ^ static_cast<uint8_t>(c)) + 0xc2b2ae3d27d4eb4full;
  const BlockHash root = Mix(h);
  return root == kRootBlockHash ? root ^ 1 : root;  // never the unsalted root
}

std::vector<BlockHash> HashFullBlocks(std::span<const int32_t> tokens, int64_t block_size, BlockHash root) {
  std::vector<BlockHash> hashes;
  if (block_size <= 0) return hashes;
  BlockHash parent = root;
  for (size_t start = 0; start + static_cast<size_t>(block_size) <= tokens.size();
       start += static_cast<size_t>(block_size)) {
    parent = HashBlock(parent, tokens.subspan(start, static_cast<size_t>(block_size)));
    hashes.push_back(parent);
  }
  return hashes;
}

}  // namespace bmad
