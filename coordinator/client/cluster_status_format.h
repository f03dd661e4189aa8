// How `bmad status` shows a ClusterStatus: a table for people, JSON for programs.
#pragma once

#include <string>

#include "common/proto/messages.h"

namespace bmad::client {

// One row per replica (id, pool, live, tp×pp, running, waiting, KV usage %, utilization %,
// requests in flight, requests routed) and a totals row, under a line with the model and the
// coordinator's queue. KV usage in the totals is weighted by each replica's KV blocks;
// utilization is the mean over live replicas.
std::string FormatClusterStatusTable(const proto::ClusterStatus& status);

// Every field of the ClusterStatus as a JSON object (pretty-printed, ends with a newline).
std::string ClusterStatusJson(const proto::ClusterStatus& status);

}  // namespace bmad::client
