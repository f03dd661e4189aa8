// ReplicaRegistry: the coordinator's record of every replica that has registered, and whether
// each one is alive.
//
// A replica's leader registers (proto::Register: its ReplicaInfo and an incarnation, a number
// drawn when its process starts) from a ZeroMQ connection whose routing id the coordinator must
// send to, then heartbeats (proto::Heartbeat: load stats and the request ids it holds). A replica
// silent for `liveness_timeout_ms` is dead; ExpireDead, called from the event loop's timer,
// finds those. A dead replica comes back live when it heartbeats or registers again.
//
// A dead replica stays visible (ClusterStatus, metrics) until it returns. The number of distinct
// replica ids is bounded (kMaxReplicas) so that a misbehaving peer cannot grow the coordinator
// without limit; when every slot is taken, a new id takes the slot of the replica dead the
// longest, once that one has been silent for kRetentionMs (or 10 liveness timeouts, if longer)
// and holds no request: the table stays open to new replicas after a burst of made-up ids.
//
// Load stats are stored sanitised: kv_usage and utilization clamped to [0, 1], a non-finite
// value taken as 1 (a replica reporting garbage looks busy, never idle), so nothing downstream
// (router, metrics) sees NaN or infinity.
//
// Pointers returned by Register, Find, FindByRoutingId and All stay valid for the registry's
// lifetime (states are never moved or freed); the data they point to changes with each call.
//
// Thread-safety: none. The coordinator's single event-loop thread owns the registry; the clock
// is read on that thread too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/config/config.h"
#include "common/proto/messages.h"
#include "common/status.h"
#include "coordinator/router/replica_view.h"

namespace bmad::coord {

// Where an offer stood among the offers a replica had since its last sign of progress.
struct OfferPosition {
  uint64_t interval = 0;
  uint32_t index = 0;  // 0: the first offer since
};

struct ReplicaState {
  // As registered. The registry mirrors `live`, `in_flight` and `routed_total` below into it,
  // and keeps info.load current (sanitised, from the latest heartbeat or registration), so a
  // ClusterStatus can copy `info` as it is.
  proto::ReplicaInfo info;
  std::string routing_id;              // ZeroMQ identity to send to; empty once another
                                       // connection has taken it over (see Register)
  uint64_t incarnation = 0;
  int64_t last_heartbeat_ms = 0;       // Clock::NowMillis of the last heartbeat or registration
  bool live = false;
  uint32_t in_flight = 0;              // assigned by the coordinator, not yet seen finish
  uint64_t routed_total = 0;           // requests ever dispatched here (a counter)
  std::vector<uint64_t> active_request_ids;  // as of the last heartbeat, as sent
  bool draining = false;               // it refused an assignment as draining (this process)
  bool stopped = false;                // dead because it said it stopped on purpose (until it is
                                       // live again): not down, gone
  // What it takes (see Offered, MarkFull). Its intervals are the stretches between its signs of
  // progress: numbered, with when the current one began, the offers made in it and whether it
  // refused one; how many offers an interval takes (learned from refusals); and its capacity,
  // the requests it held when it refused one as full, with since when that cap has stood.
  uint64_t interval = 0;
  int64_t interval_started_ms = 0;
  uint32_t offers_in_interval = 0;
  bool refused_in_interval = false;
  std::optional<uint32_t> interval_budget;
  std::optional<uint32_t> full_at;
  int64_t full_since_ms = 0;
  // The numbers of the first and the newest Assign sent to it since it last registered (none
  // while !assigned; the coordinator keeps them, Register resets them): a heartbeat's
  // last_assignment outside them is not one of this registration's.
  bool assigned = false;
  uint32_t first_assignment = 0;
  uint32_t last_assignment = 0;

  const std::string& id() const { return info.replica_id; }
};

class ReplicaRegistry {
 public:
  // Distinct replica ids the registry holds at once.
  static constexpr size_t kMaxReplicas = 1024;
  // How long a dead replica keeps its slot, at least, when a new id needs one.
  static constexpr int64_t kRetentionMs = 60'000;
  // Longest replica id accepted (ids go into logs, metrics labels and routing ids).
  static constexpr size_t kMaxReplicaIdBytes = 256;
  // A full replica's capacity rises by one this often after it refused, and an interval without
  // progress ends after this long (see MarkFull).
  static constexpr int64_t kFullProbeMs = 200;

  // Uses config.liveness_timeout_ms (values < 1 are taken as 1). `expected_model`: when
  // non-empty, a replica serving another model is refused. `clock` must outlive the registry.
  ReplicaRegistry(const CoordinatorConfig& config, const Clock& clock,
                  std::string expected_model = {});

  ReplicaRegistry(const ReplicaRegistry&) = delete;
  ReplicaRegistry& operator=(const ReplicaRegistry&) = delete;

  // A new replica, or a known id registering again: the same incarnation is a reconnect of the
  // same process (its requests survive: in_flight is kept); another incarnation is a restarted
  // process (its requests and KV cache are gone: in_flight is reset, and the caller should
  // re-dispatch them and call Router::Forget; compare Find(id)->incarnation before calling to
  // tell the cases apart). Either way the replica is live from now, with the info, routing id
  // and incarnation of this message; routed_total survives re-registration.
  // Errors (the registry is unchanged):
  //   kInvalidArgument: empty or over-long replica id or routing id, an unknown pool, zero tp,
  //     pp, kv_blocks, block_size or max_seqs;
  //   kFailedPrecondition: the model differs from `expected_model`, or `routing_id` belongs to
  //     another replica that is still live (a dead one loses it to the newcomer);
  //   kUnavailable: a new incarnation while the current one of this id is live and has been
  //     heard from within the liveness timeout (a duplicate, or a restart not yet noticed), or
  //     a new id while kMaxReplicas are known and none can give up its slot yet: the newcomer
  //     should ask again later.
  // A new id that took a dead replica's slot sets `*evicted` to that replica's id (empty
  // otherwise): the caller forgets what it keeps under that id (metrics, router state).
  // True when `message` is a Register of the live registration it would renew: the same
  // process (incarnation) on the same connection. Those are stale copies: a worker cut off from
  // the coordinator asks every heartbeat interval, the copies queue on its socket and arrive
  // together once the coordinator is up, and the first registered it. Register would reset the
  // Assign numbers of a registration already in use; the caller answers without calling it.
  bool IsRepeatRegistration(const proto::Register& message, const std::string& routing_id) const;

  Result<const ReplicaState*> Register(const proto::Register& message,
                                       const std::string& routing_id,
                                       std::string* evicted = nullptr);

  // Stores the load and active request ids, refreshes the liveness deadline and makes a dead
  // replica live again. (To know whether it was dead, read Find(id)->live first.)
  // kNotFound when the replica id is unknown, or when `routing_id` is not the connection it
  // registered from (a restarted process whose registration was lost, or a stale connection):
  // either way the coordinator should tell that peer to register again.
  Status Heartbeat(const proto::Heartbeat& message, const std::string& routing_id);

  // Marks dead every live replica that has been silent for at least liveness_timeout_ms and
  // returns their ids, in registration order. Each death is reported once: a replica reported
  // here is not reported again until it has come back and fallen silent again.
  std::vector<std::string> ExpireDead();

  // Marks a replica dead now (e.g. the socket reported the peer gone). Returns true when it was
  // live (a death the caller should act on), false when already dead or unknown. ExpireDead
  // will not report it again.
  bool MarkDead(const std::string& id);
  // MarkDead for a replica that said it stopped on purpose (a planned Shutdown): also sets its
  // `stopped`, which it keeps until it is live again.
  bool MarkStopped(const std::string& id);
  // The replica refused work because it is draining: it stays live (its requests finish) but is
  // offered nothing new until a new process registers under its id. True when newly marked.
  bool MarkDraining(const std::string& id);
  // A replica takes offers into its queue, up to scheduler.max_waiting, and moves them into its
  // batch only between steps. So a refusal as full says one of two things:
  //  - the first offer since its last sign of progress: it holds all it can. What it holds is its capacity (at least what it runs, by its last
  //    heartbeat, and one waiting): it is full while it holds that many, and takes more as they
  //    end; so a slot that frees goes to the request the coordinator offers next, oldest first,
  //    instead of to whichever offer lands first (every refused request used to back off on its
  //    own, and new arrivals won). The cap only comes down; the replica's room can grow without
  //    a request ending (preempted sequences left its queue), so it rises by one every
  //    kFullProbeMs while it stands, and a heartbeat showing an empty queue raises it to what
  //    the replica holds plus its free sequence slots (at least one).
  //  - a later offer: the step's room is taken, not the replica's. An interval takes no more
  //    offers than were made before that one in its own (doubling again each time an interval
  //    takes all it was given without a refusal).
  // A refusal in the current interval stops its offers until the next sign of progress
  // (Progressed; a heartbeat that has read every Assign sent and shows an empty queue), or
  // kFullProbeMs without one. A worker answers a step's offers after that step's chunks, so a
  // refusal of an earlier interval's offer stops nothing. A registration clears all of it.
  // Offered: call as an offer goes to the replica; its position, for MarkFull.
  OfferPosition Offered(const std::string& id);
  // Call after the refused request left its in_flight.
  void MarkFull(const std::string& id, const OfferPosition& refused);
  // The replica sent a chunk: a step ended, its waiting requests had their turn. True when that
  // ended an interval (it may take offers it did not).
  bool Progressed(const std::string& id);
  bool IsFull(const ReplicaState& state) const;
  // Whether any replica would be offered a request now: live, not draining, not full.
  bool AnyTakesRequests() const;

  // nullptr when unknown. The mutable overloads are for the coordinator's own per-replica
  // bookkeeping; what the methods here maintain (routing_id, info, incarnation, liveness,
  // in_flight, routed_total) must change only through them, or the routing-id index and the
  // mirrors in `info` go stale.
  ReplicaState* Find(const std::string& id);
  const ReplicaState* Find(const std::string& id) const;
  ReplicaState* FindByRoutingId(const std::string& routing_id);
  const ReplicaState* FindByRoutingId(const std::string& routing_id) const;

  // Every replica ever registered, live or dead, in registration order.
  std::vector<const ReplicaState*> All() const;
  // The same order as All(), as router input (dead replicas included, with live = false), so
  // RouteDecision::index indexes All() too.
  std::vector<ReplicaView> Views() const;

  size_t LiveCount() const;
  size_t size() const { return replicas_.size(); }

  // Requests the coordinator assigned to `id` and has not seen finish: +1 on dispatch (which
  // also counts in routed_total), -1 when it ends or moves away. Clamped to [0, UINT32_MAX].
  // Returns false (nothing changes) for an unknown id.
  bool AddInFlight(const std::string& id, int delta);

 private:
  static void SetLive(ReplicaState& state, bool live);
  // The cap with the probes since it was set (no cap: the largest value).
  int64_t CapNow(const ReplicaState& state) const;
  // A new interval; `took_all` when the one ending took every offer its budget allowed, which
  // then doubles.
  void NextInterval(ReplicaState& state, bool took_all);

  int64_t liveness_timeout_ms_;
  const Clock& clock_;
  std::string expected_model_;
  std::vector<std::unique_ptr<ReplicaState>> replicas_;      // registration order
  std::unordered_map<std::string, size_t> by_id_;            // id -> index in replicas_
  std::unordered_map<std::string, size_t> by_routing_id_;    // routing id -> index
};

}  // namespace bmad::coord
