#include "tests/support/local_cluster.h"

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>
#include <httplib.h>

#include "tests/support/free_port.h"
#include "tests/support/paths.h"

namespace bmad::testing {
namespace {

using namespace std::chrono_literals;

// The environment of one replica's mpirun. Each job gets its own session directory base: Open
// MPI 4 jobs sharing /tmp/ompi.<host>.<uid> race when one starts while another creates or
// removes it ("mkdir ... File exists", open-mpi/ompi#8510), which failed a replica's start in
// cluster_test when the previous test's cluster was still stopping.
std::map<std::string, std::string> MpiEnv(const std::string& session_base) {
  return {{"OMPI_ALLOW_RUN_AS_ROOT", "1"},
          {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"},
          {"OMPI_MCA_btl", "self,vader,tcp"},
          {"OMPI_MCA_rmaps_base_oversubscribe", "1"},
          {"OMPI_MCA_orte_tmpdir_base", session_base},
          {"OPENBLAS_NUM_THREADS", "1"}};
}

// Children of a process, from /proc.
std::vector<pid_t> Children(pid_t pid) {
  std::vector<pid_t> out;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
    std::ifstream in(task.path() / "children");
    pid_t child;
    while (in >> child) out.push_back(child);
  }
  return out;
}

std::string Comm(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

}  // namespace

LocalCluster::LocalCluster(LocalClusterOptions options) : options_(std::move(options)) {
  dir_ = MakeTempDir("bmad-cluster-");
}

LocalCluster::~LocalCluster() {
  for (auto& r : replicas_) r->Stop(std::chrono::milliseconds(3000));
  if (coordinator_) coordinator_->Stop(std::chrono::milliseconds(3000));
  std::error_code ec;
  if (!::testing::Test::HasFailure() && !KeepTestDirs()) std::filesystem::remove_all(dir_, ec);
}

bool LocalCluster::Start(std::string* error) {
  http_port_ = PickFreePort();
  metrics_port_ = PickFreePort();
  worker_metrics_base_ = PickFreePorts(options_.normal_replicas + options_.long_tail_replicas);
  client_endpoint_ = "tcp://127.0.0.1:" + std::to_string(PickFreePort());
  worker_endpoint_ = "tcp://127.0.0.1:" + std::to_string(PickFreePort());
  config_path_ = dir_ + "/cluster.yaml";
  {
    std::ofstream f(config_path_);
    f << "model:\n  path: " << options_.model << "\n"
      << "coordinator:\n  client_endpoint: " << client_endpoint_ << "\n  worker_endpoint: "
      << worker_endpoint_ << "\n  http_port: " << http_port_
      << "\n  liveness_timeout_ms: " << options_.liveness_timeout_ms << "\n"
      << "worker:\n  threads: 1\n  heartbeat_ms: " << options_.heartbeat_ms << "\n"
      << "cache:\n  num_blocks: 512\n"
      << "metrics:\n  coordinator_port: " << metrics_port_ << "\n  worker_port: " << worker_metrics_base_ << "\n";
  }
  std::vector<std::string> sets;
  for (const std::string& s : options_.extra_sets) {
    sets.push_back("--set");
    sets.push_back(s);
  }
  coordinator_ = std::make_unique<ChildProcess>();
  std::vector<std::string> argv = {BinaryPath("bmad-coordinator"), "--config", config_path_, "--max-run-ms", "600000"};
  argv.insert(argv.end(), sets.begin(), sets.end());
  if (!coordinator_->Start(argv, dir_ + "/coordinator.log")) {
    *error = coordinator_->error();
    return false;
  }
  int index = 0;
  for (const char* pool : {"normal", "long_tail"}) {
    const int count = std::string(pool) == "normal" ? options_.normal_replicas : options_.long_tail_replicas;
    for (int i = 0; i < count; ++i, ++index) {
      auto p = std::make_unique<ChildProcess>();
      std::vector<std::string> w = {"mpirun", "-np", std::to_string(options_.ranks_per_replica),
                                    "--bind-to", "none", BinaryPath("bmad-worker"),
                                    "--config", config_path_, "--set",
                                    "worker.replica_id=" + std::string(pool) + "-" + std::to_string(i),
                                    "--set", "worker.pool=" + std::string(pool), "--replica-index",
                                    std::to_string(index), "--max-run-ms", "600000"};
      w.insert(w.end(), sets.begin(), sets.end());
      const std::string session_base = dir_ + "/ompi-" + std::to_string(index);
      std::filesystem::create_directories(session_base);
      if (!p->Start(w, dir_ + "/replica-" + std::to_string(index) + ".log", MpiEnv(session_base))) {
        *error = p->error();
        return false;
      }
      replicas_.push_back(std::move(p));
    }
  }
  const int want = index;
  // A process that exits while starting (a port taken, a bad flag) will not come up: stop
  // waiting as soon as one has, and say which.
  std::string exited;
  auto any_exited = [&] {
    if (!coordinator_->running()) exited = "the coordinator";
    for (size_t i = 0; i < replicas_.size() && exited.empty(); ++i) {
      if (!replicas_[i]->running()) exited = "replica " + std::to_string(i);
    }
    return !exited.empty();
  };
  if (!WaitFor([&] { return LiveReplicas() == want || any_exited(); }, 60s, 100ms) ||
      !exited.empty()) {
    *error = (exited.empty() ? "the cluster did not come up (" + std::to_string(LiveReplicas()) +
                                   " of " + std::to_string(want) + " replicas live)"
                             : exited + " exited while the cluster was starting") +
             "\n" + Logs();
    return false;
  }
  return true;
}

std::string LocalCluster::Get(const std::string& path) const {
  httplib::Client client("127.0.0.1", http_port_);
  client.set_connection_timeout(2, 0);
  client.set_read_timeout(10, 0);
  auto res = client.Get(path.c_str());
  return res ? res->body : "";
}

std::optional<double> LocalCluster::MetricValue(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return std::nullopt;
}

int LocalCluster::LiveReplicas() const {
  auto v = MetricValue(Get("/metrics"), "bmad_coordinator_live_replicas");
  return v ? static_cast<int>(*v) : -1;
}

bool LocalCluster::KillReplica(int index) {
  if (index < 0 || index >= static_cast<int>(replicas_.size())) return false;
  for (pid_t child : Children(replicas_[static_cast<size_t>(index)]->pid())) {
    if (Comm(child).find("bmad-worker") != std::string::npos) return kill(child, SIGKILL) == 0;
  }
  return false;
}

bool LocalCluster::SignalRank(int index, int rank, int signal) {
  if (index < 0 || index >= static_cast<int>(replicas_.size())) return false;
  const std::string want = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
  for (pid_t child : Children(replicas_[static_cast<size_t>(index)]->pid())) {
    if (Comm(child).find("bmad-worker") == std::string::npos) continue;
    std::ifstream in("/proc/" + std::to_string(child) + "/environ", std::ios::binary);
    std::string entry;
    while (std::getline(in, entry, '\0')) {
      if (entry == want) return kill(child, signal) == 0;
    }
  }
  return false;
}

std::string LocalCluster::Logs() const {
  std::string out = "--- coordinator ---\n" + (coordinator_ ? coordinator_->ReadLog() : "");
  for (size_t i = 0; i < replicas_.size(); ++i) {
    out += "--- replica " + std::to_string(i) + " ---\n" + replicas_[i]->ReadLog();
  }
  return out;
}

}  // namespace bmad::testing
