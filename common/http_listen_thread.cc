#include "common/http_listen_thread.h"

#include <httplib.h>

#include <chrono>

namespace bmad {

HttpListenThread::~HttpListenThread() { Stop(); }

void HttpListenThread::Start(httplib::Server& server) {
  server_ = &server;
  done_.store(false);
  thread_ = std::thread([this] {
    server_->listen_after_bind();
    done_.store(true);
  });
}

void HttpListenThread::Stop() {
  if (!thread_.joinable()) return;
  // Wait for the loop to start (stop() is a no-op before) or to end by itself, then stop it
  // once: a second stop() while the loop winds down would close the closed socket again.
  // (httplib itself can still do that in one case: after an accept error it closes the socket
  // and drains its task queue with is_running() true, and a stop() then closes it again.)
  while (!done_.load()) {
    if (server_->is_running()) {
      server_->stop();
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  thread_.join();
}

}  // namespace bmad
