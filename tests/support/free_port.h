// A TCP port on 127.0.0.1 that was free a moment ago, for servers that cannot bind port 0
// themselves (Prometheus, the coordinator's configured ports). Ports are drawn at random from
// 10000 up to the kernel's ephemeral range, which outgoing connections take their ports from.
#pragma once

namespace bmad::testing {

int PickFreePort();

// The first of `count` consecutive ports on 127.0.0.1 that were all free a moment ago, for
// servers that number their ports from a base (replica i's /metrics on worker_port + i).
int PickFreePorts(int count);

}  // namespace bmad::testing
