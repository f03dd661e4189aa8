#include "coordinator/client/cluster_status_format.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/config/config.h"

namespace bmad::client {
namespace {

std::string Percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", 100.0 * fraction);
  return buf;
}

// The replica's KV capacity in blocks: the live figure when the heartbeat has one.
double KvBlocks(const proto::ReplicaInfo& r) {
  return static_cast<double>(r.load.kv_total_blocks ? r.load.kv_total_blocks : r.kv_blocks);
}

// Left-aligns the first `text_columns` columns and right-aligns the (numeric) rest.
std::string Render(const std::vector<std::vector<std::string>>& rows, size_t text_columns) {
  std::vector<size_t> width(rows.front().size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - row[c].size(), ' ');
      if (c) line += "  ";
      line += c < text_columns ? row[c] + pad : pad + row[c];
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace

std::string FormatClusterStatusTable(const proto::ClusterStatus& s) {
  size_t live = 0;
  uint64_t running = 0, waiting = 0, in_flight = 0, routed = 0;
  double kv_weighted = 0, kv_weight = 0, kv_plain = 0, utilization = 0;
  std::vector<std::vector<std::string>> rows = {{"REPLICA", "POOL", "LIVE", "TPxPP", "RUNNING",
                                                 "WAITING", "KV%", "UTIL%", "IN FLIGHT", "ROUTED"}};
  for (const proto::ReplicaInfo& r : s.replicas) {
    // A dead replica's last load report is stale: shown as unknown, not as what it runs now.
    auto load = [&](const std::string& figure) { return r.live ? figure : std::string("-"); };
    rows.push_back({r.replica_id, std::string(EnumName(r.pool)), r.live ? "yes" : "no",
                    std::to_string(r.tp) + "x" + std::to_string(r.pp),
                    load(std::to_string(r.load.running)), load(std::to_string(r.load.waiting)),
                    load(Percent(r.load.kv_usage)), load(Percent(r.load.utilization)),
                    std::to_string(r.in_flight), std::to_string(r.routed_total)});
    in_flight += r.in_flight;
    routed += r.routed_total;
    if (!r.live) continue;  // (its load is stale)
    ++live;
    running += r.load.running;
    waiting += r.load.waiting;
    kv_weighted += r.load.kv_usage * KvBlocks(r);
    kv_weight += KvBlocks(r);
    kv_plain += r.load.kv_usage;
    utilization += r.load.utilization;
  }
  const double kv = kv_weight > 0 ? kv_weighted / kv_weight : live ? kv_plain / double(live) : 0;
  rows.push_back({"total", "", std::to_string(live) + "/" + std::to_string(s.replicas.size()), "",
                  std::to_string(running), std::to_string(waiting), Percent(kv),
                  Percent(live ? utilization / double(live) : 0), std::to_string(in_flight),
                  std::to_string(routed)});

  std::string out = "model " + (s.model_name.empty() ? std::string("(none)") : s.model_name) +
                    ": " + std::to_string(s.replicas.size()) + (s.replicas.size() == 1 ? " replica (" : " replicas (") +
                    std::to_string(live) + " live), " + std::to_string(s.queued) +
                    " queued, " + std::to_string(s.in_flight) + " in flight, " +
                    std::to_string(s.requests_total) + " requests since start\n";
  return out + Render(rows, 4);
}

std::string ClusterStatusJson(const proto::ClusterStatus& s) {
  nlohmann::ordered_json replicas = nlohmann::ordered_json::array();
  for (const proto::ReplicaInfo& r : s.replicas) {
    const proto::LoadStats& l = r.load;
    replicas.push_back({
        {"replica_id", r.replica_id},
        {"pool", std::string(EnumName(r.pool))},
        {"live", r.live},
        {"tp", r.tp},
        {"pp", r.pp},
        {"kv_blocks", r.kv_blocks},
        {"block_size", r.block_size},
        {"max_seqs", r.max_seqs},
        {"model_name", r.model_name},
        {"context_length", r.context_length},
        {"metrics_address", r.metrics_address},
        {"in_flight", r.in_flight},
        {"routed_total", r.routed_total},
        {"load",
         {{"running", l.running},
          {"waiting", l.waiting},
          {"kv_usage", l.kv_usage},
          {"utilization", l.utilization},
          {"kv_free_blocks", l.kv_free_blocks},
          {"kv_total_blocks", l.kv_total_blocks},
          {"steps_total", l.steps_total},
          {"generated_tokens_total", l.generated_tokens_total},
          {"max_seqs", l.max_seqs}}},
    });
  }
  const nlohmann::ordered_json j = {{"model_name", s.model_name},
                            {"queued", s.queued},
                            {"in_flight", s.in_flight},
                            {"requests_total", s.requests_total},
                            {"replicas", std::move(replicas)}};
  // Replica ids and model names come from the network: replace invalid UTF-8 rather than throw.
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace bmad::client
