#include "common/http_connection.h"

#include <dirent.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

namespace bmad {
namespace {

// The numeric address and port of a socket address, written as httplib writes a request's
// (getnameinfo, numeric: an IPv6 link-local address keeps its %scope).
bool AddressOf(const sockaddr_storage& a, socklen_t len, std::string* host, int* port) {
  char buf[NI_MAXHOST] = {};
  if (a.ss_family == AF_INET) {
    *port = ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
  } else if (a.ss_family == AF_INET6) {
    *port = ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
  } else {
    return false;
  }
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&a), len, buf, sizeof buf, nullptr, 0, NI_NUMERICHOST) != 0) {
    return false;
  }
  *host = buf;
  return true;
}

}  // namespace

HttpConnection::HttpConnection(std::string local_addr, int local_port, std::string remote_addr, int remote_port)
    : local_addr_(std::move(local_addr)),
      remote_addr_(std::move(remote_addr)),
      local_port_(local_port),
      remote_port_(remote_port) {}

void HttpConnection::Search() {
  searched_ = true;
  // The connection stays open (and its descriptor ours) while its handler runs, so a connected
  // match found here cannot be another connection's. An unconnected socket on our address that
  // is not a listener is one whose peer reset it: ours, if no connected one matches.
  bool unconnected_on_our_address = false;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return;
  while (const dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0') continue;
    sockaddr_storage local{}, peer{};
    socklen_t local_len = sizeof local, peer_len = sizeof peer;
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&local), &local_len) != 0) continue;
    std::string local_host;
    int local_port = -1;
    if (!AddressOf(local, local_len, &local_host, &local_port) || local_port != local_port_ ||
        (!local_addr_.empty() && local_host != local_addr_)) {
      continue;
    }
    if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) {
      int listening = 0;
      socklen_t size = sizeof listening;
      if (getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_ACCEPTCONN, &listening, &size) == 0 && !listening) {
        unconnected_on_our_address = true;
      }
      continue;
    }
    std::string peer_host;
    int peer_port = -1;
    if (AddressOf(peer, peer_len, &peer_host, &peer_port) && peer_port == remote_port_ && peer_host == remote_addr_) {
      fd_ = static_cast<int>(fd);
      break;
    }
  }
  closedir(dir);
  reset_ = fd_ < 0 && unconnected_on_our_address;
}

bool HttpConnection::Gone() {
  if (!searched_) Search();
  if (fd_ < 0) return reset_;
  // The peer's FIN (close, exit) or RST. A client that only shuts down its sending side after
  // the request would read as gone too; HTTP clients do not do that.
  pollfd p{fd_, POLLRDHUP, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

bool HttpConnection::AnswerAndClose(std::string_view answer) {
  if (!searched_) Search();
  if (fd_ < 0) return false;
  // A refusal is a few hundred bytes: the socket's send buffer takes it without blocking.
  for (size_t sent = 0; sent < answer.size();) {
    const ssize_t n = send(fd_, answer.data() + sent, answer.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  shutdown(fd_, SHUT_RDWR);
  // httplib goes on with the descriptor: its own write of the answer, and a read of the next
  // request. A write to the shut socket fails and ends the connection, but a HEAD's answer has
  // no body and httplib ignores a failed header write, so it would go on to read, and bytes
  // already buffered would be run as a request. /dev/null in the socket's place ends that read
  // at once, whatever the method (and httplib closes it as it would the socket).
  const int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    dup3(null, fd_, O_CLOEXEC);
    close(null);
  }
  return true;
}

}  // namespace bmad
