// ZeroMQ endpoints as bmad takes them (config keys, --coordinator flags): checked up front,
// since ZeroMQ would take a port out of range modulo 65536, and a bad one otherwise shows up
// only as a connection that never comes.
#pragma once

#include <string>
#include <string_view>

namespace bmad {

// What is wrong with `endpoint` (tcp://HOST:PORT, tcp://HOST:* to bind a free port,
// ipc://PATH, inproc://NAME), or "" when nothing is.
std::string EndpointProblem(std::string_view endpoint);

}  // namespace bmad
