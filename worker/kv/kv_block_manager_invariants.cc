// KvBlockManager::CheckInvariants: the whole-state consistency check that tests run after every
// operation. Kept apart from kv_block_manager.cc because nothing on the hot path uses it.
#include <string>
#include <vector>

#include "worker/kv/kv_block_manager.h"

namespace bmad::kv {
namespace {

Status Violation(const std::string& what) { return Internal("KV block manager: " + what); }

std::string BlockName(BlockId block) { return "block " + std::to_string(block); }

}  // namespace

Status KvBlockManager::CheckInvariants() const {
  std::vector<int32_t> table_refs(static_cast<size_t>(num_blocks_), 0);
  BMAD_RETURN_IF_ERROR(CheckSequences(table_refs));
  return CheckBlocks(table_refs);
}

// Walks every table: ids in range and not null, no id twice in a table, registered blocks only
// within the hashed prefix and agreeing with it. Counts the tables holding each block.
Status KvBlockManager::CheckSequences(std::vector<int32_t>& table_refs) const {
  std::vector<SeqId> last_seen_in(static_cast<size_t>(num_blocks_), 0);
  std::vector<uint8_t> seen(static_cast<size_t>(num_blocks_), 0);
  int64_t table_blocks = 0;
  int64_t held_tokens = 0;
  for (const auto& entry : sequences_) {
    const SeqId seq = entry.first;  // not a structured binding: clang 14 cannot capture those
    const Sequence& sequence = entry.second;
    // Names are built only on a violation: the check runs after every operation in tests.
    auto fail = [seq](const std::string& what) {
      return Violation("sequence " + std::to_string(seq) + ": " + what);
    };
    const size_t hashed = sequence.hashes.size();
    if (sequence.prefix_ids.size() != hashed) return fail("hashes/prefix ids differ");
    if (hashed > sequence.table.size()) return fail("more hashes than blocks");
    if (!prefix_caching_ && hashed != 0) return fail("hashed with caching off");
    for (size_t i = 0; i < sequence.table.size(); ++i) {
      const BlockId block = sequence.table[i];
      if (block == kNullBlockId) return fail("the null block is in its table");
      if (block < 0 || block >= num_blocks_) return fail(BlockName(block) + " out of range");
      // `seen` + `last_seen_in` detect a repeat within this table without clearing per table.
      if (seen[block] && last_seen_in[block] == seq) {
        return fail(BlockName(block) + " twice in its table");
      }
      seen[block] = 1;
      last_seen_in[block] = seq;
      ++table_refs[block];
      const BlockState& state = blocks_[block];
      if (state.prefix_id == 0) continue;
      // A registered block reaches a table only as a hit, which records its hash and prefix.
      if (i >= hashed) return fail("registered " + BlockName(block) + " unhashed");
      if (state.hash != sequence.hashes[i] || state.prefix_id != sequence.prefix_ids[i]) {
        return fail(BlockName(block) + " disagrees with the table's prefix");
      }
    }
    const int64_t reserved = static_cast<int64_t>(sequence.table.size()) * block_size_;
    if (sequence.held_tokens < 0 || sequence.held_tokens > reserved) {
      return fail("held tokens outside [0, reserved]");
    }
    table_blocks += static_cast<int64_t>(sequence.table.size());
    held_tokens += sequence.held_tokens;
  }
  if (table_blocks != table_blocks_) return Violation("table block total is stale");
  if (held_tokens != held_tokens_) return Violation("held token total is stale");
  return Status::Ok();
}

// Checks each block against the table counts, the free lists and the hash map.
Status KvBlockManager::CheckBlocks(const std::vector<int32_t>& table_refs) const {
  BMAD_RETURN_IF_ERROR(uncached_free_.CheckInvariants().WithContext("uncached free list"));
  BMAD_RETURN_IF_ERROR(cached_free_.CheckInvariants().WithContext("cached free list"));
  const BlockState& null_block = blocks_[kNullBlockId];
  if (null_block.ref_count != 0 || null_block.prefix_id != 0 ||
      uncached_free_.Contains(kNullBlockId) || cached_free_.Contains(kNullBlockId)) {
    return Violation("the null block is in use, cached or free");
  }
  int64_t used_blocks = 0;
  size_t registered = 0;
  for (BlockId block = 1; block < num_blocks_; ++block) {
    const BlockState& state = blocks_[block];
    auto fail = [block](const std::string& what) {
      return Violation(BlockName(block) + ": " + what);
    };
    if (state.ref_count != table_refs[block]) {
      return fail("ref count " + std::to_string(state.ref_count) + " but in " +
                  std::to_string(table_refs[block]) + " tables");
    }
    const bool in_uncached = uncached_free_.Contains(block);
    const bool in_cached = cached_free_.Contains(block);
    const bool is_registered = state.prefix_id != 0;
    if (state.ref_count > 0) {
      ++used_blocks;
      if (in_uncached || in_cached) return fail("referenced but on a free list");
      // Only full computed blocks, hence registered ones, may be shared.
      if (state.ref_count > 1 && !is_registered) return fail("shared, unregistered");
    } else if (in_uncached == in_cached) {
      return fail(std::string("unreferenced but on ") + (in_cached ? "both" : "no") +
                  " free lists");
    } else if (in_cached != is_registered) {
      return fail(
          (in_cached ? "unregistered on the cached list" : "registered on the uncached list"));
    }
    if (!is_registered) {
      if (state.parent_prefix_id != 0 || state.hash != 0) {
        return fail("stale registration fields");
      }
      continue;
    }
    ++registered;
    if (!prefix_caching_) return fail("registered with caching off");
    if (state.prefix_id >= next_prefix_id_ || state.parent_prefix_id >= state.prefix_id) {
      return fail("prefix ids out of order");
    }
    auto it = cache_.find(state.hash);
    if (it == cache_.end() || it->second != block) {
      return fail("registered but not the hash map's entry for its hash");
    }
  }
  // Every entry was matched to its own block above, so equal sizes mean no stray entries.
  if (registered != cache_.size()) return Violation("hash map holds unregistered blocks");
  if (used_blocks != used_blocks_) return Violation("used block total is stale");
  if (used_blocks + NumFreeBlocks() != NumUsableBlocks()) {
    return Violation("used + free blocks != usable blocks");
  }
  return Status::Ok();
}

}  // namespace bmad::kv
