#include "coordinator/router/replica_registry.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

namespace bmad::coord {
namespace {

// A fraction a replica reports: clamped to [0, 1]; NaN or infinity is taken as 1, so a replica
// that reports garbage looks busy rather than idle.
float SanitizedFraction(float value) {
  if (!std::isfinite(value)) return 1.0f;
  return std::clamp(value, 0.0f, 1.0f);
}

proto::LoadStats Sanitized(proto::LoadStats load) {
  load.kv_usage = SanitizedFraction(load.kv_usage);
  load.utilization = SanitizedFraction(load.utilization);
  return load;
}

Status ValidateRegistration(const proto::ReplicaInfo& info, const std::string& routing_id) {
  const auto bad = [&](std::string what) {
    return InvalidArgument("replica '" + info.replica_id.substr(0, 64) + "' cannot register: " +
                           std::move(what));
  };
  if (info.replica_id.empty()) return bad("empty replica id");
  if (info.replica_id.size() > ReplicaRegistry::kMaxReplicaIdBytes) {
    return bad("replica id longer than " + std::to_string(ReplicaRegistry::kMaxReplicaIdBytes) +
               " bytes");
  }
  if (routing_id.empty()) return bad("empty routing id");
  if (routing_id.size() > 2 * ReplicaRegistry::kMaxReplicaIdBytes) return bad("routing id too long");
  if (info.pool != ReplicaPool::kNormal && info.pool != ReplicaPool::kLongTail) {
    return bad("unknown pool " + std::to_string(static_cast<int>(info.pool)));
  }
  if (info.tp == 0) return bad("tp is 0");
  if (info.pp == 0) return bad("pp is 0");
  if (info.kv_blocks == 0) return bad("kv_blocks is 0");
  if (info.block_size == 0) return bad("block_size is 0");
  if (info.max_seqs == 0) return bad("max_seqs is 0");
  return Status::Ok();
}

}  // namespace

ReplicaRegistry::ReplicaRegistry(const CoordinatorConfig& config, const Clock& clock,
                                 std::string expected_model)
    : liveness_timeout_ms_(std::max<int64_t>(config.liveness_timeout_ms, 1)),
      clock_(clock),
      expected_model_(std::move(expected_model)) {}

bool ReplicaRegistry::IsRepeatRegistration(const proto::Register& message, const std::string& routing_id) const {
  const ReplicaState* current = Find(message.info.replica_id);
  return current != nullptr && current->live && current->incarnation == message.incarnation &&
         current->routing_id == routing_id;
}

Result<const ReplicaState*> ReplicaRegistry::Register(const proto::Register& message,
                                                      const std::string& routing_id,
                                                      std::string* evicted) {
  if (evicted) evicted->clear();
  const proto::ReplicaInfo& info = message.info;
  BMAD_RETURN_IF_ERROR(ValidateRegistration(info, routing_id));
  if (!expected_model_.empty() && info.model_name != expected_model_) {
    return FailedPrecondition("replica '" + info.replica_id + "' serves model '" +
                              info.model_name + "', this cluster serves '" + expected_model_ + "'");
  }
  // ZeroMQ identities are unique among live connections, so a live replica's routing id showing
  // up under another replica id is a misconfigured or hostile peer; a dead replica's is fair game.
  const auto routing_owner = by_routing_id_.find(routing_id);
  if (routing_owner != by_routing_id_.end()) {
    const ReplicaState& owner = *replicas_[routing_owner->second];
    if (owner.id() != info.replica_id && owner.live) {
      return FailedPrecondition("routing id of replica '" + info.replica_id +
                                "' belongs to live replica '" + owner.id() + "'");
    }
  }

  size_t index;
  bool same_process = false;
  if (const auto known = by_id_.find(info.replica_id); known != by_id_.end()) {
    index = known->second;
    const ReplicaState& current = *replicas_[index];
    same_process = current.incarnation == message.incarnation;
    const int64_t silent_ms = clock_.NowMillis() - current.last_heartbeat_ms;
    if (!same_process && current.live && silent_ms < liveness_timeout_ms_) {
      // Two processes under one id (a copied config), or a restart faster than the old
      // process's death is noticed. Taking the newcomer would move the live one's requests
      // and, on its next heartbeat, hand the id back, over and over. Unavailable: the worker
      // asks again every heartbeat, and gets in once the old one has been silent long enough.
      // The same words each time (no "heard N ms ago"): the newcomer asks again every
      // heartbeat interval, and both sides log a message only when it changes.
      return Unavailable("replica id '" + info.replica_id + "' is held by a live process (connection " +
                         current.routing_id + "); a new process takes it once that one stops or has "
                         "been silent for coordinator.liveness_timeout_ms (" +
                         std::to_string(liveness_timeout_ms_) + " ms)");
    }
  } else if (replicas_.size() < kMaxReplicas) {
    index = replicas_.size();
    replicas_.push_back(std::make_unique<ReplicaState>());
    by_id_.emplace(info.replica_id, index);
  } else {
    // Full: the slot of the replica dead the longest, if it has been gone long enough.
    const int64_t retention_ms = std::max(kRetentionMs, 10 * liveness_timeout_ms_);
    const int64_t now_ms = clock_.NowMillis();
    std::optional<size_t> oldest;
    for (size_t i = 0; i < replicas_.size(); ++i) {
      const ReplicaState& r = *replicas_[i];
      if (r.live || r.in_flight > 0 || now_ms - r.last_heartbeat_ms < retention_ms) continue;
      if (!oldest || r.last_heartbeat_ms < replicas_[*oldest]->last_heartbeat_ms) oldest = i;
    }
    if (!oldest) {
      return Unavailable("replica '" + info.replica_id + "' cannot register yet: " +
                         std::to_string(kMaxReplicas) + " replicas are known and none has been gone for " +
                         std::to_string(retention_ms / 1000) + " s");
    }
    index = *oldest;
    ReplicaState& gone = *replicas_[index];
    if (evicted) *evicted = gone.id();
    by_id_.erase(gone.id());
    if (!gone.routing_id.empty()) by_routing_id_.erase(gone.routing_id);
    gone = ReplicaState{};
    by_id_.emplace(info.replica_id, index);
  }
  ReplicaState& state = *replicas_[index];

  // Move the routing id: forget this replica's old connection, take the id from a dead owner.
  if (!state.routing_id.empty()) by_routing_id_.erase(state.routing_id);
  const auto previous = by_routing_id_.find(routing_id);
  if (previous != by_routing_id_.end() && previous->second != index) {
    replicas_[previous->second]->routing_id.clear();
  }
  by_routing_id_[routing_id] = index;

  // A restarted process holds none of the old one's requests.
  if (!same_process) {
    state.in_flight = 0;
    state.active_request_ids.clear();
    state.draining = false;
  }
  // What it registers with is what it holds now; a full queue refuses the next Assign again.
  state.full_at.reset();
  state.interval_budget.reset();
  NextInterval(state, /*took_all=*/false);
  // The worker forgets the numbers it has taken when it registers; so does this side.
  state.assigned = false;
  state.first_assignment = state.last_assignment = 0;
  state.info = info;
  state.info.load = Sanitized(info.load);
  // The peer's own live / in_flight / routed_total fields mean nothing here: those are ours.
  state.info.in_flight = state.in_flight;
  state.info.routed_total = state.routed_total;
  SetLive(state, true);
  state.routing_id = routing_id;
  state.incarnation = message.incarnation;
  state.last_heartbeat_ms = clock_.NowMillis();
  return static_cast<const ReplicaState*>(&state);
}

Status ReplicaRegistry::Heartbeat(const proto::Heartbeat& message, const std::string& routing_id) {
  ReplicaState* state = Find(message.replica_id);
  if (state == nullptr) {
    return NotFound("heartbeat from unregistered replica '" +
                    message.replica_id.substr(0, kMaxReplicaIdBytes) + "'");
  }
  if (state->routing_id != routing_id) {
    return NotFound("heartbeat for replica '" + state->id() +
                    "' from a connection it did not register from");
  }
  state->info.load = Sanitized(message.load);
  // Every Assign sent has been read (a worker reads them between steps, and heartbeats during
  // them too) and none waits: it has taken every offer it could, and has room for what it
  // does not run yet, and one waiting, at least.
  const bool read_all = !state->assigned || (message.has_last_assignment && message.last_assignment == state->last_assignment);
  if (message.load.waiting == 0 && read_all) {
    NextInterval(*state, /*took_all=*/!state->refused_in_interval);
    const uint32_t free_slots = state->info.max_seqs - std::min(message.load.running, state->info.max_seqs);
    const uint32_t room = state->in_flight + std::max<uint32_t>(1, free_slots);
    if (state->full_at && static_cast<int64_t>(room) > CapNow(*state)) {
      state->full_at = room;
      state->full_since_ms = clock_.NowMillis();
    }
  }
  state->active_request_ids = message.active_request_ids;
  state->last_heartbeat_ms = clock_.NowMillis();
  SetLive(*state, true);
  return Status::Ok();
}

std::vector<std::string> ReplicaRegistry::ExpireDead() {
  std::vector<std::string> died;
  const int64_t now_ms = clock_.NowMillis();
  for (const auto& state : replicas_) {
    if (state->live && now_ms - state->last_heartbeat_ms >= liveness_timeout_ms_) {
      SetLive(*state, false);
      died.push_back(state->id());
    }
  }
  return died;
}

bool ReplicaRegistry::MarkDead(const std::string& id) {
  ReplicaState* state = Find(id);
  if (state == nullptr || !state->live) return false;
  SetLive(*state, false);
  return true;
}

bool ReplicaRegistry::MarkStopped(const std::string& id) {
  ReplicaState* state = Find(id);
  if (state == nullptr) return false;
  const bool was_live = state->live;
  SetLive(*state, false);
  state->stopped = true;
  return was_live;
}

bool ReplicaRegistry::MarkDraining(const std::string& id) {
  ReplicaState* state = Find(id);
  if (state == nullptr || state->draining) return false;
  state->draining = true;
  return true;
}

OfferPosition ReplicaRegistry::Offered(const std::string& id) {
  ReplicaState* state = Find(id);
  if (state == nullptr) return {};
  // An interval that stopped taking offers, and saw no progress for kFullProbeMs, ends here.
  const bool stopped = state->refused_in_interval ||
                       (state->interval_budget && state->offers_in_interval >= *state->interval_budget);
  if (stopped && clock_.NowMillis() - state->interval_started_ms >= kFullProbeMs) {
    NextInterval(*state, /*took_all=*/false);
  }
  return {state->interval, state->offers_in_interval++};
}

void ReplicaRegistry::MarkFull(const std::string& id, const OfferPosition& refused) {
  ReplicaState* state = Find(id);
  if (state == nullptr) return;
  // A worker reads what came during a step after it sends the step's chunks: a refusal of an
  // earlier interval's offer says nothing of the offers made since, which it reads after its
  // next step.
  if (refused.interval == state->interval) state->refused_in_interval = true;
  if (refused.index > 0) {
    // The step's room is taken: an interval takes the offers made before this one.
    state->interval_budget = std::min(state->interval_budget.value_or(refused.index), refused.index);
    return;
  }
  // It holds all it can (never less than it runs, and one waiting).
  const uint32_t runs = std::min(state->info.load.running, state->info.max_seqs);
  const uint32_t capacity = std::max(state->in_flight, runs + 1);
  if (!state->full_at || static_cast<int64_t>(capacity) < CapNow(*state)) {
    state->full_at = capacity;
    state->full_since_ms = clock_.NowMillis();
  }
}

bool ReplicaRegistry::Progressed(const std::string& id) {
  ReplicaState* state = Find(id);
  // Only an interval that had offers ends: the chunks of one step (one per sequence) are one
  // sign of progress, not one each.
  if (state == nullptr || (state->offers_in_interval == 0 && !state->refused_in_interval)) return false;
  NextInterval(*state, /*took_all=*/!state->refused_in_interval);
  return true;
}

void ReplicaRegistry::NextInterval(ReplicaState& state, bool took_all) {
  if (took_all && state.interval_budget && state.offers_in_interval >= *state.interval_budget) {
    // Past the sequences it runs at once, a budget holds back nothing it could take.
    const uint32_t doubled = *state.interval_budget * 2;
    if (doubled > std::max<uint32_t>(state.info.max_seqs, 1)) {
      state.interval_budget.reset();
    } else {
      state.interval_budget = doubled;
    }
  }
  ++state.interval;
  state.interval_started_ms = clock_.NowMillis();
  state.offers_in_interval = 0;
  state.refused_in_interval = false;
}

int64_t ReplicaRegistry::CapNow(const ReplicaState& state) const {
  if (!state.full_at) return std::numeric_limits<int64_t>::max();
  const int64_t probes = std::max<int64_t>(clock_.NowMillis() - state.full_since_ms, 0) / kFullProbeMs;
  return static_cast<int64_t>(*state.full_at) + probes;
}

bool ReplicaRegistry::IsFull(const ReplicaState& state) const {
  if (clock_.NowMillis() - state.interval_started_ms < kFullProbeMs) {
    if (state.refused_in_interval) return true;
    if (state.interval_budget && state.offers_in_interval >= *state.interval_budget) return true;
  }
  return static_cast<int64_t>(state.in_flight) >= CapNow(state);
}

bool ReplicaRegistry::AnyTakesRequests() const {
  return std::any_of(replicas_.begin(), replicas_.end(), [&](const auto& state) {
    return state->live && !state->draining && !IsFull(*state);
  });
}

void ReplicaRegistry::SetLive(ReplicaState& state, bool live) {
  state.live = live;
  state.info.live = live;
  if (live) state.stopped = false;
}

ReplicaState* ReplicaRegistry::Find(const std::string& id) {
  const auto found = by_id_.find(id);
  return found == by_id_.end() ? nullptr : replicas_[found->second].get();
}

const ReplicaState* ReplicaRegistry::Find(const std::string& id) const {
  const auto found = by_id_.find(id);
  return found == by_id_.end() ? nullptr : replicas_[found->second].get();
}

ReplicaState* ReplicaRegistry::FindByRoutingId(const std::string& routing_id) {
  const auto found = by_routing_id_.find(routing_id);
  return found == by_routing_id_.end() ? nullptr : replicas_[found->second].get();
}

const ReplicaState* ReplicaRegistry::FindByRoutingId(const std::string& routing_id) const {
  const auto found = by_routing_id_.find(routing_id);
  return found == by_routing_id_.end() ? nullptr : replicas_[found->second].get();
}

std::vector<const ReplicaState*> ReplicaRegistry::All() const {
  std::vector<const ReplicaState*> all;
  all.reserve(replicas_.size());
  for (const auto& state : replicas_) all.push_back(state.get());
  return all;
}

std::vector<ReplicaView> ReplicaRegistry::Views() const {
  std::vector<ReplicaView> views;
  views.reserve(replicas_.size());
  for (const auto& state : replicas_) {
    const proto::ReplicaInfo& info = state->info;
    views.push_back(ReplicaView{info.replica_id, info.pool, state->live, info.max_seqs,
                                info.kv_blocks, info.load, state->in_flight, !state->draining,
                                IsFull(*state)});
  }
  return views;
}

size_t ReplicaRegistry::LiveCount() const {
  return static_cast<size_t>(std::count_if(replicas_.begin(), replicas_.end(),
                                           [](const auto& state) { return state->live; }));
}

bool ReplicaRegistry::AddInFlight(const std::string& id, int delta) {
  ReplicaState* state = Find(id);
  if (state == nullptr) return false;
  const int64_t updated = static_cast<int64_t>(state->in_flight) + delta;
  state->in_flight = static_cast<uint32_t>(
      std::clamp<int64_t>(updated, 0, std::numeric_limits<uint32_t>::max()));
  if (delta > 0) state->routed_total += static_cast<uint64_t>(delta);
  state->info.in_flight = state->in_flight;
  state->info.routed_total = state->routed_total;
  return true;
}

}  // namespace bmad::coord
