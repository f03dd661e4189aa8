// ZeroMQ endpoints as bmad takes them (config keys, --coordinator flags): checked up front,
// since ZeroMQ would take a port out of range modulo 65536, and a bad one otherwise shows up
// only as a connection that never comes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace bmad {

// What is wrong with `endpoint` (tcp://HOST:PORT, tcp://HOST:* to bind a free port,
// ipc://PATH), or "" when nothing is. inproc:// is refused: it reaches only its own process.
std::string EndpointProblem(std::string_view endpoint);

// The host and port a valid tcp:// endpoint names; nullopt for ipc:// and a port of *.
struct TcpAddress {
  std::string host;
  int64_t port = 0;
};
std::optional<TcpAddress> TcpAddressOf(std::string_view endpoint);

// Whether listening on both would clash: the same port on the same host, or on any host where
// either is a wildcard (*, 0.0.0.0, ::). Port 0 (pick a free one) never clashes.
bool ListenAddressesClash(const std::string& host_a, int64_t port_a, const std::string& host_b, int64_t port_b);

}  // namespace bmad
