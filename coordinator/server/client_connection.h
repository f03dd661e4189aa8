// Whether the HTTP client behind a request is still there. A handler waiting for tokens writes
// nothing until they come, so without this a client that gave up (a timeout, Ctrl-C) would go
// unnoticed and its request would run to the end. cpp-httplib 0.11 gives a handler no handle on
// its connection, so the socket is found once by the request's two addresses.
#pragma once

#include <string>

namespace bmad::coord {

class ClientConnection {
 public:
  ClientConnection(std::string local_addr, int local_port, std::string remote_addr, int remote_port);

  // True once the peer has closed or reset the connection. Finds the socket on the first call
  // (the handlers make it after a second without news: a scan of every descriptor is too dear
  // for each request); when none matches, the client is taken to be there. A peer that reset
  // the connection (it closed with unread data) before that first call leaves no connected
  // socket to find: its request is cancelled only when a write to it fails.
  bool Gone();

  // Test hook: the connection's socket, or -1 (after the first Gone()).
  int socket_for_test() const { return fd_; }

 private:
  std::string local_addr_, remote_addr_;
  int local_port_, remote_port_;
  int fd_ = -1;
  bool searched_ = false;
};

}  // namespace bmad::coord
