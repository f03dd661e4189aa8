// HttpConnection finds a handler's socket by the connection's addresses, sees the peer go, and
// stops reading it.
#include "common/http_connection.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace bmad {
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

TEST(HttpConnectionTest, FindsTheSocketAndSeesThePeerClose) {
  Connection c;
  HttpConnection conn("127.0.0.1", PortOf(c.server, false), "127.0.0.1", PortOf(c.client, false));
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

TEST(HttpConnectionTest, NoMatchingSocketMeansTheClientIsTakenToBeThere) {
  Connection c;
  // The right local port but another peer port: not this connection.
  HttpConnection conn("127.0.0.1", PortOf(c.server, false), "127.0.0.1", 1);
  EXPECT_FALSE(conn.Gone());
  EXPECT_EQ(conn.socket_for_test(), -1);
  close(c.client);
  c.client = -1;
  usleep(20000);
  EXPECT_FALSE(conn.Gone());
}

// A peer that resets the connection (SO_LINGER 0, as a load balancer aborting it may) before
// the first look leaves the handler's socket unconnected: found as gone, not taken to be there.
TEST(HttpConnectionTest, APeerThatResetBeforeTheFirstLookIsGone) {
  Connection c;
  HttpConnection conn("127.0.0.1", PortOf(c.server, false), "127.0.0.1", PortOf(c.client, false));
  linger reset{1, 0};
  ASSERT_EQ(setsockopt(c.client, SOL_SOCKET, SO_LINGER, &reset, sizeof reset), 0);
  close(c.client);
  c.client = -1;
  usleep(20000);  // the RST crosses loopback at once
  EXPECT_TRUE(conn.Gone());
  EXPECT_EQ(conn.socket_for_test(), -1);
}

// Another connection on the same port that was reset is not this one's departure.
TEST(HttpConnectionTest, AnotherConnectionsResetIsNotThisOnesDeparture) {
  Connection c;
  const int other = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(PortOf(c.listener, false)));
  ASSERT_EQ(connect(other, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const int other_server = accept(c.listener, nullptr, nullptr);
  ASSERT_GE(other_server, 0);
  linger reset{1, 0};
  ASSERT_EQ(setsockopt(other, SOL_SOCKET, SO_LINGER, &reset, sizeof reset), 0);
  close(other);
  usleep(20000);
  HttpConnection conn("127.0.0.1", PortOf(c.server, false), "127.0.0.1", PortOf(c.client, false));
  EXPECT_FALSE(conn.Gone());
  EXPECT_EQ(conn.socket_for_test(), c.server);
  close(other_server);
}

// AnswerAndClose sends the answer and ends the connection: the client reads the answer, then the
// end, though the server had not read all the client sent.
TEST(HttpConnectionTest, AnswerAndCloseSendsTheAnswerThenEndsTheConnection) {
  Connection c;
  ASSERT_EQ(write(c.client, "rest of a body", 14), 14);
  HttpConnection conn("127.0.0.1", PortOf(c.server, false), "127.0.0.1", PortOf(c.client, false));
  ASSERT_TRUE(conn.AnswerAndClose("HTTP/1.1 413 Payload Too Large\r\n\r\n"));
  char buf[64];
  // The server's descriptor now reads as ended and swallows writes: httplib's next read of a
  // request ends the connection, whatever it wrote.
  EXPECT_EQ(read(c.server, buf, sizeof buf), 0);
  EXPECT_EQ(write(c.server, "x", 1), 1);
  const ssize_t n = read(c.client, buf, sizeof buf);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buf, static_cast<size_t>(n)), "HTTP/1.1 413 Payload Too Large\r\n\r\n");
  EXPECT_EQ(read(c.client, buf, sizeof buf), 0);
  HttpConnection nobody("127.0.0.1", PortOf(c.server, false), "127.0.0.1", 1);
  EXPECT_FALSE(nobody.AnswerAndClose("HTTP/1.1 400 Bad Request\r\n\r\n"));
}

}  // namespace
}  // namespace bmad
