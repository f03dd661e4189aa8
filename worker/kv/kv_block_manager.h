// KvBlockManager: the metadata of one replica's paged KV cache, with prefix reuse.
//
// The cache is split into `num_blocks` blocks of `block_size` token slots. A block id indexes the
// memory pool that holds the KV bytes; this class holds only ids, reference counts, hashes and
// free lists (TensorRT-LLM's metadata-only KVCacheBlock, vLLM's BlockPool). Each sequence owns a
// block table: table[i] holds the KV of its tokens [i * block_size, (i + 1) * block_size).
//
// Prefix reuse. When a sequence has computed a full block, MarkComputed registers it under its
// chained hash (common/block_hash.h, the same values the coordinator computes for routing). A
// later sequence whose prompt starts with the same tokens takes references on those blocks
// instead of recomputing them. A hash match alone is never trusted: each registered block also
// keeps its tokens and the identity of the exact prefix before it (a `prefix id`, unique per
// registration and never reused), so a hash collision, even one between chains, can only cost a
// cache miss, never wrong KV.
//
// Sharing is safe because only full, computed blocks are ever registered, and only registered
// blocks are ever shared: a sequence's partially filled last block is private, so two sequences
// never write the same slot.
//
// Free blocks. An unreferenced block is either uncached (no hash; handed out first, in the order
// freed, initially by ascending id) or cached (still registered, reusable by a hit). Cached free
// blocks are evicted least recently freed first, and only when no uncached free block is left;
// eviction drops the hash entry.
//
// Cost: every call is O(blocks it touches) (hashing is O(tokens of those blocks)); nothing scans
// all blocks except CheckInvariants. Memory: about 50 bytes per block, plus block_size * 4 bytes
// per block for the registered tokens when prefix caching is on, allocated up front; the hash
// map's nodes and the block tables allocate as they grow.
//
// Thread-safety: none. One scheduler thread of one replica owns the manager.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "common/block_hash.h"
#include "common/status.h"
#include "worker/kv/block_list.h"
#include "worker/kv/kv_types.h"

namespace bmad::kv {

// The block hash function. Production uses bmad::HashBlock, which the coordinator shares; tests
// pass weak functions to force collisions.
using BlockHashFn = BlockHash (*)(BlockHash parent, std::span<const int32_t> tokens);

struct KvBlockManagerOptions {
  // Blocks in the pool, including the null block 0. REQUIRES: 2 <= num_blocks <= INT32_MAX.
  int64_t num_blocks = 0;
  // Token slots per block. REQUIRES: 1 <= block_size <= INT32_MAX.
  int64_t block_size = 16;
  // Off: nothing is registered or reused; every freed block is uncached.
  bool prefix_caching = true;
  // Test seam only (see BlockHashFn); null means HashBlock.
  BlockHashFn hash_block = &HashBlock;
};

// OK, or kInvalidArgument naming the field out of its REQUIRES range.
Status ValidateKvBlockManagerOptions(const KvBlockManagerOptions& options);

class KvBlockManager {
 public:
  // Options that fail ValidateKvBlockManagerOptions are clamped into range (never undefined
  // behaviour); callers building from config should validate first.
  explicit KvBlockManager(const KvBlockManagerOptions& options);

  KvBlockManager(const KvBlockManager&) = delete;
  KvBlockManager& operator=(const KvBlockManager&) = delete;

  // Starts a sequence whose tokens so far are `tokens`. Finds the longest run of leading full
  // blocks already cached (hash, tokens and prefix all equal), takes a reference on each and
  // starts the block table with them. Returns the number of tokens whose KV is reused, a
  // multiple of block_size, always < tokens.size() (the model must compute at least the last
  // token to get its logits), 0 for empty tokens.
  // With prefix caching on and `query` kCount, records a prefix query of tokens.size() tokens
  // and a hit of the reused ones (with it off, records nothing: there is no cache to hit). A
  // preempted sequence starting again passes kRecompute: its prompt was counted once already,
  // and its generated tokens are no prompt (vLLM counts recomputes apart too).
  // `root` is the parent hash of its first block (RootBlockHash of its cache_salt): it finds,
  // and later registers, only blocks of chains from the same root.
  // Errors: kFailedPrecondition when `seq` is already started (nothing changes).
  enum class PrefixQuery { kCount, kRecompute };
  Result<int64_t> StartSequence(SeqId seq, std::span<const int32_t> tokens,
                                PrefixQuery query = PrefixQuery::kCount, BlockHash root = kRootBlockHash);

  // Grows the table of `seq` so it covers `num_tokens` token slots (a table never shrinks),
  // taking uncached free blocks first, then evicting cached free blocks in LRU order. Returns
  // false and changes nothing when not enough free blocks exist or `seq` is unknown.
  bool Reserve(SeqId seq, int64_t num_tokens);

  // How many more blocks Reserve(seq, num_tokens) would take (0 if already covered); for an
  // unknown `seq`, the blocks a new sequence would need for `num_tokens` slots.
  int64_t BlocksNeeded(SeqId seq, int64_t num_tokens) const;
  // Whether Reserve(seq, num_tokens) would succeed now (false for an unknown `seq`).
  bool CanReserve(SeqId seq, int64_t num_tokens) const;

  // The model has computed tokens [0, num_computed) of `seq`; `tokens` is its token list so far
  // (num_computed is clamped to tokens.size() and to the table). Every block that is now full is
  // registered for reuse, unless its prefix is already registered in another block (that one is
  // kept, this one stays private) or another block holds the same hash (a collision: the
  // existing one is kept). No-op with prefix caching off or for an unknown `seq`. The tokens of
  // blocks already processed must not change between calls (they are not read again).
  void MarkComputed(SeqId seq, std::span<const int32_t> tokens, int64_t num_computed);

  // Releases `seq`: each block loses a reference, from its last block to its first, so that
  // under LRU the head of a prefix outlives its tail. A block left unreferenced becomes free,
  // cached (still reusable) if registered. Returns false, changing nothing, for an unknown `seq`.
  bool Free(SeqId seq);
  // Free, and the prefix query its StartSequence recorded is taken back: for an admission that
  // did not go through (no blocks for its first chunk), so that a sequence waiting for blocks
  // is not counted as queried again at every attempt.
  bool CancelStart(SeqId seq);

  // The table of `seq`, valid until the next non-const call; empty for an unknown `seq`.
  std::span<const BlockId> BlockTable(SeqId seq) const;
  // Token slots the table covers (table size * block_size); 0 for an unknown `seq`.
  int64_t tokens_reserved(SeqId seq) const;

  // Tells the manager how many tokens `seq` holds now, clamped to [0, tokens_reserved(seq)]
  // (so call it after Reserve); feeds Stats::held_tokens. StartSequence sets it to the reused
  // tokens. No-op for an unknown `seq`.
  void SetHeldTokens(SeqId seq, int64_t tokens);

  // Free blocks, cached or not: what Reserve can take right now.
  int64_t NumFreeBlocks() const { return uncached_free_.size() + cached_free_.size(); }
  // Blocks that can ever be handed out: num_blocks - 1.
  int64_t NumUsableBlocks() const { return num_blocks_ - 1; }
  int64_t block_size() const { return block_size_; }
  bool prefix_caching() const { return prefix_caching_; }
  // References on `block` (the number of tables holding it); 0 for ids out of range.
  int32_t RefCount(BlockId block) const;
  // Whether `block` is registered in the prefix cache.
  bool IsCached(BlockId block) const;

  struct Stats {
    int64_t used_blocks = 0;           // referenced by at least one sequence
    int64_t free_blocks = 0;           // not referenced (cached + uncached)
    int64_t cached_free_blocks = 0;    // free but still holding a reusable prefix
    double usage = 0.0;                // used_blocks / usable blocks, 0..1
    uint64_t prefix_query_tokens = 0;  // cumulative, see StartSequence
    uint64_t prefix_hit_tokens = 0;    // cumulative
    uint64_t evictions = 0;            // cumulative cached blocks evicted
    int64_t allocated_slots = 0;       // sum over sequences of table size * block_size
    int64_t held_tokens = 0;           // sum over sequences of SetHeldTokens values
    int64_t sequences = 0;
  };
  // O(1). Internal waste is allocated_slots - held_tokens.
  Stats GetStats() const;

  // Test support, O(all blocks + all tables): checks every invariant (reference counts equal
  // the number of tables holding each block; the free lists hold exactly the unreferenced
  // blocks, cached ones exactly the registered ones; hash entries point at blocks registered
  // under that hash; shared blocks are registered; block 0 is never used; no block twice in one
  // table; the running totals behind GetStats). kInternal naming the first violation.
  Status CheckInvariants() const;

 private:
  struct BlockState {
    int32_t ref_count = 0;
    // Nonzero while registered in the prefix cache: a number unique to this registration that
    // stands for the exact token prefix ending with this block.
    uint64_t prefix_id = 0;
    uint64_t parent_prefix_id = 0;  // the prefix before this block; 0 for a first block
    BlockHash hash = 0;             // the chained hash it is registered under
  };

  struct Sequence {
    std::vector<BlockId> table;
    // For each leading full block reused or registered so far: its chained hash and the id of
    // its prefix (its own block's prefix_id, or that of the identical block already registered,
    // or a fresh id when a collision kept it out of the cache). Never longer than `table`.
    std::vector<BlockHash> hashes;
    std::vector<uint64_t> prefix_ids;
    BlockHash root = kRootBlockHash;  // its first block's parent hash (StartSequence)
    int64_t held_tokens = 0;
    uint64_t queried_tokens = 0;  // the prefix query StartSequence recorded (CancelStart)
    uint64_t hit_tokens = 0;
  };

  int64_t BlocksFor(int64_t num_tokens) const;
  int64_t BlocksNeededFor(const Sequence& sequence, int64_t num_tokens) const;
  std::span<const int32_t> BlockTokens(std::span<const int32_t> tokens, int64_t index) const;
  std::span<const int32_t> RegisteredTokens(BlockId block) const;
  // The block registered under `hash` if it holds exactly `tokens` after prefix `parent_prefix_id`.
  std::optional<BlockId> FindCached(BlockHash hash, uint64_t parent_prefix_id,
                                    std::span<const int32_t> tokens) const;
  // Whether `registered` (cached under the caller's hash, with another parent than the
  // caller's; the two parents' hash is `parent_hash`) holds `tokens`, is free, and its parent is
  // registered no more: a block no chain can reach, which gives way.
  bool IsOrphan(BlockId registered, BlockHash parent_hash, std::span<const int32_t> tokens) const;
  void Register(BlockId block, BlockHash hash, uint64_t parent_prefix_id,
                std::span<const int32_t> tokens);
  void Evict(BlockId block);
  void AddReference(BlockId block);
  void DropReference(BlockId block);
  // REQUIRES: NumFreeBlocks() > 0.
  BlockId TakeFreeBlock();
  Status CheckSequences(std::vector<int32_t>& table_refs) const;
  Status CheckBlocks(const std::vector<int32_t>& table_refs) const;

  const int64_t num_blocks_;
  const int64_t block_size_;
  const bool prefix_caching_;
  const BlockHashFn hash_block_;

  std::vector<BlockState> blocks_;     // indexed by BlockId
  std::vector<int32_t> block_tokens_;  // block_size_ tokens per registered block
  BlockList uncached_free_;            // unreferenced, unregistered: handed out first
  BlockList cached_free_;              // unreferenced, registered: LRU order, front evicted first
  std::unordered_map<BlockHash, BlockId> cache_;  // one block per hash
  std::unordered_map<SeqId, Sequence> sequences_;
  uint64_t next_prefix_id_ = 1;

  // Running totals, so GetStats is O(1).
  int64_t used_blocks_ = 0;
  int64_t table_blocks_ = 0;
  int64_t held_tokens_ = 0;
  uint64_t prefix_query_tokens_ = 0;
  uint64_t prefix_hit_tokens_ = 0;
  uint64_t evictions_ = 0;
};

}  // namespace bmad::kv
