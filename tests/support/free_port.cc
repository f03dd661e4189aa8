#include "tests/support/free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace bmad::testing {

namespace {

// A socket bound to 127.0.0.1:port (0: any free port), or -1 when the port is taken.
int BindLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    if (port == 0) throw std::runtime_error("bind(127.0.0.1:0) failed");
    return -1;
  }
  return fd;
}

int BoundPort(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return ntohs(addr.sin_port);
}

}  // namespace

int PickFreePort() { return PickFreePorts(1); }

int PickFreePorts(int count) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    // Hold the base and each next port while checking the rest, so none is counted twice.
    std::vector<int> held = {BindLoopback(0)};
    const int base = BoundPort(held[0]);
    bool all_free = base + count - 1 <= 65535;
    for (int i = 1; i < count && all_free; ++i) {
      const int fd = BindLoopback(base + i);
      if (fd < 0) all_free = false;
      else held.push_back(fd);
    }
    for (int fd : held) close(fd);
    if (all_free) return base;
  }
  throw std::runtime_error("no run of " + std::to_string(count) + " free ports on 127.0.0.1");
}

}  // namespace bmad::testing
