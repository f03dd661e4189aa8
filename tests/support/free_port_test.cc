// The test harness's port picker: ports below the kernel's ephemeral range (where outgoing
// connections take theirs), free when returned, and runs of consecutive ports free together.
#include "tests/support/free_port.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <set>

namespace bmad::testing {
namespace {

int EphemeralLowForTest() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0;
  if (!(in >> low) || low <= 11000) return 32768;
  return low;
}

bool CanBind(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

TEST(FreePortTest, PortsAreFreeAndBelowTheEphemeralRange) {
  const int low = EphemeralLowForTest();
  for (int i = 0; i < 20; ++i) {
    const int port = PickFreePort();
    EXPECT_GE(port, 10000);
    EXPECT_LT(port, low);
    EXPECT_TRUE(CanBind(port)) << port;
  }
}

TEST(FreePortTest, ARunOfPortsIsFreeTogether) {
  const int low = EphemeralLowForTest();
  const int base = PickFreePorts(4);
  EXPECT_GE(base, 10000);
  EXPECT_LT(base + 3, low);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(CanBind(base + i)) << base + i;
}

// A port is not bound until its server starts, so it still looks free: no port is handed out
// twice in one process, or a cluster's ports could collide (a replica's /metrics once came out
// as the coordinator's worker port). 500 draws from ~22K ports repeat one nearly always when
// nothing prevents it.
TEST(FreePortTest, NoPortIsHandedOutTwice) {
  std::set<int> seen;
  const int base = PickFreePorts(3);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(seen.insert(base + i).second) << base + i;
  for (int i = 0; i < 500; ++i) {
    const int port = PickFreePort();
    EXPECT_TRUE(seen.insert(port).second) << "port " << port << " handed out twice";
  }
}

}  // namespace
}  // namespace bmad::testing
