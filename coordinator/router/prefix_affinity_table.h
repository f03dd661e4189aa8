// PrefixAffinityTable: which replica most recently received each KV block hash.
//
// Block hashes are chained (common/block_hash.h): the i-th hash of a prompt names its whole
// prefix of i + 1 blocks, so "the deepest of a request's hashes that is in the table" is "the
// longest prefix of this prompt some replica has been sent", and its owner is the replica most
// likely to still cache it. The table is a guess, not the truth: replicas evict on their own, and
// the worst a stale entry costs is one request that does not hit the cache.
//
// Bounded: at most `capacity` hashes, least recently recorded evicted first. Record walks a
// prompt's hashes deepest first, so the shallow ones (shared by more prompts) are the most
// recent and outlive the deep ones, as in the workers' own KV LRU.
//
// Forget is O(1): each replica has a generation, every entry remembers the generation it was
// written in, and bumping the replica's generation makes all its entries stale at once (they are
// ignored by Owner and evicted in LRU order like any other).
//
// Cost: Record and Owner are O(1) hash-map operations per block hash; no call scans the table.
// Memory: about 60 bytes per entry (1 << 18 entries: about 16 MiB).
//
// Thread-safety: none (the coordinator's event-loop thread owns it through the Router).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/block_hash.h"

namespace bmad::coord {

class PrefixAffinityTable {
 public:
  // `capacity` is clamped to [1, 2^31].
  explicit PrefixAffinityTable(size_t capacity);

  PrefixAffinityTable(const PrefixAffinityTable&) = delete;
  PrefixAffinityTable& operator=(const PrefixAffinityTable&) = delete;

  // `replica_id` was just sent a prompt whose chained block hashes are `hashes`: it now owns each
  // of them (replacing any previous owner), and each becomes recently used.
  void Record(std::span<const BlockHash> hashes, std::string_view replica_id);

  // The replica that most recently received `hash`, unless it was forgotten since; the view is
  // valid until the next non-const call.
  std::optional<std::string_view> Owner(BlockHash hash) const;

  // Of `hashes`, those `replica_id` owns now have no owner (it refused the prompt they were
  // recorded for: it does not cache them, or is too full to be sent more of them). O(1) each.
  void Disown(std::span<const BlockHash> hashes, std::string_view replica_id);

  // Drops every entry of `replica_id` (it died or restarted: its cache is gone). Unknown ids are
  // a no-op.
  void Forget(std::string_view replica_id);
  // Forget, and the id itself: it is gone for good, and its owner slot goes to the next new id.
  // (Without it, one slot per replica id ever recorded: unbounded once ids come and go.)
  void Retire(std::string_view replica_id);

  // Entries held, stale ones included (what the bound applies to).
  size_t size() const { return index_.size(); }
  size_t capacity() const { return capacity_; }
  // Replica ids the table has a slot for (retired ones' slots are reused).
  size_t owner_slots() const { return owners_.size(); }

 private:
  static constexpr uint32_t kNil = UINT32_MAX;

  struct Entry {
    BlockHash hash = 0;
    uint32_t owner = 0;       // index into owners_; kNil: disowned (evicted in LRU order)
    uint32_t generation = 0;  // owners_[owner].generation when written
    uint32_t newer = kNil;    // LRU links (indices into entries_)
    uint32_t older = kNil;
  };
  struct OwnerSlot {
    std::string id;
    uint32_t generation = 0;
  };

  uint32_t OwnerIndex(std::string_view replica_id);
  void Unlink(uint32_t e);
  void PushNewest(uint32_t e);

  size_t capacity_;
  std::vector<Entry> entries_;                    // grows to capacity_, then slots are reused
  std::unordered_map<BlockHash, uint32_t> index_; // hash -> entry
  uint32_t newest_ = kNil;
  uint32_t oldest_ = kNil;
  std::vector<OwnerSlot> owners_;                 // one per replica id recorded, not retired
  std::unordered_map<std::string, uint32_t> owner_index_;
  std::vector<uint32_t> free_owners_;             // retired slots; their generation moved on
};

}  // namespace bmad::coord
