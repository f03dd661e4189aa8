#include "coordinator/server/client_connection.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstdlib>

namespace bmad::coord {
namespace {

// The numeric address and port of a socket address, as httplib writes them.
bool AddressOf(const sockaddr_storage& a, std::string* host, int* port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(a);
    if (inet_ntop(AF_INET, &in.sin_addr, buf, sizeof buf) == nullptr) return false;
    *port = ntohs(in.sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
    if (inet_ntop(AF_INET6, &in6.sin6_addr, buf, sizeof buf) == nullptr) return false;
    *port = ntohs(in6.sin6_port);
  } else {
    return false;
  }
  *host = buf;
  return true;
}

}  // namespace

ClientConnection::ClientConnection(std::string local_addr, int local_port, std::string remote_addr,
                                   int remote_port)
    : local_addr_(std::move(local_addr)),
      remote_addr_(std::move(remote_addr)),
      local_port_(local_port),
      remote_port_(remote_port) {}

bool ClientConnection::Gone() {
  if (!searched_) {
    searched_ = true;
    // The connection stays open (and its descriptor ours) while its handler runs, so a match
    // found here cannot be another connection's.
    DIR* dir = opendir("/proc/self/fd");
    if (dir == nullptr) return false;
    while (const dirent* entry = readdir(dir)) {
      char* end = nullptr;
      const long fd = std::strtol(entry->d_name, &end, 10);
      if (end == entry->d_name || *end != '\0') continue;
      sockaddr_storage local{}, peer{};
      socklen_t local_len = sizeof local, peer_len = sizeof peer;
      if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
          getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) {
        continue;  // not a socket, or not a connected one
      }
      std::string local_host, peer_host;
      int local_port = -1, peer_port = -1;
      if (AddressOf(local, &local_host, &local_port) && AddressOf(peer, &peer_host, &peer_port) &&
          local_port == local_port_ && peer_port == remote_port_ && peer_host == remote_addr_ &&
          (local_addr_.empty() || local_host == local_addr_)) {
        fd_ = static_cast<int>(fd);
        break;
      }
    }
    closedir(dir);
  }
  if (fd_ < 0) return false;
  // The peer's FIN (close, exit) or RST. A client that only shuts down its sending side after
  // the request would read as gone too; HTTP clients do not do that.
  pollfd p{fd_, POLLRDHUP, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace bmad::coord
