// ClientConnection finds a handler's socket by the connection's addresses and sees the peer go.
#include "coordinator/server/client_connection.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace bmad::coord {
namespace {

int PortOf(int fd, bool peer) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  const int rc = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len)
                      : getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return rc == 0 ? ntohs(a.sin_port) : -1;
}

// A listener on 127.0.0.1 and one connection to it: the client's and the server's ends.
struct Connection {
  int listener = -1, client = -1, server = -1;
  Connection() {
    listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(listen(listener, 1), 0);
    a.sin_port = htons(static_cast<uint16_t>(PortOf(listener, false)));
    client = socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_EQ(connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    server = accept(listener, nullptr, nullptr);
    EXPECT_GE(server, 0);
  }
  ~Connection() {
    for (int fd : {listener, client, server}) {
      if (fd >= 0) close(fd);
    }
  }
};

TEST(ClientConnectionTest, FindsTheSocketAndSeesThePeerClose) {
  Connection c;
  ClientConnection conn("127.0.0.1", PortOf(c.server, false), "127.0.0.1", PortOf(c.client, false));
  EXPECT_FALSE(conn.Gone());
  EXPECT_EQ(conn.socket_for_test(), c.server);
  // Bytes from the client (a pipelined request) are not a departure.
  ASSERT_EQ(write(c.client, "GET", 3), 3);
  EXPECT_FALSE(conn.Gone());
  close(c.client);
  c.client = -1;
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {  // the FIN crosses loopback at once; bounded anyway
    gone = conn.Gone();
    if (!gone) usleep(5000);
  }
  EXPECT_TRUE(gone);
}

TEST(ClientConnectionTest, NoMatchingSocketMeansTheClientIsTakenToBeThere) {
  Connection c;
  // The right local port but another peer port: not this connection.
  ClientConnection conn("127.0.0.1", PortOf(c.server, false), "127.0.0.1", 1);
  EXPECT_FALSE(conn.Gone());
  EXPECT_EQ(conn.socket_for_test(), -1);
  close(c.client);
  c.client = -1;
  usleep(20000);
  EXPECT_FALSE(conn.Gone());
}

}  // namespace
}  // namespace bmad::coord
