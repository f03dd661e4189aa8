// http_body::Guard and ReadCapped on a real httplib server on 127.0.0.1, driven over raw sockets:
// every body is bounded once unchunked and decoded, bodies of unknown length are refused where
// they are not read capped, and a refused body left unread is not parsed as further requests.
#include "common/http_body_guard.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>

#include "common/http_listen_thread.h"
#include "tests/support/gzip.h"

namespace bmad::http_body {
namespace {

constexpr size_t kMaxBody = 64 << 10;

class HttpBodyGuardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    policy_.max_bytes = kMaxBody;
    policy_.capped_route = [](const httplib::Request& req) { return req.path == "/capped"; };
    policy_.write_error = [](httplib::Response& res, int status, const std::string& message) {
      res.status = status;
      res.set_content(message, "text/plain");
    };
    // As the API adds its CORS headers after routing.
    policy_.finish_answer = [](const httplib::Request&, httplib::Response& res) { res.set_header("X-Finished", "yes"); };
    Guard(server_, policy_);
    server_.set_post_routing_handler(policy_.finish_answer);
    server_.Post("/capped", [this](const httplib::Request& req, httplib::Response& res,
                                   const httplib::ContentReader& reader) {
      std::optional<std::string> body = ReadCapped(req, res, reader, policy_);
      if (body) res.set_content("read " + std::to_string(body->size()) + " bytes: " + body->substr(0, 16), "text/plain");
    });
    server_.Post("/plain", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content("read " + std::to_string(req.body.size()) + " bytes", "text/plain");
    });
    server_.Get("/plain", [this](const httplib::Request&, httplib::Response& res) {
      ++plain_gets_;
      res.set_content("ok", "text/plain");
    });
    // Longer than the test's own receive timeout: an answer that waited for it would not come.
    server_.set_read_timeout(30, 0);
    port_ = server_.bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    listener_.Start(server_);
  }
  void TearDown() override { listener_.Stop(); }

  // A connection with 10 s send and receive timeouts.
  int Connect() const {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    timeval timeout{10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port_));
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    return fd;
  }
  // Sends what it can of `bytes`; a server that stopped reading may reset the connection.
  static void Send(int fd, const std::string& bytes) {
    for (size_t sent = 0; sent < bytes.size();) {
      const ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += static_cast<size_t>(n);
    }
  }
  // Everything the server sends until it closes; `closed` false if it was still open after 10 s.
  static std::string ReadUntilClosed(int fd, bool* closed) {
    std::string out;
    char buf[4096];
    *closed = false;
    while (true) {
      const ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n == 0 || (n < 0 && errno == ECONNRESET)) {
        *closed = true;
        break;
      }
      if (n < 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  // One response, read by its Content-Length, leaving the connection open.
  static std::string ReadOneResponse(int fd) {
    std::string out;
    char c;
    while (out.find("\r\n\r\n") == std::string::npos && recv(fd, &c, 1, 0) == 1) out += c;
    const size_t at = out.find("Content-Length: ");
    if (at == std::string::npos) return out;
    size_t left = std::stoul(out.substr(at + 16));
    while (left > 0 && recv(fd, &c, 1, 0) == 1) {
      out += c;
      --left;
    }
    return out;
  }
  static int Responses(const std::string& wire) {
    int n = 0;
    for (size_t at = wire.find("HTTP/1.1 "); at != std::string::npos; at = wire.find("HTTP/1.1 ", at + 1)) ++n;
    return n;
  }
  static std::string Chunked(const std::string& body, size_t chunk) {
    std::string out;
    char size[32];
    for (size_t at = 0; at < body.size(); at += chunk) {
      const std::string piece = body.substr(at, chunk);
      std::snprintf(size, sizeof size, "%zx\r\n", piece.size());
      out += size + piece + "\r\n";
    }
    return out + "0\r\n\r\n";
  }

  BodyPolicy policy_;
  std::atomic<int> plain_gets_{0};
  httplib::Server server_;
  HttpListenThread listener_;
  int port_ = -1;
};

TEST_F(HttpBodyGuardTest, AChunkedBodyWithinTheLimitIsRead) {
  const int fd = Connect();
  Send(fd, "POST /capped HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
               Chunked("{\"prompt\": \"" + std::string(30000, 'a') + "\"}", 1000));
  const std::string wire = ReadOneResponse(fd);
  EXPECT_NE(wire.find("HTTP/1.1 200"), std::string::npos) << wire;
  EXPECT_NE(wire.find("read 30014 bytes: {\"prompt\": \"aaaa"), std::string::npos) << wire;
  // The connection is kept for the next request.
  Send(fd, "GET /plain HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_NE(ReadOneResponse(fd).find("HTTP/1.1 200"), std::string::npos);
  close(fd);
}

// Before: httplib held the whole chunked body in memory, however long, and then parsed it.
TEST_F(HttpBodyGuardTest, AChunkedBodyPastTheLimitIsRefusedAndTheRestNotReadAsRequests) {
  const int fd = Connect();
  Send(fd, "POST /capped HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
               Chunked(std::string(4 * kMaxBody, 'a') + "\r\nGET /plain HTTP/1.1\r\n\r\n", 1000));
  bool closed = false;
  const std::string wire = ReadUntilClosed(fd, &closed);
  EXPECT_TRUE(closed) << wire;
  EXPECT_NE(wire.find("HTTP/1.1 413"), std::string::npos) << wire;
  EXPECT_NE(wire.find("the request body is over 65536 bytes once decoded"), std::string::npos) << wire;
  EXPECT_EQ(Responses(wire), 1) << wire;  // not a 400 for each line of what was left
  close(fd);
}

// A 4 MiB body of zeros gzips to a few kilobytes: before, it was inflated whole, unbounded.
TEST_F(HttpBodyGuardTest, ACompressedBodyIsBoundedOnceDecoded) {
  const std::string small = testing::Gzip("{\"prompt\": \"hello\"}");
  int fd = Connect();
  Send(fd, "POST /capped HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\nContent-Length: " +
               std::to_string(small.size()) + "\r\n\r\n" + small);
  std::string wire = ReadOneResponse(fd);
  EXPECT_NE(wire.find("read 19 bytes: {\"prompt\": \"hell"), std::string::npos) << wire;
  close(fd);

  const std::string bomb = testing::Gzip(std::string(4 << 20, '\0'));
  ASSERT_LT(bomb.size(), kMaxBody);
  fd = Connect();
  Send(fd, "POST /capped HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\nContent-Length: " +
               std::to_string(bomb.size()) + "\r\n\r\n" + bomb);
  bool closed = false;
  wire = ReadUntilClosed(fd, &closed);
  EXPECT_TRUE(closed) << wire;
  EXPECT_NE(wire.find("HTTP/1.1 413"), std::string::npos) << wire;
  EXPECT_NE(wire.find("once decoded"), std::string::npos) << wire;
  EXPECT_EQ(Responses(wire), 1) << wire;
  close(fd);
}

// HTTP/1.1 gives a POST with neither a length nor chunking no body: answered at once (httplib
// read one until the client closed, or paused 5 s).
TEST_F(HttpBodyGuardTest, APostWithNoLengthHasNoBody) {
  const int fd = Connect();
  Send(fd, "POST /capped HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_NE(ReadOneResponse(fd).find("read 0 bytes"), std::string::npos);
  Send(fd, "GET /plain HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_NE(ReadOneResponse(fd).find("HTTP/1.1 200"), std::string::npos);
  close(fd);
}

// Far past the limit, or from a client waiting for 100 Continue: refused before any of the body
// is read (httplib read and dropped the whole declared length first, and answered 100 Continue).
TEST_F(HttpBodyGuardTest, AFarLongerDeclaredLengthIsRefusedUnread) {
  for (const std::string expect : {"", "Expect: 100-continue\r\n"}) {
    const uint64_t length = expect.empty() ? uint64_t{1} << 60 : kMaxBody + 1;
    const int fd = Connect();
    Send(fd, "POST /capped HTTP/1.1\r\nHost: x\r\n" + expect + "Content-Length: " + std::to_string(length) + "\r\n\r\n");
    bool closed = false;
    const std::string wire = ReadUntilClosed(fd, &closed);
    EXPECT_TRUE(closed) << wire;
    EXPECT_EQ(wire.rfind("HTTP/1.1 413", 0), 0u) << wire;
    EXPECT_NE(wire.find("the request body is over 65536 bytes, the most accepted"), std::string::npos) << wire;
    EXPECT_EQ(wire.find("100 Continue"), std::string::npos) << wire;
    EXPECT_EQ(Responses(wire), 1) << wire;
    close(fd);
  }
}

// A declared length over the limit but within four times it: httplib refuses it and skips the
// body, so a client that sends its body before reading gets the answer, and the connection can
// go on.
TEST_F(HttpBodyGuardTest, ADeclaredLengthOverTheLimitIsRefusedAndTheConnectionKept) {
  const int fd = Connect();
  Send(fd, "POST /capped HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(kMaxBody + 1) + "\r\n\r\n" +
               std::string(kMaxBody + 1, 'a'));
  const std::string wire = ReadOneResponse(fd);
  EXPECT_NE(wire.find("HTTP/1.1 413"), std::string::npos) << wire;
  EXPECT_NE(wire.find("the request body is over 65536 bytes, the most accepted"), std::string::npos) << wire;
  Send(fd, "GET /plain HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_NE(ReadOneResponse(fd).find("HTTP/1.1 200"), std::string::npos);
  close(fd);
}

// Routes that read no body capped refuse one they could not bound, by name, and close.
TEST_F(HttpBodyGuardTest, OtherRoutesRefuseBodiesOfUnknownLengthOrEncoded) {
  struct Case {
    std::string request, status, message;
  };
  const Case cases[] = {
      {"POST /plain HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + Chunked(std::string(1000, 'a'), 100),
       "HTTP/1.1 411", "POST /plain takes no body of unknown length (Transfer-Encoding): send it with a Content-Length"},
      {"GET /plain HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + Chunked("abc", 10), "HTTP/1.1 400",
       "GET /plain takes no body"},
      {"POST /plain HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabc", "HTTP/1.1 415",
       "POST /plain takes no Content-Encoding gzip: send the body as it is"},
      {"POST /capped HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
       "HTTP/1.1 400", "POST /capped has both Content-Length and Transfer-Encoding; send one"},
      {"POST /capped HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 30\r\n\r\nabc", "HTTP/1.1 400",
       "POST /capped has 2 Content-Length headers; send one"},
      {"POST /capped HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\nabc", "HTTP/1.1 400",
       "POST /capped: Content-Length '-1' is not a byte count"},
      // httplib reads only "chunked" as chunked, anything else until the client closes.
      {"POST /capped HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\n\r\n{}", "HTTP/1.1 501",
       "POST /capped: Transfer-Encoding 'identity' is not supported (chunked is)"},
      // httplib parses a multipart body with no handler for its parts: it threw, answered 500 and
      // served the rest of the body as requests.
      {"POST /capped HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=XX\r\nContent-Length: 60\r\n\r\n"
       "--XX\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nGET /plain HTTP/1.1\r\n\r\n",
       "HTTP/1.1 415", "POST /capped takes a JSON body, not multipart/form-data"},
      {"POST /capped HTTP/1.1\r\nHost: x\r\nContent-Encoding: zstd\r\nContent-Length: 3\r\n\r\nabc", "HTTP/1.1 415",
       "POST /capped: Content-Encoding 'zstd' is not supported (gzip, deflate and br are)"},
      // httplib does not read a GET's body: it was parsed as the next request.
      {"GET /plain HTTP/1.1\r\nHost: x\r\nContent-Length: 33\r\n\r\nGET /plain HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 400",
       "GET /plain takes no body"},
  };
  for (const Case& c : cases) {
    const int fd = Connect();
    Send(fd, c.request);
    bool closed = false;
    const std::string wire = ReadUntilClosed(fd, &closed);
    EXPECT_TRUE(closed) << c.request;
    EXPECT_EQ(wire.rfind(c.status, 0), 0u) << wire;
    EXPECT_NE(wire.find(c.message), std::string::npos) << wire;
    EXPECT_EQ(Responses(wire), 1) << wire;
    EXPECT_NE(wire.find("X-Finished: yes"), std::string::npos) << wire;  // what routing would add
    close(fd);
  }
  // A refused HEAD gets the headers only, and what it sent past httplib's first read is not run
  // as a request (httplib ignores a failed header write, and a HEAD has no body to fail on).
  // The smuggled GET starts right after httplib's first read of 4096 bytes.
  const std::string smuggled = "GET /plain HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string headers = "HEAD /plain HTTP/1.1\r\nHost: x\r\nContent-Length: 0000\r\n\r\n";
  const std::string filler(4096 - headers.size(), 'a');
  char length[8];
  std::snprintf(length, sizeof length, "%04zu", filler.size() + smuggled.size());
  const int head = Connect();
  Send(head, headers.substr(0, headers.find("0000")) + length + headers.substr(headers.find("0000") + 4) + filler + smuggled);
  bool closed = false;
  const std::string wire = ReadUntilClosed(head, &closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(wire.rfind("HTTP/1.1 400", 0), 0u) << wire;
  EXPECT_EQ(wire.substr(wire.find("\r\n\r\n") + 4), "") << wire;
  // The client sees the end as soon as the answer is out; the server would run the GET after.
  for (int i = 0; i < 50 && plain_gets_ == 0; ++i) usleep(10000);
  EXPECT_EQ(plain_gets_, 0);
  close(head);
  // An identity encoding and a plain body with its length are fine.
  const int fd = Connect();
  Send(fd, "POST /plain HTTP/1.1\r\nHost: x\r\nContent-Encoding: identity\r\nContent-Length: 3\r\n\r\nabc");
  EXPECT_NE(ReadOneResponse(fd).find("read 3 bytes"), std::string::npos);
  close(fd);
}

}  // namespace
}  // namespace bmad::http_body
