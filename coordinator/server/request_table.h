// Every request the coordinator has accepted, from admission to its end, with what it needs to
// be re-dispatched if its replica dies: the prompt, the sampling parameters, and the tokens
// already streamed to the client (a migrated request continues after them; chunks for tokens the
// client already has are dropped, so the stream has no gap and no duplicate).
//
// States: queued (no replica yet, or its replica died) -> dispatched (assigned) -> streaming
// (first token sent) -> finished | failed | cancelled. Admission is bounded per priority class.
// Single-threaded: the coordinator's event loop owns it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "common/proto/messages.h"
#include "common/status.h"
#include "coordinator/server/http_stream.h"

namespace bmad::coord {

enum class RequestState { kQueued, kDispatched, kStreaming, kFinished, kFailed, kCancelled };
std::string_view RequestStateName(RequestState state);

struct CoordRequest {
  uint64_t id = 0;
  // Where the output goes: a socket client (routing id) or an HTTP handler (stream).
  std::string client_routing_id;
  std::shared_ptr<HttpStream> http;
  std::string client_request_id;
  bool stream = true;            // socket clients: false aggregates the output in one chunk
  std::vector<uint32_t> prompt;
  proto::SamplingParams sampling;
  // False: sampling.max_tokens is the room the context left (the client set none), and a
  // replica with less room serves it too, up to its own context.
  bool max_tokens_given = true;
  int32_t priority = 1;
  uint32_t slo_ms = 0;
  std::vector<uint64_t> block_hashes;
  uint32_t choices = 1;          // while being accepted: the choices of its prompt (AcceptChoices)

  RequestState state = RequestState::kQueued;  // changed through RequestTable::SetState only
  std::string replica_id;        // current assignment
  std::vector<uint32_t> streamed_tokens;  // sent to the client, in order
  std::string pending_text;      // aggregated text (non-streaming socket clients)
  std::vector<float> pending_logprobs;
  std::vector<uint32_t> pending_top_ids;  // their alternatives (top_logprobs), token after token
  std::vector<float> pending_top_logprobs;
  proto::TokenChunk pending_prompt;  // ... and the prompt log-probabilities (its prompt_* fields)
  // With sampling.prompt_logprobs: prompt positions 1 to this one have been delivered (a
  // migrated request's new replica scores them again: they are dropped).
  uint32_t prompt_logprobs_sent = 0;
  uint32_t next_client_sequence = 0;
  uint32_t migrations = 0;
  uint32_t assignment = 0;       // the number of its latest Assign (proto::Assign::assignment)
  uint32_t refusals = 0;         // replicas that refused it as full or draining
  uint32_t losses = 0;           // times a replica lost it (TakeBackLost) since its last token
  int64_t assigned_ns = 0;       // when its latest Assign was sent
  uint64_t offer_interval = 0;   // where its latest Assign stood among its replica's offers
  uint32_t offer_index = 0;      //   (ReplicaRegistry::Offered)
  bool queue_wait_counted = false;  // in bmad_coordinator_queue_wait_seconds
  bool length_recorded = false;  // offered once: its prompt length is in the router's long-tail window
  // The long-tail decision of its first offer, which every later offer keeps (a refused or
  // migrated request stays in its pool); set on admission. The choices of one prompt (n > 1)
  // share it: the decision of the first of them routed, and only that first one counts the
  // prompt's length in the window (n copies filled it, and moved the quantile between the
  // choices, which then went to different pools).
  std::shared_ptr<std::optional<bool>> prompt_long_tail;
  int64_t arrival_ns = 0;
  int64_t queued_since_ns = 0;
  int64_t first_token_ns = 0;
  int64_t last_token_ns = 0;
  uint32_t cached_prompt_tokens = 0;

  bool done() const {
    return state == RequestState::kFinished || state == RequestState::kFailed ||
           state == RequestState::kCancelled;
  }
};

class RequestTable {
 public:
  // The queue is offered as the replicas' scheduler admits: by effective priority with
  // `priority_decay` (scheduler.priority_decay) and deadlines `default_slo_ms` after arrival for
  // requests that carry none (scheduler.default_slo_ms) when `by_priority` (policy continuous),
  // else by arrival.
  RequestTable(int64_t max_per_priority, int64_t priority_classes, bool by_priority = false,
               double priority_decay = 0, int64_t default_slo_ms = 5000);

  // kResourceExhausted ("overloaded") when the request's class is full, kInvalidArgument for a
  // priority outside [0, classes).
  Result<CoordRequest*> Admit(std::unique_ptr<CoordRequest> request);
  // Whether `count` more requests of `priority` would be admitted now: OK, or the error Admit
  // would give the first one refused.
  Status CheckRoom(int32_t priority, int64_t count) const;
  int64_t max_per_priority() const { return max_per_priority_; }
  CoordRequest* Find(uint64_t id);
  CoordRequest* FindByClient(const std::string& routing_id, const std::string& client_request_id);
  // Ends a request (its admission slot frees); the record is dropped.
  void Remove(uint64_t id);
  std::vector<CoordRequest*> OnReplica(const std::string& replica_id);
  // Moves a request to another state; the queue's order follows. A request is admitted queued.
  void SetState(CoordRequest* r, RequestState state);
  // The queued requests in the order they are offered at `now_ns` (the clock arrival_ns is on):
  // the order a replica's scheduler admits its waiting ones in, less its max-wait guard. By
  // priority: by effective priority (common/effective_priority.h), its time waited counted from
  // arrival: class 0 first, a second of waiting worth `priority_decay` of a class (nothing waits
  // forever behind a stream of urgent arrivals), and up to one class more as the deadline nears,
  // one more per second past it; ties by arrival. A request a replica refused, or that lost its
  // replica, keeps its place. (The guard, which puts whatever waited max_wait_ms first, oldest
  // first, is left to the replicas: a coordinator queue is there because every replica is full,
  // and its requests have mostly waited that long, so the guard would make it first come, first
  // served, classes and deadlines ignored.)
  // `ranked` false: the set's order (class and aging, arrival), without deadline pressure, for a
  // pass that only checks queue deadlines.
  std::vector<CoordRequest*> Queued(int64_t now_ns, bool ranked = true);
  size_t queued() const { return queue_.size(); }
  std::vector<CoordRequest*> All();
  size_t size() const { return requests_.size(); }
  int64_t in_class(int32_t priority) const;
  // Ids start at random below 2^52 (exact in a JSON number), so that two coordinator processes
  // do not number requests alike: a replica still running the last one's request N took the
  // new one's request N for a copy of it (its replacement), and counted neither in its metrics.
  uint64_t NextId() { return next_id_++; }
  static constexpr uint64_t kFirstIdBound = uint64_t{1} << 52;

 private:
  static uint64_t RandomFirstId();
  // (class + priority_decay x arrival seconds, arrival, id): ascending is the offer order, less
  // deadline pressure (which Queued adds: it changes with time).
  using QueueKey = std::tuple<double, int64_t, uint64_t>;
  QueueKey KeyOf(const CoordRequest& r) const;

  int64_t max_per_priority_;
  bool by_priority_;
  double priority_decay_;
  int64_t default_slo_ms_;
  std::vector<int64_t> per_class_;
  std::unordered_map<uint64_t, std::unique_ptr<CoordRequest>> requests_;
  std::set<QueueKey> queue_;  // the queued requests
  uint64_t next_id_;
};

}  // namespace bmad::coord
