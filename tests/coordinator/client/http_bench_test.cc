#include "coordinator/client/http_bench.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <nlohmann/json.hpp>

#include "coordinator/client/http_stream_request.h"
#include "tests/coordinator/client/fake_openai_server.h"
#include "tests/support/free_port.h"

namespace bmad::client {
namespace {

using nlohmann::json;
using testing::FakeOpenAiServer;

BenchHttpOptions Closed(const FakeOpenAiServer& server, const std::string& model, int64_t requests,
                        int64_t concurrency) {
  BenchHttpOptions o;
  o.url = server.url();
  o.model = model;
  o.requests = requests;
  o.concurrency = concurrency;
  o.prompt_len = "16";
  o.output_len = "5";
  o.timeout_s = 10;
  return o;
}

BenchHttpReport RunOk(const BenchHttpOptions& o) {
  auto report = RunBenchHttp(o, nullptr);
  EXPECT_TRUE(report.ok()) << report.status().ToString();
  return report.ok() ? *report : BenchHttpReport{};
}

TEST(HttpBenchTest, ClosedLoopMeasuresEveryRequestAndCountsTokensByUsage) {
  FakeOpenAiServer server;
  std::vector<BenchProgress> progress;
  auto report = RunBenchHttp(Closed(server, "steady", 6, 3),
                             [&](const BenchProgress& p) { progress.push_back(p); }, 0.01);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(server.requests(), 6);
  EXPECT_EQ(report->succeeded, 6);
  EXPECT_EQ(report->failed, 0);
  EXPECT_EQ(report->output_tokens, 30);
  EXPECT_EQ(report->prompt_tokens, 6 * 16);
  EXPECT_EQ(report->usage_reports, 6);
  // The server waits 40 ms before the first token and 10 ms between tokens.
  EXPECT_EQ(report->ttft_s.count, 6u);
  EXPECT_GE(report->ttft_s.p50, 0.035);
  EXPECT_LT(report->ttft_s.p50, report->e2e_s.p50);
  EXPECT_GE(report->e2e_s.p50, 0.035 + 4 * 0.008);
  EXPECT_EQ(report->itl_s.count, 6u * 4);
  EXPECT_GE(report->itl_s.p50, 0.008);
  EXPECT_GT(report->tpot_s.mean, 0.0);
  EXPECT_GT(report->requests_per_s, 0.0);
  EXPECT_NEAR(report->output_tokens_per_s, 30 / report->duration_s, 1e-9);
  EXPECT_LT(report->duration_s, 10.0);
  ASSERT_FALSE(progress.empty());
  EXPECT_TRUE(progress.back().last);
  EXPECT_EQ(progress.back().finished, 6);
  for (size_t i = 1; i < progress.size(); ++i) EXPECT_GE(progress[i].finished, progress[i - 1].finished);
}

TEST(HttpBenchTest, RequestsAskForAStreamOfRandomTokenIds) {
  FakeOpenAiServer server;
  BenchHttpOptions o = Closed(server, "steady", 3, 1);
  RunOk(o);
  o.vocab_size = 50;
  o.seed = 9;
  RunOk(o);
  const auto bodies = server.bodies();
  ASSERT_EQ(bodies.size(), 6u);
  for (size_t i = 0; i < bodies.size(); ++i) {
    const json b = json::parse(bodies[i]);
    EXPECT_EQ(b["model"], "steady");
    EXPECT_EQ(b["max_tokens"], 5);
    EXPECT_EQ(b["ignore_eos"], true);
    EXPECT_EQ(b["temperature"], 0);
    EXPECT_EQ(b["stream"], true);
    EXPECT_EQ(b["stream_options"]["include_usage"], true);
    ASSERT_EQ(b["prompt"].size(), 16u);
    const uint32_t low = i < 3 ? 100 : 12, high = i < 3 ? 19999 : 49;
    for (const json& id : b["prompt"]) {
      EXPECT_GE(id.get<uint32_t>(), low);
      EXPECT_LE(id.get<uint32_t>(), high);
    }
  }
  EXPECT_NE(bodies[0], bodies[1]) << "every request gets its own prompt";
}

TEST(HttpBenchTest, TheSameSeedGivesTheSameWorkload) {
  FakeOpenAiServer server;
  BenchHttpOptions o = Closed(server, "steady", 2, 1);
  o.prompt_len = "4-40";
  RunOk(o);
  RunOk(o);
  const auto bodies = server.bodies();
  ASSERT_EQ(bodies.size(), 4u);
  EXPECT_EQ(bodies[0], bodies[2]);
  EXPECT_EQ(bodies[1], bodies[3]);
}

TEST(HttpBenchTest, WithoutUsageTokensAreCountedByEvents) {
  FakeOpenAiServer server;
  const BenchHttpReport r = RunOk(Closed(server, "no-usage", 2, 2));
  EXPECT_EQ(r.succeeded, 2);
  EXPECT_EQ(r.output_tokens, 10);
  EXPECT_EQ(r.usage_reports, 0);
}

TEST(HttpBenchTest, UsageWinsOverTheEventCount) {
  FakeOpenAiServer server;
  const BenchHttpReport r = RunOk(Closed(server, "usage-more", 2, 2));
  EXPECT_EQ(r.succeeded, 2);
  EXPECT_EQ(r.output_tokens, 2 * 10) << "usage says max_tokens + 5 = 10 per request";
  EXPECT_EQ(r.itl_s.count, 2u) << "but gaps are still between events";
}

TEST(HttpBenchTest, OutputsShorterThanAskedForAreCountedAndWarnedAbout) {
  FakeOpenAiServer server;
  const BenchHttpOptions o = Closed(server, "stops-early", 2, 2);  // 5 tokens asked for, 2 come
  const BenchHttpReport r = RunOk(o);
  EXPECT_EQ(r.succeeded, 2);
  EXPECT_EQ(r.short_outputs, 2);
  EXPECT_NE(r.Text(o).find("warning: 2 requests ended short of their max_tokens"), std::string::npos) << r.Text(o);
  EXPECT_EQ(json::parse(r.Json(o))["short_outputs"], 2);
  FakeOpenAiServer full;
  const BenchHttpOptions steady = Closed(full, "steady", 2, 2);
  const BenchHttpReport whole = RunOk(steady);
  EXPECT_EQ(whole.short_outputs, 0);
  EXPECT_EQ(whole.Text(steady).find("warning"), std::string::npos) << whole.Text(steady);
  // Without usage, events are no token count: two events for five tokens are not flagged.
  FakeOpenAiServer bare;
  const BenchHttpReport bunched = RunOk(Closed(bare, "bunched", 2, 2));
  EXPECT_EQ(bunched.output_tokens, 4) << "counted by events";
  EXPECT_EQ(bunched.short_outputs, 0);
}

TEST(HttpBenchTest, HttpErrorsAreCountedWithTheirStatusAndMessage) {
  FakeOpenAiServer server;
  const BenchHttpReport r = RunOk(Closed(server, "every-3rd-429", 9, 3));
  EXPECT_EQ(r.succeeded, 6);
  EXPECT_EQ(r.failed, 3);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].first, "HTTP 429: rate limited");
  EXPECT_EQ(r.errors[0].second, 3);
  EXPECT_EQ(r.output_tokens, 30) << "failed requests add no tokens";
}

TEST(HttpBenchTest, MalformedTruncatedAndErrorStreamsAreErrors) {
  FakeOpenAiServer server;
  BenchHttpReport r = RunOk(Closed(server, "malformed", 8, 2));
  EXPECT_EQ(r.succeeded, 6);
  EXPECT_EQ(r.failed, 2);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].first.rfind("malformed stream", 0), 0u) << r.errors[0].first;

  r = RunOk(Closed(server, "truncated", 2, 2));
  EXPECT_EQ(r.failed, 2);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].first.find("without a finish reason"), std::string::npos);

  r = RunOk(Closed(server, "error-event", 1, 1));
  EXPECT_EQ(r.failed, 1);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].first, "error event: model crashed");

  r = RunOk(Closed(server, "error-field", 1, 1));
  EXPECT_EQ(r.failed, 1);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].first, "error event: slot failed");
}

TEST(HttpBenchTest, AServerThatNeverAnswersTimesOut) {
  FakeOpenAiServer server;
  BenchHttpOptions o = Closed(server, "hang", 2, 2);
  o.timeout_s = 0.3;
  const auto start = std::chrono::steady_clock::now();
  const BenchHttpReport r = RunOk(o);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(r.failed, 2);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].first, "timed out after 0.3 s");
}

TEST(HttpBenchTest, OpenLoopFinishesEveryRequest) {
  FakeOpenAiServer server;
  BenchHttpOptions o = Closed(server, "steady", 10, 0);
  o.rate = 100;
  o.output_len = "1-3";
  const BenchHttpReport r = RunOk(o);
  EXPECT_EQ(r.succeeded, 10);
  EXPECT_EQ(server.requests(), 10);
  EXPECT_GE(r.output_tokens, 10);
  EXPECT_LE(r.output_tokens, 30);
  EXPECT_NE(r.Json(o).find("\"mode\":\"open\""), std::string::npos);
}

// Open loop past the in-flight cap: arrivals wait for room and are reported as sent late (their
// latencies count from the send: coordinated omission, said rather than hidden).
TEST(HttpBenchTest, OpenLoopArrivalsHeldBackByTheInFlightCapAreReported) {
  FakeOpenAiServer server;
  BenchHttpOptions o = Closed(server, "steady", 12, 0);
  o.rate = 1000;  // 12 requests of ~90 ms each within ~12 ms
  o.open_loop_max_in_flight = 2;
  BenchHttpReport r = RunOk(o);
  EXPECT_EQ(r.succeeded, 12);
  EXPECT_GE(r.held_back, 8);
  EXPECT_NE(r.Text(o).find("requests were sent late, 2 already in flight"), std::string::npos) << r.Text(o);
  EXPECT_NE(r.Json(o).find("\"held_back\":" + std::to_string(r.held_back)), std::string::npos);
  // Room for all: none held back.
  o.open_loop_max_in_flight = 4096;
  r = RunOk(o);
  EXPECT_EQ(r.held_back, 0);
  EXPECT_EQ(r.Text(o).find("sent late"), std::string::npos);
}

TEST(HttpBenchTest, OpenLoopSendsTheFirstRequestAtOnce) {
  // The plan's first arrival came one Poisson gap after the start (at 0.05 req/s, 20 s on
  // average), idle time counted in the duration: one 0.1 s request reported 0.085 req/s.
  FakeOpenAiServer server;
  BenchHttpOptions o = Closed(server, "steady", 1, 0);
  o.rate = 0.05;
  for (uint64_t seed : {1, 2, 3}) {
    o.seed = seed;
    const BenchHttpReport r = RunOk(o);
    EXPECT_EQ(r.succeeded, 1);
    EXPECT_LT(r.duration_s, 5.0) << "seed " << seed;
    EXPECT_GT(r.requests_per_s, 0.2) << "seed " << seed;
  }
}

TEST(HttpBenchTest, ChatApiAndTheDefaultModel) {
  FakeOpenAiServer server;
  BenchHttpOptions o = Closed(server, "", 2, 1);
  o.api = OpenAiApi::kChat;
  o.prompt_len = "7";
  const BenchHttpReport r = RunOk(o);
  EXPECT_EQ(r.model, "steady") << "the first model of GET /v1/models";
  EXPECT_EQ(r.succeeded, 2);
  EXPECT_EQ(r.output_tokens, 10);
  const json b = json::parse(server.bodies().at(0));
  EXPECT_EQ(b["messages"][0]["role"], "user");
  const std::string text = b["messages"][0]["content"];
  EXPECT_EQ(std::count(text.begin(), text.end(), ' '), 6) << "about prompt-len words: " << text;
}

TEST(HttpBenchTest, AnUnreachableServerFailsEveryRequestOrTheModelLookup) {
  BenchHttpOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(bmad::testing::PickFreePort());
  o.requests = 2;
  o.concurrency = 2;
  o.timeout_s = 2;
  const Status lookup = RunBenchHttp(o, nullptr).status();
  EXPECT_EQ(lookup.code(), StatusCode::kUnavailable);
  EXPECT_NE(lookup.message().find("cannot connect (refused or unreachable)"), std::string::npos) << lookup.message();
  o.model = "m";
  const BenchHttpReport r = RunOk(o);
  EXPECT_EQ(r.failed, 2);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].first, "no response: cannot connect (refused or unreachable)");
}

TEST(HttpBenchTest, ReportTextAndJson) {
  FakeOpenAiServer server;
  BenchHttpOptions o = Closed(server, "every-3rd-429", 3, 1);
  const BenchHttpReport r = RunOk(o);
  const std::string text = r.Text(o);
  EXPECT_NE(text.find("closed loop with 1 in flight"), std::string::npos) << text;
  EXPECT_NE(text.find("time to first token ms"), std::string::npos);
  EXPECT_NE(text.find("1 x HTTP 429: rate limited"), std::string::npos) << text;
  const json j = json::parse(r.Json(o));
  EXPECT_EQ(j["bench"], "http");
  EXPECT_EQ(j["succeeded"], 2);
  EXPECT_EQ(j["failed"], 1);
  EXPECT_EQ(j["concurrency"], 1);
  EXPECT_TRUE(j["ttft_ms"].contains("p99"));
  EXPECT_EQ(j["errors"][0]["message"], "HTTP 429: rate limited");
  EXPECT_EQ(j["errors"][0]["count"], 1);
}

TEST(HttpBenchTest, ReportSplitAtSeparatesShortAndLongPrompts) {
  FakeOpenAiServer server;
  BenchHttpOptions o = Closed(server, "steady", 20, 4);
  o.prompt_len = "8,32";
  o.report_split_at = 16;
  const BenchHttpReport r = RunOk(o);
  ASSERT_EQ(r.succeeded, 20);
  int64_t short_sent = 0;
  for (const std::string& body : server.bodies()) short_sent += json::parse(body)["prompt"].size() < 16u;
  EXPECT_EQ(r.short_prompts.succeeded, short_sent);
  EXPECT_EQ(r.long_prompts.succeeded, 20 - short_sent);
  ASSERT_GT(short_sent, 0) << "seed 1 draws both lengths";
  ASSERT_LT(short_sent, 20);
  EXPECT_EQ(r.short_prompts.ttft_s.count, static_cast<size_t>(short_sent));
  EXPECT_EQ(r.long_prompts.e2e_s.count, static_cast<size_t>(20 - short_sent));
  EXPECT_GE(r.short_prompts.ttft_s.p50, 0.035) << "the server waits 40 ms before the first token";
  EXPECT_LE(r.long_prompts.ttft_s.p50, r.long_prompts.e2e_s.p50);
  const std::string text = r.Text(o);
  EXPECT_NE(text.find("prompts < 16 tokens: " + std::to_string(short_sent) + " requests"),
            std::string::npos) << text;
  EXPECT_NE(text.find("prompts >= 16 tokens: " + std::to_string(20 - short_sent) + " requests"),
            std::string::npos) << text;
  const json j = json::parse(r.Json(o));
  EXPECT_EQ(j["report_split_at"], 16);
  EXPECT_EQ(j["short_prompts"]["succeeded"], short_sent);
  EXPECT_TRUE(j["long_prompts"]["ttft_ms"].contains("p99"));

  // Off by default: no split in the text or the JSON.
  o.report_split_at = 0;
  EXPECT_EQ(r.Text(o).find("prompts <"), std::string::npos);
  EXPECT_FALSE(json::parse(r.Json(o)).contains("short_prompts"));
}

TEST(HttpBenchTest, UrgentShareSendsSloMsAndReportsThoseRequestsApart) {
  FakeOpenAiServer server;
  BenchHttpOptions o = Closed(server, "steady", 20, 4);
  o.prompt_len = "4-40";
  RunOk(o);  // the same workload without: bodies 0..19
  o.urgent_share = 0.3;
  o.urgent_slo_ms = 60000;
  const BenchHttpReport r = RunOk(o);
  const auto bodies = server.bodies();
  ASSERT_EQ(bodies.size(), 40u);
  // Closed loop with 4 workers sends in any order: compare the prompts as a set.
  std::multiset<std::string> without, with;
  int64_t urgent_sent = 0;
  for (size_t i = 0; i < 40; ++i) {
    json b = json::parse(bodies[i]);
    if (i >= 20 && b.contains("slo_ms")) {
      EXPECT_EQ(b["slo_ms"], 60000);
      ++urgent_sent;
    }
    EXPECT_TRUE(i >= 20 || !b.contains("slo_ms"));
    b.erase("slo_ms");
    (i < 20 ? without : with).insert(b.dump());
  }
  EXPECT_EQ(without, with) << "the urgent draw changed the workload";
  ASSERT_GT(urgent_sent, 0) << "seed 1 draws some";
  ASSERT_LT(urgent_sent, 20);
  EXPECT_EQ(r.urgent_sent, urgent_sent);
  EXPECT_EQ(r.relaxed_sent, 20 - urgent_sent);
  EXPECT_EQ(r.urgent.succeeded, urgent_sent);
  EXPECT_EQ(r.urgent_within_slo, urgent_sent) << "a minute is plenty";
  EXPECT_EQ(r.urgent.e2e_s.count, static_cast<size_t>(urgent_sent));
  EXPECT_EQ(r.relaxed.ttft_s.count, static_cast<size_t>(20 - urgent_sent));
  const std::string text = r.Text(o);
  const std::string line = "urgent (slo_ms 60000): " + std::to_string(urgent_sent) + " sent, " +
                           std::to_string(urgent_sent) + " succeeded, " + std::to_string(urgent_sent) + " within it";
  EXPECT_NE(text.find(line), std::string::npos) << text;
  const json j = json::parse(r.Json(o));
  EXPECT_EQ(j["urgent"]["within_slo"], urgent_sent);
  EXPECT_EQ(j["relaxed"]["sent"], 20 - urgent_sent);
  EXPECT_FALSE(j["relaxed"].contains("within_slo"));

  // Within: by the end-to-end latency. 1 ms cannot be met (the server waits 40 ms).
  o.urgent_slo_ms = 1;
  const BenchHttpReport missed = RunOk(o);
  EXPECT_EQ(missed.urgent.succeeded, urgent_sent);
  EXPECT_EQ(missed.urgent_within_slo, 0);
}

TEST(HttpBenchTest, OptionsAreValidated) {
  BenchHttpOptions o;
  o.url = "http://127.0.0.1:1";
  o.concurrency = 1;
  EXPECT_TRUE(ValidateBenchHttpOptions(o).ok());
  auto fails = [](BenchHttpOptions bad, const std::string& mentions) {
    const Status s = ValidateBenchHttpOptions(bad);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << mentions;
    EXPECT_NE(s.message().find(mentions), std::string::npos) << s.message();
  };
  BenchHttpOptions bad = o;
  bad.rate = 2;
  fails(bad, "exactly one of --rate");
  bad = o;
  bad.concurrency = 0;
  fails(bad, "exactly one of --rate");
  // A NaN or negative rate is named as such, not taken for "no rate".
  for (double rate : {std::nan(""), -1.0}) {
    bad = o;
    bad.concurrency = 0;
    bad.rate = rate;
    fails(bad, "--rate must be a positive number");
  }
  // So slow a rate is a typo that would wait for hours.
  bad = o;
  bad.concurrency = 0;
  bad.rate = 1e-300;
  fails(bad, "--rate must be at least 0.001");
  bad = o;
  bad.concurrency = -1;
  fails(bad, "--concurrency must be between 1 and");
  bad = o;
  bad.url = "ftp://x";
  fails(bad, "--url");
  bad.url = "http://";
  fails(bad, "no host");
  bad = o;
  bad.requests = 0;
  fails(bad, "--requests");
  bad = o;
  bad.prompt_len = "0";
  fails(bad, "--prompt-len");
  bad = o;
  bad.output_len = "5-2";
  fails(bad, "--output-len");
  bad = o;
  bad.timeout_s = 0;
  fails(bad, "--timeout-s");
  bad = o;
  bad.vocab_size = 3;
  fails(bad, "--vocab-size");
  bad = o;
  bad.report_split_at = -1;
  fails(bad, "--report-split-at");
  bad = o;
  bad.urgent_share = 1.5;
  bad.urgent_slo_ms = 100;
  fails(bad, "--urgent-share must be between 0 (off) and 1");
  bad.urgent_share = std::nan("");
  fails(bad, "--urgent-share must be between 0 (off) and 1");
  bad = o;
  bad.urgent_share = 0.5;
  fails(bad, "give --urgent-share and --urgent-slo-ms together");
  bad = o;
  bad.urgent_slo_ms = 100;
  fails(bad, "give --urgent-share and --urgent-slo-ms together");
}

TEST(HttpTargetTest, ParsesBaseUrls) {
  auto t = HttpTarget::Parse("http://127.0.0.1:8000/v1/");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->scheme_host_port, "http://127.0.0.1:8000");
  EXPECT_EQ(t->base_path, "");
  t = HttpTarget::Parse("https://example.com/proxy/v1");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->scheme_host_port, "https://example.com");
  EXPECT_EQ(t->base_path, "/proxy");
  EXPECT_FALSE(HttpTarget::Parse("127.0.0.1:8000").ok());
  EXPECT_FALSE(HttpTarget::Parse("http://:80").ok());
  EXPECT_FALSE(HttpTarget::Parse("http://h/x?y=1").ok());
  // The host and port too: each of these used to pass, and every request then failed to connect.
  for (const char* bad : {"http://127.0.0.1:8000?x=1", "http://127.0.0.1:99999", "http://127.0.0.1:8000x",
                          "http://127.0.0.1:", "http://127.0.0.1:0", "http://h#frag", "http://user@h:80",
                          "http://[::1", "http://[::1]x"}) {
    auto r = HttpTarget::Parse(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  for (const char* good : {"http://[::1]:8000/v1", "http://[::1]", "http://localhost", "https://h:65535"}) {
    EXPECT_TRUE(HttpTarget::Parse(good).ok()) << good;
  }
}

}  // namespace
}  // namespace bmad::client
