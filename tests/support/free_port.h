// A TCP port on 127.0.0.1 that was free a moment ago, for servers that cannot bind port 0
// themselves (Prometheus). Ports are drawn from a range outside the usual service ports.
#pragma once

namespace bmad::testing {

int PickFreePort();

}  // namespace bmad::testing
