// What the in-process coordinator tests share: a config that binds every door to 127.0.0.1 on
// ports the system picks, and reading one series of the coordinator's /metrics over HTTP.
#pragma once

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

}  // namespace bmad::coord
