// BlockList: an intrusive doubly linked list of block ids, the KV block manager's free lists.
//
// The links live in arrays indexed by block id (the idea of vLLM's free block queue), so pushing
// at the back, popping at the front and removing any member are O(1) and never allocate after
// construction. A block is a member of a list at most once.
//
// Misuse (pushing a member again, removing a non-member, an id out of range) changes nothing and
// is reported by the return value.
//
// Thread-safety: none; owned and used by one KvBlockManager.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "common/status.h"
#include "worker/kv/kv_types.h"

namespace bmad::kv {

class BlockList {
 public:
  // A list that may hold ids in [0, capacity); capacity < 0 counts as 0.
  explicit BlockList(int64_t capacity);

  // Appends `id`. False (no change) when `id` is out of range or already a member.
  bool PushBack(BlockId id);
  // Removes and returns the first member; nullopt when empty.
  std::optional<BlockId> PopFront();
  // Unlinks `id` wherever it is. False (no change) when it is not a member.
  bool Remove(BlockId id);

  bool Contains(BlockId id) const;
  std::optional<BlockId> Front() const;
  int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // The members front to back. O(size): for tests and invariant checks, not the hot path.
  std::vector<BlockId> ToVector() const;

  // Checks that the links agree in both directions, that exactly the members are marked as
  // such and that size() counts them. Status naming the first violation.
  Status CheckInvariants() const;

 private:
  static constexpr BlockId kNone = -1;

  bool InRange(BlockId id) const { return id >= 0 && static_cast<size_t>(id) < member_.size(); }

  std::vector<BlockId> prev_;
  std::vector<BlockId> next_;
  std::vector<uint8_t> member_;  // 1 when the id is linked into this list
  BlockId head_ = kNone;
  BlockId tail_ = kNone;
  int64_t size_ = 0;
};

}  // namespace bmad::kv
