#include "coordinator/router/prefix_affinity_table.h"

#include <algorithm>

namespace bmad::coord {

PrefixAffinityTable::PrefixAffinityTable(size_t capacity)
    : capacity_(std::clamp<size_t>(capacity, 1, size_t{1} << 31)) {}

uint32_t PrefixAffinityTable::OwnerIndex(std::string_view replica_id) {
  const auto found = owner_index_.find(std::string(replica_id));
  if (found != owner_index_.end()) return found->second;
  uint32_t slot;
  if (!free_owners_.empty()) {
    // A retired id's slot: its generation was bumped when retired, so the entries it left
    // stay stale under the new id.
    slot = free_owners_.back();
    free_owners_.pop_back();
    owners_[slot].id = std::string(replica_id);
  } else {
    slot = static_cast<uint32_t>(owners_.size());
    owners_.push_back(OwnerSlot{std::string(replica_id), 0});
  }
  owner_index_.emplace(std::string(replica_id), slot);
  return slot;
}

void PrefixAffinityTable::Unlink(uint32_t e) {
  Entry& entry = entries_[e];
  if (entry.newer != kNil) {
    entries_[entry.newer].older = entry.older;
  } else {
    newest_ = entry.older;
  }
  if (entry.older != kNil) {
    entries_[entry.older].newer = entry.newer;
  } else {
    oldest_ = entry.newer;
  }
  entry.newer = entry.older = kNil;
}

void PrefixAffinityTable::PushNewest(uint32_t e) {
  Entry& entry = entries_[e];
  entry.newer = kNil;
  entry.older = newest_;
  if (newest_ != kNil) entries_[newest_].newer = e;
  newest_ = e;
  if (oldest_ == kNil) oldest_ = e;
}

void PrefixAffinityTable::Record(std::span<const BlockHash> hashes, std::string_view replica_id) {
  if (hashes.empty()) return;
  const uint32_t owner = OwnerIndex(replica_id);
  const uint32_t generation = owners_[owner].generation;
  for (auto it = hashes.rbegin(); it != hashes.rend(); ++it) {
    const BlockHash hash = *it;
    uint32_t e;
    if (auto found = index_.find(hash); found != index_.end()) {
      e = found->second;
      Unlink(e);
    } else if (entries_.size() < capacity_) {
      e = static_cast<uint32_t>(entries_.size());
      entries_.emplace_back();
      index_.emplace(hash, e);
    } else {
      e = oldest_;  // full: reuse the least recently recorded entry's slot
      Unlink(e);
      index_.erase(entries_[e].hash);
      index_.emplace(hash, e);
    }
    Entry& entry = entries_[e];
    entry.hash = hash;
    entry.owner = owner;
    entry.generation = generation;
    PushNewest(e);
  }
}

std::optional<std::string_view> PrefixAffinityTable::Owner(BlockHash hash) const {
  const auto found = index_.find(hash);
  if (found == index_.end()) return std::nullopt;
  const Entry& entry = entries_[found->second];
  if (entry.owner == kNil) return std::nullopt;  // disowned
  const OwnerSlot& owner = owners_[entry.owner];
  if (entry.generation != owner.generation) return std::nullopt;  // forgotten since
  return std::string_view(owner.id);
}

void PrefixAffinityTable::Disown(std::span<const BlockHash> hashes, std::string_view replica_id) {
  const auto slot = owner_index_.find(std::string(replica_id));
  if (slot == owner_index_.end()) return;
  for (const BlockHash hash : hashes) {
    const auto found = index_.find(hash);
    if (found == index_.end()) continue;
    Entry& entry = entries_[found->second];
    if (entry.owner == slot->second && entry.generation == owners_[slot->second].generation) entry.owner = kNil;
  }
}

void PrefixAffinityTable::Forget(std::string_view replica_id) {
  const auto found = owner_index_.find(std::string(replica_id));
  if (found != owner_index_.end()) ++owners_[found->second].generation;
}

void PrefixAffinityTable::Retire(std::string_view replica_id) {
  const auto found = owner_index_.find(std::string(replica_id));
  if (found == owner_index_.end()) return;
  ++owners_[found->second].generation;
  free_owners_.push_back(found->second);
  owner_index_.erase(found);
}

}  // namespace bmad::coord
