// A real cluster on 127.0.0.1 for integration tests: the bmad-coordinator process and worker
// replicas, each replica its own `mpirun -np <tp × pp>` job (as the launcher runs them), every port
// picked free, everything stopped when the object goes away.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/process.h"

namespace bmad::testing {

struct LocalClusterOptions {
  std::string model;                     // GGUF path
  int normal_replicas = 1;
  int long_tail_replicas = 0;
  std::vector<std::string> extra_sets;   // more --set section.key=value for every process
  int64_t liveness_timeout_ms = 600;
  int64_t heartbeat_ms = 50;
  int ranks_per_replica = 1;             // mpirun -np for each replica (parallel.tp × parallel.pp)
};

class LocalCluster {
 public:
  explicit LocalCluster(LocalClusterOptions options);
  ~LocalCluster();

  // Starts the coordinator and the replicas and waits until every replica is live (bounded).
  // Returns false with a reason (and the logs) on failure.
  bool Start(std::string* error);

  int http_port() const { return http_port_; }
  std::string http_url() const { return "http://127.0.0.1:" + std::to_string(http_port_); }
  const std::string& client_endpoint() const { return client_endpoint_; }
  const std::string& worker_endpoint() const { return worker_endpoint_; }
  int coordinator_metrics_port() const { return metrics_port_; }
  int worker_metrics_port(int replica_index) const { return worker_metrics_base_ + replica_index; }
  const std::string& dir() const { return dir_; }

  // GET on the coordinator's HTTP port; the body ("" on failure).
  std::string Get(const std::string& path) const;
  // Live replicas according to the coordinator's /metrics (-1 when unreachable).
  int LiveReplicas() const;
  // A sample value from a /metrics page, or nullopt.
  static std::optional<double> MetricValue(const std::string& metrics_text, const std::string& series);

  // SIGKILLs the worker process (the rank, not mpirun) of replica `index`.
  bool KillReplica(int index);
  // Sends `signal` to world rank `rank` of replica `index`'s mpirun job.
  bool SignalRank(int index, int rank, int signal);
  // The bmad-coordinator process (to signal it).
  ChildProcess& coordinator_process() { return *coordinator_; }
  // The replica's mpirun job: its exit status once it ended.
  ChildProcess& replica_process(int index) { return *replicas_[static_cast<size_t>(index)]; }
  std::string Logs() const;

 private:
  LocalClusterOptions options_;
  std::string dir_;
  std::string config_path_;
  int http_port_ = 0, metrics_port_ = 0, worker_metrics_base_ = 0;
  std::string client_endpoint_, worker_endpoint_;
  std::unique_ptr<ChildProcess> coordinator_;
  std::vector<std::unique_ptr<ChildProcess>> replicas_;
};

}  // namespace bmad::testing
