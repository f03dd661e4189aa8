// A waiting request's effective priority: what a replica's scheduler admits its waiting requests
// by (policy continuous), and what the coordinator offers its queue to the replicas by, so that
// a request waits its turn by one rule wherever it waits.
//
// Class first (0 the most urgent; one class is worth one second of waiting at priority_decay 1),
// then time waited, then how close the deadline is: the share of the SLO gone (0 to 1 at the
// deadline), then one more per second past it. Past the deadline it grows by the second, not by
// the SLO: a 1 ms SLO would otherwise gain a class every millisecond, and any client could
// outrank every class. Higher goes first.
//
// Thread-safety: a pure function.
#pragma once

#include <cstdint>

namespace bmad {

struct WaitingRequest {
  int32_t priority_class = 0;
  int64_t waited_ms = 0;    // time it has spent waiting
  int64_t arrival_ms = 0;
  int64_t deadline_ms = 0;  // arrival plus its SLO
};

double EffectivePriority(const WaitingRequest& request, int64_t now_ms, double priority_decay);

}  // namespace bmad
