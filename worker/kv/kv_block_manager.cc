#include "worker/kv/kv_block_manager.h"

#include <algorithm>
#include <limits>
#include <string>

namespace bmad::kv {
namespace {

constexpr int64_t kMaxNumBlocks = std::numeric_limits<BlockId>::max();
constexpr int64_t kMaxBlockSize = std::numeric_limits<int32_t>::max();

}  // namespace

Status ValidateKvBlockManagerOptions(const KvBlockManagerOptions& options) {
  if (options.num_blocks < 2 || options.num_blocks > kMaxNumBlocks) {
    return InvalidArgument("num_blocks must be in [2, " + std::to_string(kMaxNumBlocks) +
                           "] (block 0 is reserved), got " + std::to_string(options.num_blocks));
  }
  if (options.block_size < 1 || options.block_size > kMaxBlockSize) {
    return InvalidArgument("block_size must be in [1, " + std::to_string(kMaxBlockSize) +
                           "], got " + std::to_string(options.block_size));
  }
  return Status::Ok();
}

KvBlockManager::KvBlockManager(const KvBlockManagerOptions& options)
    : num_blocks_(std::clamp<int64_t>(options.num_blocks, 2, kMaxNumBlocks)),
      block_size_(std::clamp<int64_t>(options.block_size, 1, kMaxBlockSize)),
      prefix_caching_(options.prefix_caching),
      hash_block_(options.hash_block != nullptr ? options.hash_block : &HashBlock),
      blocks_(static_cast<size_t>(num_blocks_)),
      uncached_free_(num_blocks_),
      cached_free_(num_blocks_) {
  if (prefix_caching_) {
    block_tokens_.resize(static_cast<size_t>(num_blocks_ * block_size_));
    cache_.reserve(static_cast<size_t>(num_blocks_));
  }
  for (BlockId block = 1; block < num_blocks_; ++block) uncached_free_.PushBack(block);
}

Result<int64_t> KvBlockManager::StartSequence(SeqId seq, std::span<const int32_t> tokens, PrefixQuery query,
                                              BlockHash root) {
  auto [it, inserted] = sequences_.try_emplace(seq);
  if (!inserted) {
    return FailedPrecondition("KV block manager: sequence " + std::to_string(seq) +
                              " is already started");
  }
  Sequence& sequence = it->second;
  sequence.root = root;
  if (prefix_caching_) {
    // Stop one token short of the end: the last token's logits must come from the model, so at
    // least it is computed, and a prompt of exactly n full blocks reuses at most n - 1.
    const int64_t num_tokens = static_cast<int64_t>(tokens.size());
    const int64_t max_blocks = num_tokens == 0 ? 0 : (num_tokens - 1) / block_size_;
    BlockHash parent_hash = root;
    uint64_t parent_prefix_id = 0;
    for (int64_t i = 0; i < max_blocks; ++i) {
      const std::span<const int32_t> block_tokens = BlockTokens(tokens, i);
      const BlockHash hash = hash_block_(parent_hash, block_tokens);
      const std::optional<BlockId> hit = FindCached(hash, parent_prefix_id, block_tokens);
      if (!hit) break;
      sequence.table.push_back(*hit);
      sequence.hashes.push_back(hash);
      sequence.prefix_ids.push_back(blocks_[*hit].prefix_id);
      parent_hash = hash;
      parent_prefix_id = blocks_[*hit].prefix_id;
    }
    // A chain never repeats a block (prefix ids grow along it), so each reference is distinct.
    for (BlockId block : sequence.table) AddReference(block);
  }
  const int64_t reused_tokens = static_cast<int64_t>(sequence.table.size()) * block_size_;
  if (prefix_caching_ && query == PrefixQuery::kCount) {
    sequence.queried_tokens = tokens.size();
    sequence.hit_tokens = static_cast<uint64_t>(reused_tokens);
    prefix_query_tokens_ += sequence.queried_tokens;
    prefix_hit_tokens_ += sequence.hit_tokens;
  }
  table_blocks_ += static_cast<int64_t>(sequence.table.size());
  sequence.held_tokens = reused_tokens;
  held_tokens_ += reused_tokens;
  return reused_tokens;
}

bool KvBlockManager::Reserve(SeqId seq, int64_t num_tokens) {
  auto it = sequences_.find(seq);
  if (it == sequences_.end()) return false;
  Sequence& sequence = it->second;
  const int64_t needed = BlocksNeededFor(sequence, num_tokens);
  if (needed > NumFreeBlocks()) return false;
  for (int64_t i = 0; i < needed; ++i) sequence.table.push_back(TakeFreeBlock());
  table_blocks_ += needed;
  return true;
}

int64_t KvBlockManager::BlocksNeeded(SeqId seq, int64_t num_tokens) const {
  auto it = sequences_.find(seq);
  if (it == sequences_.end()) return BlocksFor(num_tokens);
  return BlocksNeededFor(it->second, num_tokens);
}

bool KvBlockManager::CanReserve(SeqId seq, int64_t num_tokens) const {
  auto it = sequences_.find(seq);
  return it != sequences_.end() && BlocksNeededFor(it->second, num_tokens) <= NumFreeBlocks();
}

void KvBlockManager::MarkComputed(SeqId seq, std::span<const int32_t> tokens,
                                  int64_t num_computed) {
  if (!prefix_caching_) return;
  auto it = sequences_.find(seq);
  if (it == sequences_.end()) return;
  Sequence& sequence = it->second;
  const int64_t computed =
      std::clamp<int64_t>(num_computed, 0, static_cast<int64_t>(tokens.size()));
  const int64_t full_blocks =
      std::min<int64_t>(computed / block_size_, static_cast<int64_t>(sequence.table.size()));
  for (int64_t i = static_cast<int64_t>(sequence.hashes.size()); i < full_blocks; ++i) {
    const BlockHash parent_hash = i == 0 ? sequence.root : sequence.hashes[i - 1];
    const uint64_t parent_prefix_id = i == 0 ? 0 : sequence.prefix_ids[i - 1];
    const std::span<const int32_t> block_tokens = BlockTokens(tokens, i);
    const BlockHash hash = hash_block_(parent_hash, block_tokens);
    const BlockId block = sequence.table[i];
    uint64_t prefix_id;
    if (blocks_[block].prefix_id != 0) {
      // Unreachable by construction (registered blocks enter tables only through a hit, which
      // StartSequence already recorded); kept so a misuse cannot register a block twice.
      prefix_id = blocks_[block].prefix_id;
    } else if (auto existing = cache_.find(hash); existing == cache_.end()) {
      Register(block, hash, parent_prefix_id, block_tokens);
      prefix_id = blocks_[block].prefix_id;
    } else if (FindCached(hash, parent_prefix_id, block_tokens)) {
      // Another sequence computed the same prefix first (both started before either finished
      // it). Ours stays private; later blocks chain onto the registered one so they can be hit.
      // Should that one be evicted while we run, our later blocks chain onto a dead prefix id
      // and are never hit: a lost reuse, never a wrong one.
      prefix_id = blocks_[existing->second].prefix_id;
    } else if (IsOrphan(existing->second, parent_hash, block_tokens)) {
      // The same tokens, registered under a parent no chain reaches any more (evicted), and
      // free: nothing can hit it. Ours takes its place, or the orphan would keep this prefix
      // from being cached until memory pressure evicted it.
      const BlockId orphan = existing->second;
      cached_free_.Remove(orphan);
      Evict(orphan);
      uncached_free_.PushBack(orphan);
      Register(block, hash, parent_prefix_id, block_tokens);
      prefix_id = blocks_[block].prefix_id;
    } else {
      // A true collision: another prefix owns this hash and keeps it. Our block gets an identity
      // of its own that no registered block will ever match, so nothing chains onto wrong data.
      prefix_id = next_prefix_id_++;
    }
    sequence.hashes.push_back(hash);
    sequence.prefix_ids.push_back(prefix_id);
  }
}

bool KvBlockManager::Free(SeqId seq) {
  auto it = sequences_.find(seq);
  if (it == sequences_.end()) return false;
  const Sequence& sequence = it->second;
  // Last block first: it lands nearer the front of the LRU list, so eviction eats a cached
  // prefix from its tail and the part left stays a usable (shorter) prefix.
  for (auto block = sequence.table.rbegin(); block != sequence.table.rend(); ++block) {
    DropReference(*block);
  }
  table_blocks_ -= static_cast<int64_t>(sequence.table.size());
  held_tokens_ -= sequence.held_tokens;
  sequences_.erase(it);
  return true;
}

bool KvBlockManager::CancelStart(SeqId seq) {
  auto it = sequences_.find(seq);
  if (it == sequences_.end()) return false;
  prefix_query_tokens_ -= it->second.queried_tokens;
  prefix_hit_tokens_ -= it->second.hit_tokens;
  return Free(seq);
}

std::span<const BlockId> KvBlockManager::BlockTable(SeqId seq) const {
  auto it = sequences_.find(seq);
  if (it == sequences_.end()) return {};
  return it->second.table;
}

int64_t KvBlockManager::tokens_reserved(SeqId seq) const {
  auto it = sequences_.find(seq);
  if (it == sequences_.end()) return 0;
  return static_cast<int64_t>(it->second.table.size()) * block_size_;
}

void KvBlockManager::SetHeldTokens(SeqId seq, int64_t tokens) {
  auto it = sequences_.find(seq);
  if (it == sequences_.end()) return;
  Sequence& sequence = it->second;
  const int64_t reserved = static_cast<int64_t>(sequence.table.size()) * block_size_;
  const int64_t held = std::clamp<int64_t>(tokens, 0, reserved);
  held_tokens_ += held - sequence.held_tokens;
  sequence.held_tokens = held;
}

int32_t KvBlockManager::RefCount(BlockId block) const {
  if (block < 0 || block >= num_blocks_) return 0;
  return blocks_[block].ref_count;
}

bool KvBlockManager::IsCached(BlockId block) const {
  return block >= 0 && block < num_blocks_ && blocks_[block].prefix_id != 0;
}

KvBlockManager::Stats KvBlockManager::GetStats() const {
  Stats stats;
  stats.used_blocks = used_blocks_;
  stats.free_blocks = NumFreeBlocks();
  stats.cached_free_blocks = cached_free_.size();
  stats.usage = static_cast<double>(used_blocks_) / static_cast<double>(NumUsableBlocks());
  stats.prefix_query_tokens = prefix_query_tokens_;
  stats.prefix_hit_tokens = prefix_hit_tokens_;
  stats.evictions = evictions_;
  stats.allocated_slots = table_blocks_ * block_size_;
  stats.held_tokens = held_tokens_;
  stats.sequences = static_cast<int64_t>(sequences_.size());
  return stats;
}

int64_t KvBlockManager::BlocksFor(int64_t num_tokens) const {
  if (num_tokens <= 0) return 0;
  return num_tokens / block_size_ + (num_tokens % block_size_ != 0 ? 1 : 0);
}

int64_t KvBlockManager::BlocksNeededFor(const Sequence& sequence, int64_t num_tokens) const {
  return std::max<int64_t>(0, BlocksFor(num_tokens) - static_cast<int64_t>(sequence.table.size()));
}

std::span<const int32_t> KvBlockManager::BlockTokens(std::span<const int32_t> tokens,
                                                     int64_t index) const {
  return tokens.subspan(static_cast<size_t>(index * block_size_), static_cast<size_t>(block_size_));
}

std::span<const int32_t> KvBlockManager::RegisteredTokens(BlockId block) const {
  return std::span<const int32_t>(block_tokens_)
      .subspan(static_cast<size_t>(block) * static_cast<size_t>(block_size_),
               static_cast<size_t>(block_size_));
}

std::optional<BlockId> KvBlockManager::FindCached(BlockHash hash, uint64_t parent_prefix_id,
                                                  std::span<const int32_t> tokens) const {
  auto it = cache_.find(hash);
  if (it == cache_.end()) return std::nullopt;
  const BlockId block = it->second;
  // The prefix id check makes the whole chain exact: by induction the parent matched exactly, and
  // a prefix id is never reused, so a child registered under an evicted parent can never match.
  if (blocks_[block].parent_prefix_id != parent_prefix_id) return std::nullopt;
  const std::span<const int32_t> registered = RegisteredTokens(block);
  if (!std::equal(registered.begin(), registered.end(), tokens.begin(), tokens.end())) {
    return std::nullopt;
  }
  return block;
}

bool KvBlockManager::IsOrphan(BlockId registered, BlockHash parent_hash, std::span<const int32_t> tokens) const {
  // Called for a hash whose registered block has another parent than the caller's. With the
  // same tokens as well, the two parents' chains hash alike, so they hold the same tokens. The
  // registered block is reachable while its parent is the block registered for that chain; the
  // caller's parent need not be (a private copy chained to a registered twin that was evicted
  // since), so that is what decides. (A collision of the chained 64-bit hash would make this a
  // swap of which chain is cached: still never a wrong reuse, since hits check the parent.)
  const BlockState& state = blocks_[registered];
  if (state.ref_count != 0) return false;  // a running sequence holds it
  if (state.parent_prefix_id == 0) return false;  // a first block: the root never goes
  if (auto parent = cache_.find(parent_hash);
      parent != cache_.end() && blocks_[parent->second].prefix_id == state.parent_prefix_id) {
    return false;
  }
  const std::span<const int32_t> held = RegisteredTokens(registered);
  return std::equal(held.begin(), held.end(), tokens.begin(), tokens.end());
}

void KvBlockManager::Register(BlockId block, BlockHash hash, uint64_t parent_prefix_id,
                              std::span<const int32_t> tokens) {
  BlockState& state = blocks_[block];
  state.prefix_id = next_prefix_id_++;
  state.parent_prefix_id = parent_prefix_id;
  state.hash = hash;
  std::copy(tokens.begin(), tokens.end(),
            block_tokens_.begin() + static_cast<int64_t>(block) * block_size_);
  cache_.emplace(hash, block);
}

void KvBlockManager::Evict(BlockId block) {
  BlockState& state = blocks_[block];
  auto it = cache_.find(state.hash);
  if (it != cache_.end() && it->second == block) cache_.erase(it);
  state.prefix_id = 0;
  state.parent_prefix_id = 0;
  state.hash = 0;
  ++evictions_;
}

void KvBlockManager::AddReference(BlockId block) {
  BlockState& state = blocks_[block];
  if (state.ref_count == 0) {
    // A hit on a free cached block takes it off the free list (so it cannot be evicted).
    cached_free_.Remove(block);
    uncached_free_.Remove(block);
    ++used_blocks_;
  }
  ++state.ref_count;
}

void KvBlockManager::DropReference(BlockId block) {
  BlockState& state = blocks_[block];
  if (state.ref_count <= 0) return;  // cannot happen while the invariants hold
  if (--state.ref_count > 0) return;
  --used_blocks_;
  if (state.prefix_id != 0) {
    cached_free_.PushBack(block);
  } else {
    uncached_free_.PushBack(block);
  }
}

BlockId KvBlockManager::TakeFreeBlock() {
  std::optional<BlockId> block = uncached_free_.PopFront();
  if (!block) {
    block = cached_free_.PopFront();
    Evict(*block);
  }
  blocks_[*block].ref_count = 1;
  ++used_blocks_;
  return *block;
}

}  // namespace bmad::kv
