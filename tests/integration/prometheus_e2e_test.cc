// Debian's real Prometheus scrapes an exporter built on common/metrics; the values come back
// through Prometheus's HTTP query API.
#include <gtest/gtest.h>
#include <httplib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "tests/support/free_port.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"

namespace bmad::testing {
namespace {

using namespace std::chrono_literals;

// Runs an instant query; returns the result array (empty when no data yet).
nlohmann::json Query(int prom_port, const std::string& promql) {
  httplib::Client client("127.0.0.1", prom_port);
  client.set_read_timeout(5, 0);
  httplib::Params params{{"query", promql}};
  auto res = client.Get("/api/v1/query", params, httplib::Headers{});
  if (!res || res->status != 200) return nlohmann::json::array();
  nlohmann::json body = nlohmann::json::parse(res->body, nullptr, false);
  if (body.is_discarded() || body.value("status", "") != "success") return nlohmann::json::array();
  return body["data"]["result"];
}

double ValueOf(const nlohmann::json& sample) {
  return std::stod(sample["value"][1].get<std::string>());
}

TEST(PrometheusE2E, ScrapesCounterLabelledGaugeAndHistogram) {
  const std::string dir = MakeTempDir("bmad-prom-");
  ChildProcess exporter;
  ASSERT_TRUE(exporter.Start({BinaryPath("bmad_test_exporter"), "--lifetime-s", "90"},
                             dir + "/exporter.log"))
      << exporter.error();
  int exporter_port = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        std::smatch m;
        const std::string log = exporter.ReadLog();
        if (std::regex_search(log, m, std::regex("port=(\\d+)"))) exporter_port = std::stoi(m[1]);
        return exporter_port > 0;
      },
      10s));

  const int prom_port = PickFreePort();
  {
    std::ofstream cfg(dir + "/prometheus.yml");
    cfg << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        << "scrape_configs:\n  - job_name: bmad_test\n    static_configs:\n"
        << "      - targets: ['127.0.0.1:" << exporter_port << "']\n";
  }
  ChildProcess prometheus;
  ASSERT_TRUE(prometheus.Start({"prometheus", "--config.file=" + dir + "/prometheus.yml",
                                "--storage.tsdb.path=" + dir + "/data",
                                "--web.listen-address=127.0.0.1:" + std::to_string(prom_port),
                                "--log.level=warn"},
                               dir + "/prometheus.log"))
      << prometheus.error() << " (is Debian's prometheus package installed?)";

  // The first sample appears about 5.5 s after start; allow 30 s.
  nlohmann::json counter;
  ASSERT_TRUE(WaitFor(
      [&] {
        counter = Query(prom_port, "bmad_test_requests_total{job=\"bmad_test\"}");
        return !counter.empty();
      },
      30s, 200ms))
      << "no sample scraped; prometheus log:\n"
      << prometheus.ReadLog();
  EXPECT_DOUBLE_EQ(ValueOf(counter[0]), 41.0);

  nlohmann::json gauge = Query(prom_port, "bmad_test_queue_depth{replica=\"r1\"}");
  ASSERT_EQ(gauge.size(), 1u);
  EXPECT_DOUBLE_EQ(ValueOf(gauge[0]), 7.0);
  EXPECT_EQ(gauge[0]["metric"]["replica"], "r1");

  nlohmann::json median =
      Query(prom_port, "histogram_quantile(0.5, sum by (le) (bmad_test_latency_seconds_bucket))");
  ASSERT_EQ(median.size(), 1u);
  EXPECT_NEAR(ValueOf(median[0]), 0.5, 0.01);
  nlohmann::json p90 =
      Query(prom_port, "histogram_quantile(0.9, sum by (le) (bmad_test_latency_seconds_bucket))");
  ASSERT_EQ(p90.size(), 1u);
  EXPECT_NEAR(ValueOf(p90[0]), 0.9, 0.01);

  prometheus.Stop();
  exporter.Stop();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace bmad::testing
