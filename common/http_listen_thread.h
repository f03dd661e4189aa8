// An httplib::Server's listen loop on a thread of its own, which Stop() ends whenever it is
// called. httplib 0.11's Server::stop() does nothing until the loop has started, so a stop that
// came too early (a start-up that failed right after starting the server, on a machine too busy
// to run the new thread for a while) was lost and the join waited for ever.
#pragma once

#include <atomic>
#include <thread>

namespace httplib {
class Server;
}

namespace bmad {

class HttpListenThread {
 public:
  HttpListenThread() = default;
  ~HttpListenThread();  // Stop()
  HttpListenThread(const HttpListenThread&) = delete;
  HttpListenThread& operator=(const HttpListenThread&) = delete;

  // Runs server.listen_after_bind() on a new thread; the server is bound (and its socket
  // listening, so connections queue) already. `server` must outlive Stop().
  void Start(httplib::Server& server);
  // Ends the loop and joins the thread; returns at once if never started. Idempotent.
  void Stop();

 private:
  httplib::Server* server_ = nullptr;
  std::thread thread_;
  std::atomic<bool> done_{false};  // the loop has returned
};

}  // namespace bmad
