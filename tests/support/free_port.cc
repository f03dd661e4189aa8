#include "tests/support/free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace bmad::testing {

namespace {

// A socket bound to 127.0.0.1:port, or -1 when the port is taken.
int BindLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Ports are drawn from [kLowestPort, the kernel's ephemeral range), not by binding port 0: that
// hands out ports of the ephemeral range, where the source port of any outgoing connection
// (thousands, in a parallel test run) can take the port between this check and the server's
// bind. That happened: a coordinator's /metrics port, picked free, was "address in use".
constexpr int kLowestPort = 10000;

int EphemeralLow() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0;
  if (!(in >> low) || low <= kLowestPort + 1000 || low > 65535) return 32768;
  return low;
}

}  // namespace

int PickFreePort() { return PickFreePorts(1); }

int PickFreePorts(int count) {
  if (count < 1 || count > 1000) throw std::invalid_argument("PickFreePorts: bad count");
  // A port handed out is not bound until its server starts, so it looks free to the next call:
  // remember every port this process has handed out and never hand it out again (a cluster
  // picks five or six ports before starting anything; two of them once came out the same).
  static std::mutex mutex;
  static std::set<int> handed_out;
  static std::mt19937 rng(std::random_device{}() ^ static_cast<unsigned>(getpid()));
  std::lock_guard<std::mutex> lock(mutex);
  std::uniform_int_distribution<int> draw(kLowestPort, EphemeralLow() - count);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    // Hold each port while checking the rest, so a run is free all at once.
    const int base = draw(rng);
    std::vector<int> held;
    bool all_free = true;
    for (int i = 0; i < count && all_free; ++i) {
      const int fd = handed_out.count(base + i) ? -1 : BindLoopback(base + i);
      if (fd < 0) all_free = false;
      else held.push_back(fd);
    }
    for (int fd : held) close(fd);
    if (all_free) {
      for (int i = 0; i < count; ++i) handed_out.insert(base + i);
      return base;
    }
  }
  throw std::runtime_error("no run of " + std::to_string(count) + " free ports on 127.0.0.1");
}

}  // namespace bmad::testing
