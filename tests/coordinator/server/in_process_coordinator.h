// What the in-process coordinator tests share: a config that binds every door to 127.0.0.1 on
// ports the system picks, reading one series of the coordinator's /metrics over HTTP, and
// waiting for the coordinator to close the connections of peers that went.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "common/config/config.h"

namespace bmad::coord {

// stories260K from ../shared/models, every endpoint on 127.0.0.1 with an ephemeral port, a
// 5 s drain, `max_queued_per_priority` requests per class.
ServerConfig LoopbackCoordinatorConfig(int64_t max_queued_per_priority);

// The value of `series` (name and labels, as exported) on the coordinator's HTTP /metrics;
// 0 when absent, -1 when /metrics cannot be read.
double CoordinatorMetric(int http_port, const std::string& series);

// The sum over every series of the family `name` (whatever their labels); -1 when /metrics
// cannot be read.
double CoordinatorMetricSum(int http_port, const std::string& name);

// Waits up to `timeout` until the TCP connections accepted on `endpoint`'s port
// ("tcp://127.0.0.1:PORT") are exactly `open` established ones, with none the peer closed and
// this process has yet to (CLOSE_WAIT): the coordinator's ZeroMQ I/O thread has then seen a
// vanished peer go, and the next send to it fails. Reads /proc/net/tcp; false on timeout.
bool WaitForAcceptedConnections(const std::string& endpoint, size_t open, std::chrono::milliseconds timeout);

}  // namespace bmad::coord
