#include "common/config/endpoint.h"

#include <charconv>
#include <cstdint>

namespace bmad {

std::string EndpointProblem(std::string_view s) {
  const std::string_view kShape = "expected a ZeroMQ endpoint (tcp://HOST:PORT or ipc://PATH)";
  if (s.starts_with("ipc://") || s.starts_with("inproc://")) {
    return s.substr(s.find("://") + 3).empty() ? std::string(kShape) : "";
  }
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

}  // namespace bmad
