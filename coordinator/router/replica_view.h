// ReplicaView: what the router needs to know about one replica at the moment it picks.
//
// A plain snapshot, so the router depends neither on the registry nor on sockets: the
// coordinator builds views from ReplicaRegistry::Views(), tests and benchmarks build them by
// hand (fake replicas).
#pragma once

#include <cstdint>
#include <string>

#include "common/config/config.h"
#include "common/proto/messages.h"

namespace bmad::coord {

struct ReplicaView {
  std::string id;                       // the replica id it registered with
  ReplicaPool pool = ReplicaPool::kNormal;
  bool live = false;                    // only live replicas are ever picked
  uint32_t max_seqs = 0;                // sequences per engine step (as registered); the queue
                                        // term's unit (0 falls back to load.max_seqs, then 1)
  uint32_t kv_blocks = 0;               // usable KV blocks (as registered)
  proto::LoadStats load;                // as of the replica's last heartbeat
  uint32_t in_flight = 0;               // assigned by the coordinator and not yet finished
  bool accepting = true;                // false once it refused work as draining: still live
                                        // (its requests finish there) but offered nothing new
  bool full = false;                    // holds as many requests as when it last refused one as
                                        // full: offered nothing until one ends. Unlike a
                                        // draining one, it keeps its pool's requests waiting
                                        // for it (no fallback to the other pool)
};

}  // namespace bmad::coord
