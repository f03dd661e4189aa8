// The Grafana dashboards checked against a real Prometheus scraping a real cluster: the
// cluster of deploy/config/local.yaml, started by deploy/cluster.sh (coordinator, a normal and a
// long-tail replica, each its own `mpirun -np 2` job with tensor parallelism 2, so the
// communicator's metrics flow too), serves a bounded load; Debian's prometheus scrapes it with
// deploy/prometheus/prometheus.yml (targets and interval rewritten to this test's); then every
// PromQL expression of every panel of every dashboard in deploy/grafana/dashboards/ (rows'
// nested panels included) and every template variable's query is evaluated through
// Prometheus's query API. Each must parse and return data; a panel that would show "No data"
// fails the test with its dashboard, title and query. The targets carry a namespace label, as a
// ServiceMonitor's do: every query also returns data with the $namespace variable set to it,
// and none with another namespace (no panel mixes in another deployment's series). Everything binds 127.0.0.1, on ports the
// test picks, and is stopped at the end, also on failure.
#include <gtest/gtest.h>
#include <httplib.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "tests/support/free_port.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"

namespace bmad::testing {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

const std::string kSource = BMAD_SOURCE_DIR;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// One instant query. `error` is set when Prometheus refuses it (parse error) or is unreachable.
json Query(int prom_port, const std::string& promql, std::string* error) {
  httplib::Client client("127.0.0.1", prom_port);
  client.set_connection_timeout(2, 0);
  client.set_read_timeout(10, 0);
  auto res = client.Post("/api/v1/query", httplib::Params{{"query", promql}});
  if (!res) {
    *error = "prometheus unreachable";
    return json();
  }
  json body = json::parse(res->body, nullptr, false);
  if (body.is_discarded()) {
    *error = "HTTP " + std::to_string(res->status) + ", not JSON: " + res->body;
    return json();
  }
  if (body.value("status", "") != "success") {
    *error = body.value("errorType", "error") + ": " + body.value("error", res->body);
    return json();
  }
  error->clear();
  return body["data"];
}

// Number of samples in a query's data (a scalar counts as one).
size_t Samples(const json& data) {
  if (!data.is_object()) return 0;
  if (data.value("resultType", "") == "scalar" || data.value("resultType", "") == "string") return 1;
  return data.contains("result") && data["result"].is_array() ? data["result"].size() : 0;
}

double ScalarOf(int prom_port, const std::string& promql) {
  std::string error;
  json data = Query(prom_port, promql, &error);
  if (Samples(data) == 0 || data.value("resultType", "") != "vector") return -1;
  return std::stod(data["result"][0]["value"][1].get<std::string>());
}

// The namespace label the test's targets get, as a ServiceMonitor's targets in Kubernetes do.
const std::string kNamespace = "bmad-e2e";

// deploy/prometheus/prometheus.yml with this test's targets: the coordinator job scrapes the
// coordinator, the worker job every replica, every second, each target labelled with
// kNamespace. Fails when a job is missing.
std::string RewritePrometheusConfig(const std::string& coordinator_target,
                                    const std::vector<std::string>& worker_targets) {
  YAML::Node config = YAML::LoadFile(kSource + "/deploy/prometheus/prometheus.yml");
  config["global"]["scrape_interval"] = "1s";
  config["global"]["evaluation_interval"] = "1s";
  config["global"]["scrape_timeout"] = "1s";
  bool coordinator = false, worker = false;
  for (YAML::Node job : config["scrape_configs"]) {
    const std::string name = job["job_name"].as<std::string>();
    std::vector<std::string> targets;
    if (name == "bmad-coordinator") {
      targets = {coordinator_target};
      coordinator = true;
    } else if (name == "bmad-worker") {
      targets = worker_targets;
      worker = true;
    } else {
      continue;
    }
    YAML::Node labels;
    if (job["static_configs"] && job["static_configs"][0]["labels"]) {
      labels = job["static_configs"][0]["labels"];
    }
    labels["namespace"] = kNamespace;
    YAML::Node static_config;
    static_config["targets"] = targets;
    static_config["labels"] = labels;
    YAML::Node list(YAML::NodeType::Sequence);
    list.push_back(static_config);
    job["static_configs"] = list;
    job.remove("file_sd_configs");
  }
  EXPECT_TRUE(coordinator) << "deploy/prometheus/prometheus.yml has no bmad-coordinator job";
  EXPECT_TRUE(worker) << "deploy/prometheus/prometheus.yml has no bmad-worker job";
  YAML::Emitter out;
  out << config;
  return out.c_str();
}

// Whatever happens, nothing deploy/cluster.sh started outlives the test.
struct StopClusterOnExit {
  std::string state;
  ~StopClusterOnExit() {
    ChildProcess stop;
    if (stop.Start({kSource + "/deploy/cluster.sh", "stop", "--state", state}, state + "-stop.log")) {
      stop.Wait(60s);
    }
  }
};

// A query as Grafana sends it for one selection of the $namespace variable: `expr` with every
// other variable at its default, `in_namespace` with $namespace set to kNamespace,
// `elsewhere` set to a namespace nothing runs in.
struct PanelQuery {
  std::string dashboard, panel, ref, expr, in_namespace, elsewhere;
};

// Grafana's built-in intervals and each dashboard's template variables, replaced by what
// Grafana would send for the default selection (every replica: the variable's allValue), or by
// `namespace` for $namespace when given.
std::string Substitute(std::string expr, const json& dashboard, const std::string& namespace_value = "") {
  const std::vector<std::pair<std::string, std::string>> builtins = {
      {"$__rate_interval", "1m"}, {"${__rate_interval}", "1m"}, {"$__interval", "15s"},
      {"${__interval}", "15s"},   {"$__range", "5m"},          {"${__range}", "5m"}};
  for (const auto& [from, to] : builtins) {
    for (size_t p; (p = expr.find(from)) != std::string::npos;) expr.replace(p, from.size(), to);
  }
  if (dashboard.contains("templating")) {
    for (const json& v : dashboard["templating"]["list"]) {
      const std::string name = v.value("name", "");
      const std::string value =
          name == "namespace" && !namespace_value.empty() ? namespace_value : v.value("allValue", ".*");
      for (const std::string& form : {"${" + name + ":regex}", "${" + name + "}", "$" + name}) {
        for (size_t p; (p = expr.find(form)) != std::string::npos;) expr.replace(p, form.size(), value);
      }
    }
  }
  return expr;
}

void CollectPanels(const json& panels, const std::string& dashboard, const json& dash_json,
                   std::vector<PanelQuery>* out) {
  for (const json& panel : panels) {
    if (panel.contains("panels")) CollectPanels(panel["panels"], dashboard, dash_json, out);
    if (!panel.contains("targets")) continue;
    for (const json& target : panel["targets"]) {
      if (!target.contains("expr")) continue;
      const std::string expr = target["expr"].get<std::string>();
      out->push_back({dashboard, panel.value("title", "(untitled)"), target.value("refId", "?"),
                      Substitute(expr, dash_json), Substitute(expr, dash_json, kNamespace),
                      Substitute(expr, dash_json, "elsewhere")});
    }
  }
}

// Every panel query, and every template variable's label_values(metric, label) as the PromQL
// that returns the same label values.
std::vector<PanelQuery> DashboardQueries() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(kSource + "/deploy/grafana/dashboards")) {
    if (e.path().extension() == ".json") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files.size(), 3u) << "expected cluster-overview, worker and router dashboards";
  std::vector<PanelQuery> queries;
  for (const std::string& file : files) {
    json dash = json::parse(ReadFile(file), nullptr, false);
    const std::string name = std::filesystem::path(file).filename().string();
    if (dash.is_discarded()) {
      ADD_FAILURE() << name << " is not valid JSON";
      continue;
    }
    const size_t before = queries.size();
    CollectPanels(dash["panels"], name, dash, &queries);
    EXPECT_GT(queries.size(), before) << name << " has no PromQL queries";
    // Every selector of every panel is filtered by the namespace (checked with data below).
    for (size_t i = before; i < queries.size(); ++i) {
      const std::regex selector(R"(\bbmad_\w+)"), filtered(R"(\bbmad_\w+\{namespace=~"bmad-e2e")");
      const auto count = [](const std::string& text, const std::regex& re) {
        return std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator());
      };
      EXPECT_EQ(count(queries[i].in_namespace, selector), count(queries[i].in_namespace, filtered))
          << name << " / " << queries[i].panel << ": a selector without the $namespace filter: " << queries[i].expr;
    }
    for (const json& v : dash["templating"]["list"]) {
      if (v.value("type", "") != "query") continue;
      const std::string q = v["query"].is_object() ? v["query"].value("query", "") : v["query"].get<std::string>();
      std::smatch m;
      const std::regex label_values(R"(^\s*label_values\((.+),\s*(\w+)\)\s*$)");
      if (std::regex_match(q, m, label_values)) {
        const auto count = [&](const std::string& namespace_value) {
          return "count by (" + m[2].str() + ") (" + Substitute(m[1].str(), dash, namespace_value) + ")";
        };
        queries.push_back({name, "variable $" + v.value("name", ""), "-", count(""), count(kNamespace),
                           count(v.value("name", "") == "namespace" ? "" : "elsewhere")});
      } else {
        ADD_FAILURE() << name << ": variable " << v.value("name", "") << " has a query this test "
                      << "cannot check: " << q;
      }
    }
  }
  return queries;
}

struct HttpResult {
  int status = 0;
  std::string body;
};

HttpResult Post(int port, const std::string& path, const json& body) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60, 0);
  auto res = c.Post(path.c_str(), body.dump(), "application/json");
  if (!res) return {};
  return {res->status, res->body};
}

TEST(DashboardsE2E, EveryPanelQueryReturnsDataFromARealPrometheus) {
  const std::vector<PanelQuery> queries = DashboardQueries();
  ASSERT_FALSE(queries.empty());

  const std::string dir = MakeTempDir("bmad-dashboards-");
  const std::string state = dir + "/cluster";
  StopClusterOnExit guard{state};
  const int port = PickFreePort(), coordinator_metrics = PickFreePort();
  const int worker_metrics = PickFreePorts(2);  // replica i serves on worker_metrics + i
  // deploy/config/local.yaml (one normal, one long-tail replica) on this test's ports, each
  // replica two tensor-parallel ranks; the long-tail quantile is live after 4 prompts.
  std::vector<std::string> start = {
      kSource + "/deploy/cluster.sh", "start", "--config", kSource + "/deploy/config/local.yaml",
      "--state", state, "--bin", BinaryPath("bmad").substr(0, BinaryPath("bmad").rfind('/'))};
  for (const std::string& set :
       {"model.path=" + SharedModelsDir() + "/stories260K.gguf", "coordinator.http_port=" + std::to_string(port),
        "coordinator.client_endpoint=tcp://127.0.0.1:" + std::to_string(PickFreePort()),
        "coordinator.worker_endpoint=tcp://127.0.0.1:" + std::to_string(PickFreePort()),
        "metrics.coordinator_port=" + std::to_string(coordinator_metrics),
        "metrics.worker_port=" + std::to_string(worker_metrics), std::string("parallel.tp=2"),
        std::string("router.long_tail_min_samples=4"), std::string("router.long_tail_window=16"),
        std::string("worker.heartbeat_ms=50")}) {
    start.insert(start.end(), {"--set", set});
  }
  {
    ChildProcess launcher;
    ASSERT_TRUE(launcher.Start(start, dir + "/cluster.log", {{"OPENBLAS_NUM_THREADS", "1"}})) << launcher.error();
    auto status = launcher.Wait(60s);
    ASSERT_TRUE(status.has_value() && *status == 0) << launcher.ReadLog();
  }
  auto coordinator_metrics_text = [&] {
    httplib::Client c("127.0.0.1", port);
    c.set_connection_timeout(1, 0);
    c.set_read_timeout(5, 0);
    auto res = c.Get("/metrics");
    return res ? res->body : std::string();
  };
  ASSERT_TRUE(WaitFor(
      [&] {
        return coordinator_metrics_text().find("\nbmad_coordinator_live_replicas 2\n") != std::string::npos;
      },
      90s, 200ms))
      << "the cluster did not come up; logs in " << state << ":\n"
      << ReadFile(state + "/coordinator.log") << ReadFile(state + "/replica-normal-0.log")
      << ReadFile(state + "/replica-long_tail-0.log");

  const int prom_port = PickFreePort();
  {
    std::ofstream cfg(dir + "/prometheus.yml");
    cfg << RewritePrometheusConfig("127.0.0.1:" + std::to_string(coordinator_metrics),
                                   {"127.0.0.1:" + std::to_string(worker_metrics),
                                    "127.0.0.1:" + std::to_string(worker_metrics + 1)});
  }
  ChildProcess prometheus;
  ASSERT_TRUE(prometheus.Start({"prometheus", "--config.file=" + dir + "/prometheus.yml",
                                "--storage.tsdb.path=" + dir + "/data",
                                "--web.listen-address=127.0.0.1:" + std::to_string(prom_port),
                                "--log.level=warn"},
                               dir + "/prometheus.log"))
      << prometheus.error() << " (is Debian's prometheus package installed?)";
  // Every target up, and a first scrape of every target before any request (so counters have
  // a zero sample to rate from).
  ASSERT_TRUE(WaitFor([&] { return ScalarOf(prom_port, "count(up == 1)") == 3; }, 45s, 250ms))
      << "prometheus did not scrape all three targets; its log:\n"
      << prometheus.ReadLog() << "\nconfig:\n"
      << ReadFile(dir + "/prometheus.yml");

  // The bounded load: short prompts (seeding the length window), streaming completions and a
  // streaming chat, two long prompts sharing a prefix (long-tail, a prefix-cache hit), and one
  // request refused as invalid.
  int sent = 0;
  for (const char* prompt : {"Once upon a time", "The little dog", "Lily had a toy", "Tom ran"}) {
    HttpResult r = Post(port, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 8}, {"temperature", 0}});
    EXPECT_EQ(r.status, 200) << r.body;
    ++sent;
  }
  for (const char* prompt : {"One day the sun", "A big red ball"}) {
    HttpResult r = Post(port, "/v1/completions",
                        {{"prompt", prompt}, {"max_tokens", 16}, {"temperature", 0}, {"stream", true},
                         {"ignore_eos", true}, {"stream_options", {{"include_usage", true}}}});
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.body.find("[DONE]"), std::string::npos) << r.body;
    ++sent;
  }
  {
    HttpResult r = Post(port, "/v1/chat/completions",
                        {{"messages", {{{"role", "user"}, {"content", "Tell me a story."}}}},
                         {"max_tokens", 8}, {"stream", true}});
    EXPECT_EQ(r.status, 200) << r.body;
    ++sent;
  }
  const std::string shared =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park "
      "with her friends and her big red ball. ";
  for (const char* tail : {"One day", "The next day"}) {
    HttpResult r = Post(port, "/v1/completions", {{"prompt", shared + tail}, {"max_tokens", 8}, {"temperature", 0}});
    EXPECT_EQ(r.status, 200) << r.body;
    ++sent;
  }
  {
    HttpResult r = Post(port, "/v1/completions", {{"prompt", "hi"}, {"model", "no-such-model"}});
    EXPECT_EQ(r.status, 404) << r.body;
    ++sent;
  }

  // Wait until Prometheus has the whole load, then two more scrapes.
  ASSERT_TRUE(WaitFor(
      [&] {
        return ScalarOf(prom_port, "sum(bmad_coordinator_requests_total)") == sent &&
               ScalarOf(prom_port, "sum(bmad_coordinator_requests_finished_total)") == sent - 1 &&
               ScalarOf(prom_port, "sum(bmad_worker_requests_finished_total)") == sent - 1;
      },
      30s, 250ms))
      << "prometheus never saw the whole load; coordinator /metrics:\n"
      << coordinator_metrics_text();
  std::this_thread::sleep_for(2500ms);

  // Counters with known labels exist before their first event (no panel goes blank for that).
  EXPECT_EQ(ScalarOf(prom_port, "sum(bmad_coordinator_rejections_total{reason=\"overloaded\"})"), 0);
  EXPECT_EQ(ScalarOf(prom_port, "sum(bmad_coordinator_requests_finished_total{status=\"error\"})"), 0);
  // The load reached both pools and the prefix cache (else the test would prove less).
  EXPECT_GT(ScalarOf(prom_port, "sum(bmad_coordinator_long_tail_requests_total)"), 0);
  EXPECT_GT(ScalarOf(prom_port, "sum(bmad_worker_prefix_cache_hits_total)"), 0);
  EXPECT_GT(ScalarOf(prom_port, "sum(bmad_comm_seconds_count{op=\"all_reduce\"})"), 0)
      << "tensor-parallel replicas report their all-reduces";

  std::vector<std::string> failures;
  std::string error;
  for (const PanelQuery& q : queries) {
    const std::string where = q.dashboard + " / " + q.panel + " [" + q.ref + "]";
    if (q.expr.find('$') != std::string::npos) {
      failures.push_back(where + ": unknown variable in " + q.expr);
      continue;
    }
    // Every namespace (the default), this deployment's: data; another one's: none.
    for (const std::string* expr : {&q.expr, &q.in_namespace, &q.elsewhere}) {
      json data = Query(prom_port, *expr, &error);
      if (!error.empty()) {
        failures.push_back(where + ": query failed (" + error + "): " + *expr);
      } else if (expr == &q.elsewhere && *expr != q.expr && Samples(data) != 0) {
        failures.push_back(where + ": data from outside the selected namespace: " + *expr);
      } else if (expr != &q.elsewhere && Samples(data) == 0) {
        failures.push_back(where + ": no data: " + *expr);
      }
    }
  }
  std::string report;
  for (const std::string& f : failures) report += "  " + f + "\n";
  EXPECT_TRUE(failures.empty()) << failures.size() << " of " << queries.size()
                                << " dashboard queries failed:\n"
                                << report;
  std::cout << "checked " << queries.size() << " dashboard queries against prometheus\n";

  prometheus.Stop();
  ChildProcess stop;
  ASSERT_TRUE(stop.Start({kSource + "/deploy/cluster.sh", "stop", "--state", state}, dir + "/stop.log"));
  EXPECT_EQ(stop.Wait(60s), 0) << stop.ReadLog();
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace bmad::testing
