#include "tests/support/tcp_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

namespace bmad::testing {
namespace {

int ConnectTo(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Writes all of `n` bytes; false when the peer is gone.
bool WriteAll(int fd, const char* data, ssize_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, data, static_cast<size_t>(n), MSG_NOSIGNAL);
    if (w <= 0) return false;
    data += w;
    n -= w;
  }
  return true;
}

}  // namespace

TcpProxy::TcpProxy(int upstream_port) : upstream_port_(upstream_port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 && ::listen(listen_fd_, 16) == 0 &&
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port_ = ntohs(addr.sin_port);
  }
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

TcpProxy::~TcpProxy() {
  stopping_.store(true);
  acceptor_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& c : connections_) {
    c->relay.join();
    ::close(c->client_fd);
    if (c->server_fd >= 0) ::close(c->server_fd);
  }
  ::close(listen_fd_);
}

void TcpProxy::Freeze() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& c : connections_) c->frozen.store(true);
}

void TcpProxy::AcceptLoop() {
  while (!stopping_.load()) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    const int client = ::accept(listen_fd_, nullptr, nullptr);
    if (client < 0) continue;
    auto c = std::make_unique<Connection>();
    c->client_fd = client;
    c->server_fd = ConnectTo(upstream_port_.load());
    accepted_.fetch_add(1);
    Connection* raw = c.get();
    std::lock_guard<std::mutex> lock(mutex_);
    connections_.push_back(std::move(c));
    raw->relay = std::thread(&TcpProxy::Relay, raw, &stopping_);
  }
}

// Copies bytes both ways until either side closes, the proxy stops, or forever nothing once
// frozen (the sockets stay open: no FIN, no RST reaches either side).
void TcpProxy::Relay(Connection* c, const std::atomic<bool>* stopping) {
  if (c->server_fd < 0) return;  // nothing listens upstream: the client's connection just hangs
  char buffer[16384];
  while (!stopping->load()) {
    if (c->frozen.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    pollfd p[2] = {{c->client_fd, POLLIN, 0}, {c->server_fd, POLLIN, 0}};
    if (::poll(p, 2, 20) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const int from = p[i].fd, to = i == 0 ? c->server_fd : c->client_fd;
      const ssize_t n = ::recv(from, buffer, sizeof buffer, 0);
      if (n <= 0 || !WriteAll(to, buffer, n)) {
        ::shutdown(c->client_fd, SHUT_RDWR);
        ::shutdown(c->server_fd, SHUT_RDWR);
        return;
      }
    }
  }
}

}  // namespace bmad::testing
