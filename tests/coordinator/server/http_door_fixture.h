// What the HTTP door tests share: an in-process coordinator on 127.0.0.1 (ephemeral ports) with
// no replica, so accepted requests queue and what is counted is exactly what the door admitted;
// and raw-socket helpers for what an HTTP client library would not send.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "coordinator/server/coordinator_server.h"
#include "tests/coordinator/server/in_process_coordinator.h"
#include "tests/support/process.h"

namespace bmad::coord {

using Json = nlohmann::json;

class HttpDoorTest : public ::testing::Test {
 protected:
  static constexpr int64_t kMaxQueued = 4;

  void SetUp() override {
    ServerConfig c = LoopbackCoordinatorConfig(kMaxQueued);
    c.coordinator.drain_timeout_ms = drain_ms_;
    Configure(c);
    CoordinatorRunOptions o;
    o.max_run_ms = 60000;
    auto server = CoordinatorServer::Create(c, o);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    run_ = std::thread([this] { run_status_ = server_->Run(); });
    ASSERT_TRUE(testing::WaitFor([&] { return server_->http_port() > 0; }, std::chrono::seconds(10)));
  }
  void TearDown() override {
    if (server_) server_->RequestStop();
    if (run_.joinable()) run_.join();
  }

  httplib::Result Post(const Json& body, int read_timeout_s = 10, const std::string& path = "/v1/completions") {
    httplib::Client client("127.0.0.1", server_->http_port());
    client.set_read_timeout(read_timeout_s, 0);
    return client.Post(path, body.dump(), "application/json");
  }
  double Metric(const std::string& series) { return CoordinatorMetric(server_->http_port(), series); }
  static Json Body(int n) {
    return {{"prompt", "Once upon a time"}, {"max_tokens", 4}, {"n", n}, {"temperature", 0.7}};
  }
  // A streamed completion of Body(1), whose bytes go to `streamed` as they come.
  static httplib::Request StreamedCompletion(std::string& streamed) {
    Json body = Body(1);
    body["stream"] = true;
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&streamed](const char* data, size_t n, uint64_t, uint64_t) {
      streamed.append(data, n);
      return true;
    };
    return req;
  }

  virtual void Configure(ServerConfig&) {}

  int64_t drain_ms_ = 5000;
  std::unique_ptr<CoordinatorServer> server_;
  std::thread run_;
  Status run_status_;
};

// A connection to 127.0.0.1:`port` that has sent `bytes` (10 s read timeout); -1 on failure.
inline int SendRaw(int port, const std::string& bytes) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  timeval timeout{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      write(fd, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) {
    close(fd);
    return -1;
  }
  return fd;
}

// Everything the server sends on `fd` until it closes (or 10 s pass); closes `fd`.
inline std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

inline std::string RawCompletion(const Json& body) {
  const std::string text = body.dump();
  return "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
         "Content-Length: " + std::to_string(text.size()) + "\r\n\r\n" + text;
}

}  // namespace bmad::coord
