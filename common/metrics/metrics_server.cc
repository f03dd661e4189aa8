#include "common/metrics/metrics_server.h"

#include <httplib.h>

#include "common/http_body_guard.h"
#include "common/http_listen_thread.h"

namespace bmad::metrics {
namespace {

constexpr size_t kMaxBodyBytes = 64 << 10;

}  // namespace

struct MetricsServer::Impl {
  httplib::Server server;
  HttpListenThread listener;  // declared after the server: stopped before it is destroyed
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
  // No route here takes a body: one of a few kilobytes is read and ignored, a bigger one or one
  // of unknown length refused (httplib would read any body whole into memory).
  http_body::BodyPolicy body_policy;
  body_policy.max_bytes = kMaxBodyBytes;
  body_policy.write_error = [](httplib::Response& res, int status, const std::string& message) {
    res.status = status;
    res.set_content(message + "\n", "text/plain");
  };
  http_body::Guard(impl->server, std::move(body_policy));
  impl->server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(registry_.RenderText(), kTextContentType);
  });
  impl->server.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const bool healthy = healthy_.load() && (!liveness_check_ || liveness_check_());
    res.status = healthy ? 200 : 503;
    res.set_content(healthy ? "ok\n" : "unhealthy\n", "text/plain");
  });
  impl->server.Get("/ready", [this](const httplib::Request&, httplib::Response& res) {
    const bool ready = ready_.load() && (!liveness_check_ || liveness_check_());
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
  impl->listener.Start(impl->server);
  impl_ = std::move(impl);
  return Status::Ok();
}

void MetricsServer::Stop() {
  if (!impl_) return;
  impl_->listener.Stop();
  impl_.reset();
}

std::string MetricsServer::url() const {
  return "http://" + host_ + ":" + std::to_string(port_) + "/metrics";
}

}  // namespace bmad::metrics
