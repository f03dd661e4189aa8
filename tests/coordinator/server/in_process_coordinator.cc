#include "tests/coordinator/server/in_process_coordinator.h"

#include <fstream>
#include <sstream>
#include <thread>

#include <httplib.h>

#include "tests/support/local_cluster.h"
#include "tests/support/paths.h"

namespace bmad::coord {

ServerConfig LoopbackCoordinatorConfig(int64_t max_queued_per_priority) {
  ServerConfig c;
  c.model.path = testing::SharedModelsDir() + "/stories260K.gguf";
  c.coordinator.client_endpoint = "tcp://127.0.0.1:*";
  c.coordinator.worker_endpoint = "tcp://127.0.0.1:*";
  c.coordinator.http_host = "127.0.0.1";
  c.coordinator.http_port = 0;
  c.coordinator.drain_timeout_ms = 5000;
  c.coordinator.max_queued_per_priority = max_queued_per_priority;
  c.metrics.coordinator_port = 0;
  return c;
}

double CoordinatorMetric(int http_port, const std::string& series) {
  httplib::Client client("127.0.0.1", http_port);
  auto res = client.Get("/metrics");
  return res ? testing::LocalCluster::MetricValue(res->body, series).value_or(0.0) : -1.0;
}

double CoordinatorMetricSum(int http_port, const std::string& name) {
  httplib::Client client("127.0.0.1", http_port);
  auto res = client.Get("/metrics");
  if (!res) return -1.0;
  std::istringstream in(res->body);
  double sum = 0;
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with(name)) continue;
    const char next = line.size() > name.size() ? line[name.size()] : '\0';
    if (next != ' ' && next != '{') continue;  // another family with this prefix
    sum += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

namespace {

struct AcceptedConnections {
  size_t established = 0;
  size_t close_wait = 0;
};

// /proc/net/tcp lines: "sl local_address rem_address st ...", addresses as HEXIP:HEXPORT, the
// state in hex (01 established, 08 close wait).
AcceptedConnections CountAccepted(int port) {
  AcceptedConnections count;
  std::ifstream table("/proc/net/tcp");
  std::string line;
  std::getline(table, line);  // the header
  while (std::getline(table, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state;
    fields >> slot >> local >> remote >> state;
    const size_t colon = local.find(':');
    if (colon == std::string::npos || std::stoi(local.substr(colon + 1), nullptr, 16) != port) continue;
    if (state == "01") ++count.established;
    if (state == "08") ++count.close_wait;
  }
  return count;
}

}  // namespace

bool WaitForAcceptedConnections(const std::string& endpoint, size_t open, std::chrono::milliseconds timeout) {
  const int port = std::stoi(endpoint.substr(endpoint.rfind(':') + 1));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const AcceptedConnections count = CountAccepted(port);
    if (count.established == open && count.close_wait == 0) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace bmad::coord
