#include "coordinator/server/request_table.h"

#include <algorithm>
#include <random>
#include <utility>

#include "common/effective_priority.h"

namespace bmad::coord {

std::string_view RequestStateName(RequestState state) {
  switch (state) {
    case RequestState::kQueued: return "queued";
    case RequestState::kDispatched: return "dispatched";
    case RequestState::kStreaming: return "streaming";
    case RequestState::kFinished: return "finished";
    case RequestState::kFailed: return "failed";
    case RequestState::kCancelled: return "cancelled";
  }
  return "?";
}

RequestTable::RequestTable(int64_t max_per_priority, int64_t priority_classes, bool by_priority,
                           double priority_decay, int64_t default_slo_ms)
    : max_per_priority_(max_per_priority),
      by_priority_(by_priority),
      priority_decay_(priority_decay),
      default_slo_ms_(default_slo_ms),
      per_class_(static_cast<size_t>(priority_classes), 0),
      next_id_(RandomFirstId()) {}

uint64_t RequestTable::RandomFirstId() {
  std::random_device device;
  const uint64_t draw = (uint64_t{device()} << 32) ^ device();
  return 1 + draw % kFirstIdBound;
}

Status RequestTable::CheckRoom(int32_t priority, int64_t count) const {
  if (priority < 0 || priority >= static_cast<int32_t>(per_class_.size())) {
    return InvalidArgument("priority " + std::to_string(priority) + " is outside 0.." +
                           std::to_string(per_class_.size() - 1));
  }
  const int64_t in_progress = per_class_[static_cast<size_t>(priority)];
  if (in_progress + count > max_per_priority_) {
    return ResourceExhausted("overloaded: " + std::to_string(in_progress) +
                             " requests of priority " + std::to_string(priority) +
                             " are already in progress; retry later");
  }
  return Status::Ok();
}

Result<CoordRequest*> RequestTable::Admit(std::unique_ptr<CoordRequest> r) {
  BMAD_RETURN_IF_ERROR(CheckRoom(r->priority, 1));
  ++per_class_[static_cast<size_t>(r->priority)];
  CoordRequest* raw = r.get();
  requests_.emplace(r->id, std::move(r));
  if (raw->state == RequestState::kQueued) queue_.insert(KeyOf(*raw));
  return raw;
}

CoordRequest* RequestTable::Find(uint64_t id) {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second.get();
}

CoordRequest* RequestTable::FindByClient(const std::string& routing_id,
                                         const std::string& client_request_id) {
  for (auto& [id, r] : requests_) {
    if (r->client_routing_id == routing_id && r->client_request_id == client_request_id) return r.get();
  }
  return nullptr;
}

void RequestTable::Remove(uint64_t id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  --per_class_[static_cast<size_t>(it->second->priority)];
  if (it->second->state == RequestState::kQueued) queue_.erase(KeyOf(*it->second));
  requests_.erase(it);
}

std::vector<CoordRequest*> RequestTable::OnReplica(const std::string& replica_id) {
  std::vector<CoordRequest*> out;
  for (auto& [id, r] : requests_) {
    if (!r->done() && r->state != RequestState::kQueued && r->replica_id == replica_id) out.push_back(r.get());
  }
  return out;
}

RequestTable::QueueKey RequestTable::KeyOf(const CoordRequest& r) const {
  // The replicas' effective priority, -class + decay x (now - arrival) seconds, highest first,
  // orders requests at every moment as class + decay x arrival seconds does, lowest first: a
  // key that does not change while the request waits.
  if (!by_priority_) return {0.0, r.arrival_ns, r.id};
  return {double(r.priority) + priority_decay_ * double(r.arrival_ns) * 1e-9, r.arrival_ns, r.id};
}

void RequestTable::SetState(CoordRequest* r, RequestState state) {
  if (r->state == state) return;
  if (r->state == RequestState::kQueued) queue_.erase(KeyOf(*r));
  if (state == RequestState::kQueued) queue_.insert(KeyOf(*r));
  r->state = state;
}

std::vector<CoordRequest*> RequestTable::Queued(int64_t now_ns, bool ranked) {
  std::vector<CoordRequest*> out;
  out.reserve(queue_.size());
  for (const auto& [key, arrival, id] : queue_) out.push_back(requests_.at(id).get());
  if (!by_priority_ || !ranked) return out;
  // The set's order is the effective priority's without deadline pressure, which grows with
  // time at a rate of its own per request: ranked afresh (ties keep the set's order: arrival).
  const int64_t now_ms = now_ns / 1'000'000;
  std::vector<std::pair<double, CoordRequest*>> by_rank;
  by_rank.reserve(out.size());
  for (CoordRequest* r : out) {
    const int64_t arrival_ms = r->arrival_ns / 1'000'000;
    const int64_t slo_ms = r->slo_ms > 0 ? int64_t{r->slo_ms} : default_slo_ms_;
    const WaitingRequest waiting{r->priority, now_ms - arrival_ms, arrival_ms, arrival_ms + slo_ms};
    by_rank.emplace_back(EffectivePriority(waiting, now_ms, priority_decay_), r);
  }
  std::stable_sort(by_rank.begin(), by_rank.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = 0; i < by_rank.size(); ++i) out[i] = by_rank[i].second;
  return out;
}

std::vector<CoordRequest*> RequestTable::All() {
  std::vector<CoordRequest*> out;
  out.reserve(requests_.size());
  for (auto& [id, r] : requests_) out.push_back(r.get());
  return out;
}

int64_t RequestTable::in_class(int32_t priority) const {
  return per_class_.at(static_cast<size_t>(priority));
}

}  // namespace bmad::coord
