// A TCP relay on 127.0.0.1 between a client and a server, for tests of what a process does when
// its peer vanishes without closing the connection (a node that died, a partition): Freeze()
// stops relaying on the connections open now and keeps them open, as a dead host's TCP would
// look; connections accepted later go to the current upstream port, which SetUpstream changes
// (a restarted server at a new address behind the same name).
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace bmad::testing {

class TcpProxy {
 public:
  // Listens on a free port of 127.0.0.1 and relays to 127.0.0.1:upstream_port.
  explicit TcpProxy(int upstream_port);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  int port() const { return port_; }
  void SetUpstream(int upstream_port) { upstream_port_.store(upstream_port); }
  // Relaying stops on every connection open now; they stay open.
  void Freeze();
  // Connections accepted so far.
  int accepted() const { return accepted_.load(); }

 private:
  struct Connection {
    int client_fd = -1;
    int server_fd = -1;
    std::atomic<bool> frozen{false};
    std::thread relay;
  };
  void AcceptLoop();
  static void Relay(Connection* c, const std::atomic<bool>* stopping);

  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<int> upstream_port_;
  std::atomic<int> accepted_{0};
  std::atomic<bool> stopping_{false};
  std::mutex mutex_;
  std::vector<std::unique_ptr<Connection>> connections_;
  std::thread acceptor_;
};

}  // namespace bmad::testing
