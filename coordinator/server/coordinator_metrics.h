// The coordinator's Prometheus metrics. Per-replica and per-decision series are created the
// first time they are seen and then kept by reference.
#pragma once

#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "common/metrics/registry.h"
#include "common/proto/messages.h"

namespace bmad::coord {

class CoordinatorMetrics {
 public:
  explicit CoordinatorMetrics(metrics::Registry& registry);

  metrics::Counter& Routed(const std::string& replica, const std::string& policy,
                           const std::string& pool);
  metrics::Counter& Finished(const std::string& status);  // ok, error, cancelled
  // overloaded, invalid, unavailable, unauthenticated. Event loop only: it may add a series.
  metrics::Counter& Rejected(const std::string& reason);
  metrics::Gauge& ReplicaLoad(const std::string& replica);
  metrics::Gauge& ReplicaWeight(const std::string& replica);
  metrics::Gauge& ReplicaFull(const std::string& replica);
  // bmad_coordinator_replica_up{replica, pool}. A replica id that registers again in another
  // pool moves: its series under the old pool drops to 0.
  void SetReplicaUp(const std::string& replica, const std::string& pool, bool up);
  // Drops every series of a replica that is gone for good (its registry slot went to another).
  void ForgetReplica(const std::string& replica);

  metrics::Gauge& queue_depth;        // admitted, not finished
  metrics::Gauge& queued;             // waiting for a replica
  metrics::Gauge& live_replicas;
  metrics::Counter& migrations;
  metrics::Counter& long_tail_requests;
  metrics::Counter& requests_total;
  metrics::Counter& requests_dispatched;  // first offers: the long-tail share's denominator
  metrics::Counter& prompt_tokens;
  metrics::Counter& generation_tokens;
  metrics::Histogram& time_to_first_token;
  metrics::Histogram& inter_token_latency;
  metrics::Histogram& e2e_latency;
  metrics::Histogram& queue_wait;
  metrics::Histogram& routing_seconds;
  // Rejected("unauthenticated"), which HTTP handler threads count too.
  metrics::Counter* rejected_unauthenticated = nullptr;

 private:
  metrics::Registry& registry_;
  std::map<std::tuple<std::string, std::string, std::string>, metrics::Counter*> routed_;
  std::map<std::string, metrics::Counter*> finished_, rejected_;
  metrics::Gauge& ReplicaGauge(std::map<std::string, metrics::Gauge*>& gauges, const char* name,
                               const char* help, const std::string& replica);

  std::map<std::string, metrics::Gauge*> load_, weight_, full_;
  std::map<std::pair<std::string, std::string>, metrics::Gauge*> up_;  // by (replica, pool)
  std::map<std::string, std::string> up_pool_;                         // each replica's latest pool
};

}  // namespace bmad::coord
