// Serves a Registry at GET /metrics, GET /health (the process is up) and GET /ready (200 once
// the owner says it can serve, 503 before; always 200 when no readiness check is set) over HTTP
// on its own thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "common/metrics/registry.h"
#include "common/status.h"

namespace bmad::metrics {

class MetricsServer {
 public:
  explicit MetricsServer(const Registry& registry);
  ~MetricsServer();  // stops the server
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // What /ready reports; settable any time, from any thread.
  void SetReady(bool ready) { ready_.store(ready); }
  // What /health reports (200, or 503 when false: the process should be restarted, e.g. a step
  // hung); settable any time, from any thread.
  void SetHealthy(bool healthy) { healthy_.store(healthy); }
  // Also asked by /health and /ready on every probe (from the server's threads): false answers
  // 503 to both, for a state no one is left to report (an owner's loop that stopped turning).
  // Set before Start.
  void SetLivenessCheck(std::function<bool()> check) { liveness_check_ = std::move(check); }

  // Binds host:port (port 0 picks a free one) and starts serving. kIoError names the address
  // when the bind fails (port taken, bad host).
  Status Start(const std::string& host, int port);
  void Stop();

  int port() const { return port_; }
  // "http://host:port/metrics"
  std::string url() const;

 private:
  struct Impl;
  const Registry& registry_;
  std::unique_ptr<Impl> impl_;
  std::string host_;
  int port_ = 0;
  std::atomic<bool> ready_{true};
  std::atomic<bool> healthy_{true};
  std::function<bool()> liveness_check_;
};

}  // namespace bmad::metrics
