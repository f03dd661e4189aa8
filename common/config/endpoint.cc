#include "common/config/endpoint.h"

#include <charconv>
#include <cstdint>

namespace bmad {

std::string EndpointProblem(std::string_view s) {
  const std::string_view kShape = "expected a ZeroMQ endpoint (tcp://HOST:PORT or ipc://PATH)";
  if (s.starts_with("inproc://")) {
    return "an inproc:// endpoint reaches only its own process: give tcp://HOST:PORT or ipc://PATH";
  }
  if (s.starts_with("ipc://")) return s.size() == 6 ? std::string(kShape) : "";
  if (!s.starts_with("tcp://")) return std::string(kShape);
  const std::string_view rest = s.substr(6);
  const size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return std::string(kShape);
  const std::string_view port = rest.substr(colon + 1);
  if (port == "*") return "";  // ZeroMQ picks a free port
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc() || end != port.data() + port.size() || port.empty() || value < 1 ||
      value > 65535) {
    return "the port of a tcp:// endpoint must be 1..65535 or *";
  }
  return "";
}

std::optional<TcpAddress> TcpAddressOf(std::string_view endpoint) {
  if (!endpoint.starts_with("tcp://") || !EndpointProblem(endpoint).empty()) return std::nullopt;
  const std::string_view rest = endpoint.substr(6);
  const size_t colon = rest.rfind(':');
  const std::string_view port = rest.substr(colon + 1);
  if (port == "*") return std::nullopt;
  TcpAddress address{std::string(rest.substr(0, colon)), 0};
  std::from_chars(port.data(), port.data() + port.size(), address.port);
  return address;
}

namespace {

bool IsWildcardHost(std::string_view host) {
  return host == "*" || host == "0.0.0.0" || host == "::" || host == "[::]";
}

}  // namespace

bool ListenAddressesClash(const std::string& host_a, int64_t port_a, const std::string& host_b, int64_t port_b) {
  if (port_a == 0 || port_a != port_b) return false;
  return host_a == host_b || IsWildcardHost(host_a) || IsWildcardHost(host_b);
}

}  // namespace bmad
