#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "common/metrics/metrics_server.h"
#include "common/metrics/registry.h"

namespace bmad::metrics {
namespace {

TEST(MetricsTest, NamesFollowTheRules) {
  Registry r;
  EXPECT_THROW(r.GetCounter("requests_total", "h"), std::invalid_argument);  // no prefix
  EXPECT_THROW(r.GetCounter("bmad_requests", "h"), std::invalid_argument);   // no _total
  EXPECT_THROW(r.GetHistogram("bmad_latency", "h", LatencySecondsBuckets()),
               std::invalid_argument);  // no unit
  EXPECT_THROW(r.GetGauge("bmad_bad-name", "h"), std::invalid_argument);
  EXPECT_THROW(r.GetGauge("bmad_x", "h", {{"__reserved", "1"}}), std::invalid_argument);
  EXPECT_NO_THROW(r.GetCounter("bmad_requests_total", "h"));
  EXPECT_THROW(r.GetGauge("bmad_requests_total", "h"), std::invalid_argument);  // type clash
  r.GetGauge("bmad_kv_usage_ratio", "h", {{"replica", "a"}});
  EXPECT_THROW(r.GetGauge("bmad_kv_usage_ratio", "h", {{"pool", "a"}}),
               std::invalid_argument);  // label names differ
}

TEST(MetricsTest, CompatibilityGaugesTakeOnlyVllmNames) {
  Registry r;
  r.GetCompatibilityGauge("vllm:num_requests_waiting", "h").Set(3);
  r.GetCompatibilityGauge("vllm:cache_config_info", "h", {{"block_size", "16"}}).Set(1);
  EXPECT_THROW(r.GetCompatibilityGauge("sglang:num_queue_reqs", "h"), std::invalid_argument);
  EXPECT_THROW(r.GetCompatibilityGauge("vllm:bad name", "h"), std::invalid_argument);
  const std::string text = r.RenderText();
  EXPECT_NE(text.find("vllm:num_requests_waiting 3"), std::string::npos) << text;
  EXPECT_NE(text.find("vllm:cache_config_info{block_size=\"16\"} 1"), std::string::npos) << text;
}

TEST(MetricsTest, SameNameAndLabelsIsTheSameObject) {
  Registry r;
  Counter& a = r.GetCounter("bmad_tokens_total", "h", {{"kind", "prompt"}});
  Counter& b = r.GetCounter("bmad_tokens_total", "h", {{"kind", "prompt"}});
  Counter& c = r.GetCounter("bmad_tokens_total", "h", {{"kind", "generation"}});
  EXPECT_EQ(&a, &b);
  EXPECT_NE(&a, &c);
}

TEST(MetricsTest, HistogramBucketsAreCumulativeAndLessOrEqual) {
  Histogram h({0.1, 1.0, 10.0});
  for (double v : {0.05, 0.1, 0.5, 1.0, 5.0, 50.0}) h.Observe(v);
  Histogram::Snapshot s = h.Read();
  EXPECT_EQ(s.cumulative_counts, (std::vector<uint64_t>{2, 4, 5, 6}));
  EXPECT_EQ(s.count, 6u);
  EXPECT_DOUBLE_EQ(s.sum, 56.65);
}

TEST(MetricsTest, AHistogramIgnoresNaNAndImpliesInfinity) {
  // +Inf among the bounds is the bucket every histogram has: listed once, not twice.
  Histogram h({1.0, std::numeric_limits<double>::infinity()});
  h.Observe(0.5);
  h.Observe(std::numeric_limits<double>::quiet_NaN());  // no bucket holds it; the sum stays a number
  h.Observe(std::numeric_limits<double>::infinity());
  Histogram::Snapshot s = h.Read();
  EXPECT_EQ(s.upper_bounds, (std::vector<double>{1.0}));
  EXPECT_EQ(s.cumulative_counts, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(s.count, 2u);
  EXPECT_FALSE(std::isnan(s.sum));
  EXPECT_THROW(Histogram({1.0, std::numeric_limits<double>::quiet_NaN()}), std::invalid_argument);

  Registry r;
  r.GetHistogram("bmad_x_seconds", "h", {0.5, std::numeric_limits<double>::infinity()}).Observe(0.2);
  const std::string text = r.RenderText();
  size_t infinities = 0;
  for (size_t at = text.find("le=\"+Inf\""); at != std::string::npos; at = text.find("le=\"+Inf\"", at + 1)) {
    ++infinities;
  }
  EXPECT_EQ(infinities, 1u) << text;
}

TEST(MetricsTest, AHistogramCannotTakeTheLabelItsBucketsUse) {
  Registry r;
  EXPECT_THROW(r.GetHistogram("bmad_x_seconds", "h", {1.0}, {{"le", "1"}}), std::invalid_argument);
  EXPECT_NO_THROW(r.GetGauge("bmad_le_ratio", "h", {{"le", "1"}}));  // only a histogram's own
}

TEST(MetricsTest, HelpTextIsEscaped) {
  // A newline in a HELP line would end it; the rest would be a line Prometheus cannot parse.
  Registry r;
  r.GetGauge("bmad_x_ratio", "first line\nsecond \\ end").Set(1);
  const std::string text = r.RenderText();
  EXPECT_NE(text.find("# HELP bmad_x_ratio first line\\nsecond \\\\ end\n"), std::string::npos) << text;
}

TEST(MetricsTest, RendersPrometheusText) {
  Registry r;
  r.GetCounter("bmad_requests_total", "Requests finished.", {{"status", "ok"}}).Increment(41);
  r.GetGauge("bmad_kv_usage_ratio", "KV usage.", {{"replica", "r0"}}).Set(0.25);
  Histogram& h = r.GetHistogram("bmad_ttft_seconds", "TTFT.", {0.5, 1.0});
  h.Observe(0.2);
  h.Observe(0.7);
  const std::string text = r.RenderText();
  EXPECT_NE(text.find("# TYPE bmad_requests_total counter"), std::string::npos) << text;
  EXPECT_NE(text.find("bmad_requests_total{status=\"ok\"} 41"), std::string::npos) << text;
  EXPECT_NE(text.find("bmad_kv_usage_ratio{replica=\"r0\"} 0.25"), std::string::npos) << text;
  EXPECT_NE(text.find("bmad_ttft_seconds_bucket{le=\"0.5\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("bmad_ttft_seconds_bucket{le=\"1\"} 2"), std::string::npos) << text;
  EXPECT_NE(text.find("bmad_ttft_seconds_bucket{le=\"+Inf\"} 2"), std::string::npos) << text;
  EXPECT_NE(text.find("bmad_ttft_seconds_count 2"), std::string::npos) << text;
}

TEST(MetricsTest, ConcurrentUpdatesAreNotLost) {
  Registry r;
  Counter& c = r.GetCounter("bmad_events_total", "h");
  Histogram& h = r.GetHistogram("bmad_sizes_tokens", "h", TokenCountBuckets());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50000; ++i) {
        c.Increment();
        h.Observe(static_cast<double>(i % 100));
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_DOUBLE_EQ(c.Value(), 200000.0);
  EXPECT_EQ(h.Read().count, 200000u);
}

TEST(RegistryTest, RemovesTheSeriesOfAGoneLabelValue) {
  Registry r;
  r.GetGauge("bmad_replica_up_ratio", "u", {{"replica", "a"}, {"pool", "normal"}}).Set(1);
  r.GetGauge("bmad_replica_up_ratio", "u", {{"replica", "a"}, {"pool", "long_tail"}}).Set(0);
  r.GetGauge("bmad_replica_up_ratio", "u", {{"replica", "b"}, {"pool", "normal"}}).Set(1);
  EXPECT_EQ(r.RemoveSeries("bmad_replica_up_ratio", "replica", "a"), 2u);
  EXPECT_EQ(r.RemoveSeries("bmad_no_such_ratio", "replica", "a"), 0u);
  const std::string text = r.RenderText();
  EXPECT_EQ(text.find("replica=\"a\""), std::string::npos) << text;
  EXPECT_NE(text.find("replica=\"b\""), std::string::npos) << text;
  // Asked for again, it starts afresh.
  EXPECT_EQ(r.GetGauge("bmad_replica_up_ratio", "u", {{"replica", "a"}, {"pool", "normal"}}).Value(), 0.0);
}

// Prometheus drops a whole scrape over one label value that is not UTF-8 (a replica id sent
// by a worker, a model's name from its file): such bytes are exported as the text \xNN (two
// values differing there stay two series), and a series is found and removed by the value it
// was made with.
TEST(RegistryTest, LabelValuesAreExportedAsValidUtf8) {
  Registry registry;
  registry.GetGauge("bmad_test_up_ratio", "Up.", {{"replica", "rep\xff"}}).Set(1);
  registry.GetGauge("bmad_test_up_ratio", "Up.", {{"replica", "rep\xfe"}}).Set(2);
  const std::string text = registry.RenderText();
  // The exposition escapes the backslash itself: \xFF in the value is \\xFF on the page.
  EXPECT_NE(text.find("bmad_test_up_ratio{replica=\"rep\\\\xFF\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("bmad_test_up_ratio{replica=\"rep\\\\xFE\"} 2"), std::string::npos) << text;
  EXPECT_EQ(text.find("\xff"), std::string::npos);
  EXPECT_EQ(registry.RemoveSeries("bmad_test_up_ratio", "replica", "rep\xff"), 1u);
  EXPECT_NE(registry.RenderText().find("rep\\\\xFE"), std::string::npos);
}

TEST(MetricsServerTest, ServesMetricsOnAPickedPort) {
  Registry r;
  r.GetCounter("bmad_hits_total", "h").Increment(3);
  MetricsServer server(r);
  ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
  ASSERT_GT(server.port(), 0);
  httplib::Client client("127.0.0.1", server.port());
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), kTextContentType);
  EXPECT_NE(res->body.find("bmad_hits_total 3"), std::string::npos);
  EXPECT_EQ(client.Get("/health")->status, 200);
  EXPECT_EQ(client.Get("/nope")->status, 404);

  // A second server on the same port fails with a clear error.
  MetricsServer clash(r);
  Status s = clash.Start("127.0.0.1", server.port());
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find(std::to_string(server.port())), std::string::npos);
  server.Stop();
}

TEST(MetricsServerTest, StopsRightAfterStartAndWhenNeverAsked) {
  // httplib's stop() is lost if it comes before the listen thread has run: Stop() used to rely
  // on Start() having waited (at most 2 s) for that, and a later join could wait for ever. A
  // watchdog turns a hang into a failure.
  Registry r;
  std::atomic<bool> finished{false};
  std::thread watchdog([&] {
    for (int i = 0; i < 600 && !finished.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!finished.load()) {
      std::fprintf(stderr, "MetricsServer::Stop hung\n");
      std::abort();
    }
  });
  for (int i = 0; i < 200; ++i) {
    MetricsServer server(r);
    ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
    if (i % 2 == 0) server.Stop();  // else the destructor stops it
  }
  // A server is reachable as soon as Start returns (its socket listens; the loop may start later).
  MetricsServer server(r);
  ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
  httplib::Client client("127.0.0.1", server.port());
  auto res = client.Get("/health");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  server.Stop();
  server.Stop();  // idempotent
  finished.store(true);
  watchdog.join();
}

}  // namespace
}  // namespace bmad::metrics
