// A TCP port on 127.0.0.1 that was free a moment ago, for servers that cannot bind port 0
// themselves (Prometheus). Ports are drawn from a range outside the usual service ports.
#pragma once

namespace bmad::testing {

int PickFreePort();

// The first of `count` consecutive ports on 127.0.0.1 that were all free a moment ago, for
// servers that number their ports from a base (replica i's /metrics on worker_port + i).
int PickFreePorts(int count);

}  // namespace bmad::testing
