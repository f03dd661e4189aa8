// The HTTP door's n choices: all accepted or none, and all cancelled together when the client
// goes. An in-process coordinator on 127.0.0.1 (ephemeral ports) with no replica: accepted
// requests queue, so what is counted is exactly what the door admitted.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "coordinator/server/coordinator_server.h"
#include "tests/support/local_cluster.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"

namespace bmad::coord {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;
using testing::LocalCluster;

class HttpDoorTest : public ::testing::Test {
 protected:
  static constexpr int64_t kMaxQueued = 4;

  void SetUp() override {
    ServerConfig c;
    c.model.path = testing::SharedModelsDir() + "/stories260K.gguf";
    c.coordinator.client_endpoint = "tcp://127.0.0.1:*";
    c.coordinator.worker_endpoint = "tcp://127.0.0.1:*";
    c.coordinator.http_host = "127.0.0.1";
    c.coordinator.http_port = 0;
    c.coordinator.drain_timeout_ms = 5000;
    c.coordinator.max_queued_per_priority = kMaxQueued;
    c.metrics.coordinator_port = 0;
    CoordinatorRunOptions o;
    o.max_run_ms = 60000;
    auto server = CoordinatorServer::Create(c, o);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    run_ = std::thread([this] { run_status_ = server_->Run(); });
    ASSERT_TRUE(testing::WaitFor([&] { return server_->http_port() > 0; }, 10s));
  }
  void TearDown() override {
    if (server_) server_->RequestStop();
    if (run_.joinable()) run_.join();
  }

  httplib::Result Post(const Json& body, int read_timeout_s = 10) {
    httplib::Client client("127.0.0.1", server_->http_port());
    client.set_read_timeout(read_timeout_s, 0);
    return client.Post("/v1/completions", body.dump(), "application/json");
  }
  double Metric(const std::string& series) {
    httplib::Client client("127.0.0.1", server_->http_port());
    auto res = client.Get("/metrics");
    return res ? LocalCluster::MetricValue(res->body, series).value_or(0.0) : -1.0;
  }
  static Json Body(int n) {
    return {{"prompt", "Once upon a time"}, {"max_tokens", 4}, {"n", n}, {"temperature", 0.7}};
  }

  std::unique_ptr<CoordinatorServer> server_;
  std::thread run_;
  Status run_status_;
};

TEST_F(HttpDoorTest, ChoicesAreAdmittedAllOrNoneAndCancelledTogether) {
  // Three choices queue (no replica takes them); their client gives up after 3 s.
  std::thread waiting([&] { EXPECT_FALSE(Post(Body(3), /*read_timeout_s=*/3)); });
  ASSERT_TRUE(testing::WaitFor([&] { return Metric("bmad_coordinator_requests_queued") == 3.0; }, 10s));
  EXPECT_EQ(Metric("bmad_coordinator_requests_total"), 3.0);

  // Two more do not fit in the class's 4: both refused, none admitted, the three untouched.
  auto refused = Post(Body(2));
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 429) << refused->body;
  EXPECT_NE(refused->body.find("overloaded"), std::string::npos) << refused->body;
  EXPECT_EQ(refused->get_header_value("Retry-After"), "1");
  EXPECT_EQ(Metric("bmad_coordinator_requests_total"), 5.0);
  EXPECT_EQ(Metric("bmad_coordinator_rejections_total{reason=\"overloaded\"}"), 2.0);
  EXPECT_EQ(Metric("bmad_coordinator_requests_queued"), 3.0);

  // More choices than a class ever holds: the client's error, naming n and the setting.
  auto never = Post(Body(5));
  ASSERT_TRUE(never);
  EXPECT_EQ(never->status, 400) << never->body;
  const Json error = Json::parse(never->body)["error"];
  EXPECT_EQ(error["param"], "n") << never->body;
  EXPECT_NE(error["message"].get<std::string>().find("coordinator.max_queued_per_priority"),
            std::string::npos)
      << never->body;
  EXPECT_EQ(Metric("bmad_coordinator_rejections_total{reason=\"invalid\"}"), 5.0);

  // The first client goes: every one of its choices is cancelled, not only the first.
  waiting.join();
  EXPECT_TRUE(testing::WaitFor(
      [&] { return Metric("bmad_coordinator_requests_finished_total{status=\"cancelled\"}") == 3.0; }, 10s))
      << Metric("bmad_coordinator_requests_finished_total{status=\"cancelled\"}");
  EXPECT_TRUE(testing::WaitFor([&] { return Metric("bmad_coordinator_requests_queued") == 0.0; }, 10s));

  // With the room back, all four fit.
  std::thread four([&] { EXPECT_FALSE(Post(Body(4), /*read_timeout_s=*/2)); });
  EXPECT_TRUE(testing::WaitFor([&] { return Metric("bmad_coordinator_requests_queued") == 4.0; }, 10s));
  four.join();
  EXPECT_TRUE(testing::WaitFor([&] { return Metric("bmad_coordinator_requests_queued") == 0.0; }, 10s));
}

}  // namespace
}  // namespace bmad::coord
