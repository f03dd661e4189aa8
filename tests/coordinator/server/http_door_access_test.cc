// Who may call the HTTP API: CORS (no headers without an origin configured; "*" or one origin
// named) and API keys (every API call wants one of the file's; keys rotate when the file
// changes). An in-process coordinator with no replica (http_door_fixture.h).
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "tests/coordinator/server/http_door_fixture.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"

namespace bmad::coord {
namespace {

using namespace std::chrono_literals;

TEST_F(HttpDoorTest, WithoutACorsOriginNoCorsHeadersAreSent) {
  httplib::Client client("127.0.0.1", server_->http_port());
  const httplib::Headers from_a_page = {{"Origin", "https://chat.example.com"}};
  auto health = client.Get("/health", from_a_page);
  ASSERT_TRUE(health);
  EXPECT_FALSE(health->has_header("Access-Control-Allow-Origin"));
  auto preflight = client.Options("/v1/completions", from_a_page);
  ASSERT_TRUE(preflight);
  EXPECT_EQ(preflight->status, 405);  // a method the path does not take (vLLM without CORS: the same)
  EXPECT_FALSE(preflight->has_header("Access-Control-Allow-Origin"));
}

class HttpDoorCorsTest : public HttpDoorTest {
 protected:
  void Configure(ServerConfig& c) override { c.coordinator.http_cors_origin = origin_; }
  std::string origin_ = "*";
};

TEST_F(HttpDoorCorsTest, BrowserPagesMayCallTheApi) {
  // As vLLM's default (allowed_origins ["*"]): a browser's preflight is answered, and every
  // answer, errors included, lets the page read it.
  httplib::Client client("127.0.0.1", server_->http_port());
  const httplib::Headers preflight_headers = {{"Origin", "https://chat.example.com"},
                                              {"Access-Control-Request-Method", "POST"},
                                              {"Access-Control-Request-Headers", "authorization, content-type"}};
  auto preflight = client.Options("/v1/chat/completions", preflight_headers);
  ASSERT_TRUE(preflight);
  EXPECT_EQ(preflight->status, 204);
  EXPECT_EQ(preflight->get_header_value("Access-Control-Allow-Origin"), "*");
  EXPECT_NE(preflight->get_header_value("Access-Control-Allow-Methods").find("POST"), std::string::npos);
  EXPECT_EQ(preflight->get_header_value("Access-Control-Allow-Headers"), "authorization, content-type");
  const httplib::Headers from_a_page = {{"Origin", "https://chat.example.com"}};
  auto tokenized = client.Post("/tokenize", from_a_page, R"({"prompt": "Once"})", "application/json");
  ASSERT_TRUE(tokenized);
  EXPECT_EQ(tokenized->status, 200) << tokenized->body;
  EXPECT_EQ(tokenized->get_header_value("Access-Control-Allow-Origin"), "*");
  auto bad = client.Post("/v1/completions", from_a_page, R"({"prompt": 5})", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(bad->get_header_value("Access-Control-Allow-Origin"), "*");
  auto unknown = client.Get("/v2/nothing", from_a_page);
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  EXPECT_EQ(unknown->get_header_value("Access-Control-Allow-Origin"), "*");
  // A request from no page (curl, an SDK) gets no CORS header.
  auto plain = client.Get("/health");
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->has_header("Access-Control-Allow-Origin"));
  // A body refused before routing, answered straight on the socket, says so too.
  const std::string raw = ReadAll(SendRaw(server_->http_port(),
                                          "POST /v1/completions HTTP/1.1\r\nHost: x\r\nOrigin: https://chat.example.com\r\n"
                                          "Content-Type: multipart/form-data; boundary=XX\r\nContent-Length: 4\r\n\r\n--XX"));
  EXPECT_EQ(raw.rfind("HTTP/1.1 415", 0), 0u) << raw;
  EXPECT_NE(raw.find("Access-Control-Allow-Origin: *\r\n"), std::string::npos) << raw;
}

class HttpDoorOneOriginTest : public HttpDoorCorsTest {
 protected:
  void Configure(ServerConfig& c) override {
    origin_ = "https://chat.example.com";
    HttpDoorCorsTest::Configure(c);
  }
};

TEST_F(HttpDoorOneOriginTest, OnlyTheConfiguredOriginIsNamed) {
  httplib::Client client("127.0.0.1", server_->http_port());
  auto other = client.Get("/health", {{"Origin", "https://evil.example.com"}});
  ASSERT_TRUE(other);
  // The browser compares: a page of another origin cannot read the answer.
  EXPECT_EQ(other->get_header_value("Access-Control-Allow-Origin"), "https://chat.example.com");
  EXPECT_EQ(other->get_header_value("Vary"), "Origin");
}

class HttpDoorApiKeyTest : public HttpDoorTest {
 protected:
  void Configure(ServerConfig& c) override {
    keys_path_ = testing::MakeTempDir("http_api_keys") + "/keys";
    WriteKeys("# rotated monthly\nsk-first\nsk-second\n");
    c.coordinator.api_keys_file = keys_path_;
    c.coordinator.http_cors_origin = "*";
  }
  void WriteKeys(const std::string& text) {
    const std::string fresh = keys_path_ + ".tmp";
    std::ofstream(fresh, std::ios::trunc) << text;
    ASSERT_EQ(std::rename(fresh.c_str(), keys_path_.c_str()), 0);  // as a Secret update swaps it
  }
  static httplib::Headers Bearer(const std::string& key) { return {{"Authorization", "Bearer " + key}}; }
  std::string keys_path_;
};

TEST_F(HttpDoorApiKeyTest, EveryApiCallWantsAKeyOfTheFile) {
  httplib::Client client("127.0.0.1", server_->http_port());
  const std::string tokenize = R"({"prompt": "Once upon a time"})";
  // No key, a wrong one, another scheme: 401 with OpenAI's error object.
  for (const httplib::Headers& headers :
       {httplib::Headers{}, Bearer("sk-third"), Bearer("sk-firs"), httplib::Headers{{"Authorization", "Basic c2stZmlyc3Q6"}}}) {
    for (const char* path : {"/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize"}) {
      auto res = client.Post(path, headers, tokenize, "application/json");
      ASSERT_TRUE(res) << path;
      EXPECT_EQ(res->status, 401) << path << " " << res->body;
      EXPECT_EQ(res->get_header_value("WWW-Authenticate"), "Bearer");
      const Json error = Json::parse(res->body)["error"];
      EXPECT_EQ(error["code"], "invalid_api_key") << res->body;
      EXPECT_EQ(error["type"], "invalid_request_error");
      const bool given = headers.count("Authorization") && headers.find("Authorization")->second.starts_with("Bearer");
      EXPECT_NE(error["message"].get<std::string>().find(given ? "not one this server accepts" : "wants an API key"),
                std::string::npos)
          << res->body;
    }
    for (const char* path : {"/v1/models", "/v1/models/stories260K"}) {
      auto res = client.Get(path, headers);
      ASSERT_TRUE(res) << path;
      EXPECT_EQ(res->status, 401) << path;
    }
  }
  EXPECT_EQ(Metric("bmad_coordinator_rejections_total{reason=\"unauthenticated\"}"), 24.0);
  // Only the completions are requests to the cluster (as with a key): 4 refusals x 2 routes.
  EXPECT_EQ(Metric("bmad_coordinator_requests_total"), 8.0);
  // Either key of the file, in any case of the scheme.
  auto tokenized = client.Post("/tokenize", Bearer("sk-first"), tokenize, "application/json");
  ASSERT_TRUE(tokenized);
  EXPECT_EQ(tokenized->status, 200) << tokenized->body;
  auto models = client.Get("/v1/models", {{"Authorization", "bearer sk-second"}});
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200) << models->body;
  // Two requests on one connection, the first refused: its body is consumed, so the second is
  // read as the request it is (not the first one's body taken for a request line).
  auto request = [&](const std::string& authorization) {
    return "POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + authorization +
           "Content-Length: " + std::to_string(tokenize.size()) + "\r\n\r\n" + tokenize;
  };
  const int fd = SendRaw(server_->http_port(), request(""));
  ASSERT_GE(fd, 0);
  // One response: its head, then Content-Length bytes of body.
  auto read_response = [fd] {
    std::string got;
    char c;
    while (got.find("\r\n\r\n") == std::string::npos && read(fd, &c, 1) == 1) got += c;
    const size_t at = got.find("Content-Length: ");
    size_t length = at == std::string::npos ? 0 : std::stoul(got.substr(at + 16));
    while (length > 0 && read(fd, &c, 1) == 1) {
      got += c;
      --length;
    }
    return got;
  };
  const std::string refused = read_response();
  EXPECT_EQ(refused.rfind("HTTP/1.1 401", 0), 0u) << refused;
  const std::string again = request("Authorization: Bearer sk-second\r\n");
  ASSERT_EQ(write(fd, again.data(), again.size()), static_cast<ssize_t>(again.size()));
  const std::string served = read_response();
  close(fd);
  EXPECT_EQ(served.rfind("HTTP/1.1 200", 0), 0u) << served;
  EXPECT_NE(served.find("\"tokens\""), std::string::npos) << served;
  // Probes, Prometheus and a browser's preflight need none.
  auto health = client.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto ready = client.Get("/ready");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 503);  // no replica yet: not 401
  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  auto preflight = client.Options("/v1/completions", {{"Origin", "https://chat.example.com"},
                                                      {"Access-Control-Request-Method", "POST"}});
  ASSERT_TRUE(preflight);
  EXPECT_EQ(preflight->status, 204);
  // A 401 to a page still says which origin may read it (the page shows the error).
  auto from_page = client.Get("/v1/models", {{"Origin", "https://chat.example.com"}});
  ASSERT_TRUE(from_page);
  EXPECT_EQ(from_page->status, 401);
  EXPECT_EQ(from_page->get_header_value("Access-Control-Allow-Origin"), "*");
}

TEST_F(HttpDoorApiKeyTest, KeysRotateWhenTheFileChanges) {
  httplib::Client client("127.0.0.1", server_->http_port());
  auto status_with = [&](const std::string& key) {
    auto res = client.Get("/v1/models", Bearer(key));
    return res ? res->status : -1;
  };
  EXPECT_EQ(status_with("sk-first"), 200);
  WriteKeys("sk-rotated\n");
  // The file is looked at again at most once a second.
  ASSERT_TRUE(testing::WaitFor([&] { return status_with("sk-rotated") == 200; }, 10s));
  EXPECT_EQ(status_with("sk-first"), 401);
  // A file emptied by mistake keeps the keys read before.
  WriteKeys("");
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(status_with("sk-rotated"), 200);
}


}  // namespace
}  // namespace bmad::coord
