// The connection behind an HTTP request, for what a handler cannot do through cpp-httplib 0.11,
// which gives it no handle on its socket: tell that the client has gone, and close the
// connection after refusing a body. The socket is found once by the request's two addresses.
#pragma once

#include <string>
#include <string_view>

namespace bmad {

class HttpConnection {
 public:
  HttpConnection(std::string local_addr, int local_port, std::string remote_addr, int remote_port);

  // True once the peer has closed or reset the connection. A handler waiting for tokens writes
  // nothing until they come, so without this a client that gave up (a timeout, Ctrl-C) would
  // go unnoticed and its request would run to the end. Finds the socket on the first call (the
  // handlers make it after a second without news: a scan of every descriptor is too dear for
  // each request). A peer that reset the connection before that leaves no connected socket to
  // find, only an unconnected one on our address; when there is neither, the client is taken
  // to be there.
  bool Gone();

  // Sends `answer` (a whole HTTP response), shuts the connection down both ways and puts
  // /dev/null in its descriptor's place. For a refused body that cannot be skipped (a chunked
  // or compressed one has no length): httplib would otherwise parse what is left of it as
  // further requests, answering each, since it offers a handler no way to close the connection
  // (and shutting only the reading side does not stop reads of what has already arrived).
  // httplib's own answer then goes nowhere, its next read ends the connection, and it closes
  // the descriptor as it would have the socket. False, having sent nothing, when the socket
  // was not found.
  bool AnswerAndClose(std::string_view answer);

  // Test hook: the connection's socket, or -1 (after the first Gone()).
  int socket_for_test() const { return fd_; }

 private:
  void Search();

  std::string local_addr_, remote_addr_;
  int local_port_, remote_port_;
  int fd_ = -1;
  bool searched_ = false;
  bool reset_ = false;  // no connected socket matched, and one on our address had lost its peer
};

}  // namespace bmad
