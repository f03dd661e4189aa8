#include "common/metrics/metrics_server.h"

#include <httplib.h>

#include <chrono>
#include <thread>

namespace bmad::metrics {

struct MetricsServer::Impl {
  httplib::Server server;
  std::thread thread;
};

MetricsServer::MetricsServer(const Registry& registry) : registry_(registry) {}

MetricsServer::~MetricsServer() { Stop(); }

Status MetricsServer::Start(const std::string& host, int port) {
  if (impl_) return FailedPrecondition("metrics server already started");
  auto impl = std::make_unique<Impl>();
  // httplib's default sets SO_REUSEPORT, which lets a second server share a busy port
  // silently; a taken port must be an error instead.
  impl->server.set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  impl->server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(registry_.RenderText(), kTextContentType);
  });
  impl->server.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const bool healthy = healthy_.load();
    res.status = healthy ? 200 : 503;
    res.set_content(healthy ? "ok\n" : "unhealthy\n", "text/plain");
  });
  impl->server.Get("/ready", [this](const httplib::Request&, httplib::Response& res) {
    const bool ready = ready_.load();
    res.status = ready ? 200 : 503;
    res.set_content(ready ? "ready\n" : "not ready\n", "text/plain");
  });
  int bound = -1;
  if (port == 0) {
    bound = impl->server.bind_to_any_port(host);
  } else if (impl->server.bind_to_port(host, port)) {
    bound = port;
  }
  if (bound <= 0) {
    return IoError("cannot serve /metrics on " + host + ":" + std::to_string(port) +
                   " (address in use or not available)");
  }
  port_ = bound;
  host_ = host;
  impl->thread = std::thread([server = &impl->server] { server->listen_after_bind(); });
  // httplib's stop() does nothing before the listen loop has started, so a Stop() right after
  // Start() would leave the loop running forever: wait until it runs (bounded).
  for (int i = 0; i < 2000 && !impl->server.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  impl_ = std::move(impl);
  return Status::Ok();
}

void MetricsServer::Stop() {
  if (!impl_) return;
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
  impl_.reset();
}

std::string MetricsServer::url() const {
  return "http://" + host_ + ":" + std::to_string(port_) + "/metrics";
}

}  // namespace bmad::metrics
