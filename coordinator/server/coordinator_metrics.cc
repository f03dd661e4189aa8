#include "coordinator/server/coordinator_metrics.h"

namespace bmad::coord {

CoordinatorMetrics::CoordinatorMetrics(metrics::Registry& r)
    : queue_depth(r.GetGauge("bmad_coordinator_queue_depth",
                             "Requests admitted and not yet finished.")),
      queued(r.GetGauge("bmad_coordinator_requests_queued",
                        "Requests waiting for a live replica (new, or migrating).")),
      live_replicas(r.GetGauge("bmad_coordinator_live_replicas", "Replicas heartbeating.")),
      migrations(r.GetCounter("bmad_coordinator_migrations_total",
                              "Requests assigned again, from the tokens streamed, after their replica died or lost them.")),
      long_tail_requests(r.GetCounter("bmad_coordinator_long_tail_requests_total",
                                      "Requests whose prompt was classified long-tail.")),
      requests_total(r.GetCounter("bmad_coordinator_requests_total", "Requests received.")),
      requests_dispatched(r.GetCounter(
          "bmad_coordinator_requests_dispatched_total",
          "Requests offered to a replica for the first time; an offer again after a refusal or a "
          "migration is counted only in requests_routed_total.")),
      prompt_tokens(r.GetCounter("bmad_coordinator_prompt_tokens_total", "Prompt tokens admitted.")),
      generation_tokens(r.GetCounter("bmad_coordinator_generation_tokens_total",
                                     "Tokens streamed to clients.")),
      time_to_first_token(r.GetHistogram("bmad_coordinator_time_to_first_token_seconds",
                                         "From arrival at the coordinator to the first token sent.",
                                         metrics::LatencySecondsBuckets())),
      inter_token_latency(r.GetHistogram("bmad_coordinator_inter_token_latency_seconds",
                                         "Between consecutive tokens sent to a client.",
                                         metrics::StepSecondsBuckets())),
      e2e_latency(r.GetHistogram("bmad_coordinator_e2e_request_latency_seconds",
                                 "From arrival to the end of the request.",
                                 metrics::LatencySecondsBuckets())),
      queue_wait(r.GetHistogram("bmad_coordinator_queue_wait_seconds",
                                "From arrival to the assignment its first token came from: the time "
                                "in the coordinator's queue, refusals included. A request that ends "
                                "without a token counts its wait up to its last assignment (or its "
                                "end, if it never left the queue).",
                                metrics::LatencySecondsBuckets())),
      routing_seconds(r.GetHistogram("bmad_coordinator_routing_seconds",
                                     "Time to pick a replica for a request (picks that found one).",
                                     metrics::DecisionSecondsBuckets())),
      registry_(r) {
  // Every outcome and refusal reason is exported from the start (at 0), so dashboards and alerts
  // see a series before the first request ends or is refused.
  metrics::ExportBuildInfo(r);
  for (const char* status : {"ok", "error", "cancelled"}) Finished(status);
  for (const char* reason : {"overloaded", "unavailable", "invalid", "unauthenticated"}) Rejected(reason);
  rejected_unauthenticated = &Rejected("unauthenticated");
}

metrics::Counter& CoordinatorMetrics::Routed(const std::string& replica, const std::string& policy,
                                             const std::string& pool) {
  auto key = std::make_tuple(replica, policy, pool);
  auto it = routed_.find(key);
  if (it != routed_.end()) return *it->second;
  metrics::Counter& c = registry_.GetCounter(
      "bmad_coordinator_requests_routed_total", "Routing decisions, by replica, policy and pool.",
      {{"replica", replica}, {"policy", policy}, {"pool", pool}});
  routed_.emplace(key, &c);
  return c;
}

metrics::Counter& CoordinatorMetrics::Finished(const std::string& status) {
  auto it = finished_.find(status);
  if (it != finished_.end()) return *it->second;
  metrics::Counter& c = registry_.GetCounter("bmad_coordinator_requests_finished_total",
                                             "Requests ended, by outcome.", {{"status", status}});
  finished_.emplace(status, &c);
  return c;
}

metrics::Counter& CoordinatorMetrics::Rejected(const std::string& reason) {
  auto it = rejected_.find(reason);
  if (it != rejected_.end()) return *it->second;
  metrics::Counter& c = registry_.GetCounter("bmad_coordinator_rejections_total",
                                             "Requests refused, by reason.", {{"reason", reason}});
  rejected_.emplace(reason, &c);
  return c;
}

metrics::Gauge& CoordinatorMetrics::ReplicaGauge(std::map<std::string, metrics::Gauge*>& gauges,
                                                 const char* name, const char* help,
                                                 const std::string& replica) {
  auto it = gauges.find(replica);
  if (it != gauges.end()) return *it->second;
  metrics::Gauge& g = registry_.GetGauge(name, help, {{"replica", replica}});
  gauges.emplace(replica, &g);
  return g;
}

metrics::Gauge& CoordinatorMetrics::ReplicaLoad(const std::string& replica) {
  return ReplicaGauge(load_, "bmad_coordinator_replica_load_ratio",
                      "The router's load figure for each replica (0 idle, and while it is down).", replica);
}

metrics::Gauge& CoordinatorMetrics::ReplicaWeight(const std::string& replica) {
  return ReplicaGauge(weight_, "bmad_coordinator_replica_weight_ratio",
                      "The weighted policy's relative weight of each replica.", replica);
}

metrics::Gauge& CoordinatorMetrics::ReplicaFull(const std::string& replica) {
  return ReplicaGauge(full_, "bmad_coordinator_replica_full",
                      "1 while the replica is offered nothing: it refused a request as full and has not "
                      "shown a step since, or holds all it held when it last refused one (its capacity), "
                      "else 0.",
                      replica);
}

void CoordinatorMetrics::SetReplicaUp(const std::string& replica, const std::string& pool, bool up) {
  auto [latest, first] = up_pool_.try_emplace(replica, pool);
  if (!first && latest->second != pool) {
    up_.at({replica, latest->second})->Set(0);
    latest->second = pool;
  }
  auto it = up_.find({replica, pool});
  if (it == up_.end()) {
    metrics::Gauge& g = registry_.GetGauge("bmad_coordinator_replica_up",
                                           "1 while the replica heartbeats, 0 once it is dead.",
                                           {{"replica", replica}, {"pool", pool}});
    it = up_.emplace(std::make_pair(replica, pool), &g).first;
  }
  it->second->Set(up ? 1 : 0);
}

void CoordinatorMetrics::ForgetReplica(const std::string& replica) {
  std::erase_if(routed_, [&](const auto& entry) { return std::get<0>(entry.first) == replica; });
  std::erase_if(up_, [&](const auto& entry) { return entry.first.first == replica; });
  up_pool_.erase(replica);
  load_.erase(replica);
  weight_.erase(replica);
  full_.erase(replica);
  for (const char* family : {"bmad_coordinator_requests_routed_total", "bmad_coordinator_replica_up",
                             "bmad_coordinator_replica_load_ratio", "bmad_coordinator_replica_weight_ratio",
                             "bmad_coordinator_replica_full"}) {
    registry_.RemoveSeries(family, "replica", replica);
  }
}

}  // namespace bmad::coord
