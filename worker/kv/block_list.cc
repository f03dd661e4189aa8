#include "worker/kv/block_list.h"

#include <string>

namespace bmad::kv {

BlockList::BlockList(int64_t capacity)
    : prev_(static_cast<size_t>(capacity > 0 ? capacity : 0), kNone),
      next_(prev_.size(), kNone),
      member_(prev_.size(), 0) {}

bool BlockList::PushBack(BlockId id) {
  if (!InRange(id) || member_[id]) return false;
  prev_[id] = tail_;
  next_[id] = kNone;
  if (tail_ == kNone) {
    head_ = id;
  } else {
    next_[tail_] = id;
  }
  tail_ = id;
  member_[id] = 1;
  ++size_;
  return true;
}

std::optional<BlockId> BlockList::PopFront() {
  if (head_ == kNone) return std::nullopt;
  const BlockId id = head_;
  Remove(id);
  return id;
}

bool BlockList::Remove(BlockId id) {
  if (!Contains(id)) return false;
  const BlockId before = prev_[id];
  const BlockId after = next_[id];
  if (before == kNone) {
    head_ = after;
  } else {
    next_[before] = after;
  }
  if (after == kNone) {
    tail_ = before;
  } else {
    prev_[after] = before;
  }
  prev_[id] = kNone;
  next_[id] = kNone;
  member_[id] = 0;
  --size_;
  return true;
}

bool BlockList::Contains(BlockId id) const { return InRange(id) && member_[id] != 0; }

std::optional<BlockId> BlockList::Front() const {
  if (head_ == kNone) return std::nullopt;
  return head_;
}

std::vector<BlockId> BlockList::ToVector() const {
  std::vector<BlockId> ids;
  ids.reserve(static_cast<size_t>(size_));
  // Bounded by size_, so a corrupted cycle cannot loop forever.
  for (BlockId id = head_; id != kNone && static_cast<int64_t>(ids.size()) < size_;
       id = next_[id]) {
    ids.push_back(id);
  }
  return ids;
}

Status BlockList::CheckInvariants() const {
  int64_t walked = 0;
  BlockId expected_prev = kNone;
  for (BlockId id = head_; id != kNone; id = next_[id]) {
    if (!InRange(id)) return Internal("block list: link to out-of-range id " + std::to_string(id));
    if (!member_[id])
      return Internal("block list: linked id " + std::to_string(id) + " not marked");
    if (prev_[id] != expected_prev) {
      return Internal("block list: back link of " + std::to_string(id) + " is wrong");
    }
    if (++walked > size_) return Internal("block list: more linked ids than size()");
    expected_prev = id;
  }
  if (tail_ != expected_prev) return Internal("block list: tail is not the last linked id");
  if (walked != size_) return Internal("block list: fewer linked ids than size()");
  int64_t marked = 0;
  for (uint8_t m : member_) marked += m;
  if (marked != size_) return Internal("block list: marked ids are not exactly the linked ones");
  return Status::Ok();
}

}  // namespace bmad::kv
