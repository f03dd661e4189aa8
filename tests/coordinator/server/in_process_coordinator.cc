#include "tests/coordinator/server/in_process_coordinator.h"

#include <sstream>

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

}  // namespace bmad::coord
