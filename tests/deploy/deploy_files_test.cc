// The deployment files that need no cluster: the Grafana dashboards (Grafana 10+ schema, a
// templated Prometheus data source, the panels the operations guide describes), their copy in
// the Helm chart, the provisioning files, the Prometheus config (promtool), and the Dockerfile
// (it builds what ./tests/run.sh builds).
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "tests/deploy/deploy_test_util.h"
#include "tests/support/paths.h"

namespace bmad::testing {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

const std::string kSource = BMAD_SOURCE_DIR;
const std::string kDashboards = kSource + "/deploy/grafana/dashboards";

json LoadDashboard(const std::string& name) {
  json d = json::parse(ReadTextFile(kDashboards + "/" + name), nullptr, false);
  EXPECT_FALSE(d.is_discarded()) << name << " is not JSON";
  return d;
}

// Every PromQL expression of a dashboard, joined.
std::string AllExpressions(const json& dashboard) {
  std::string all;
  for (const json& p : AllPanels(dashboard)) {
    if (!p.contains("targets")) continue;
    for (const json& t : p["targets"]) all += t.value("expr", "") + "\n";
  }
  return all;
}

TEST(DeployFilesTest, ChartDashboardsAreIdenticalToDeployDashboards) {
  const std::vector<std::string> deploy = DashboardFiles(kDashboards);
  const std::vector<std::string> chart = DashboardFiles(kSource + "/helm/bmad/dashboards");
  ASSERT_EQ(deploy.size(), 3u);
  ASSERT_EQ(chart.size(), deploy.size()) << "helm/bmad/dashboards must hold a copy of each dashboard";
  for (size_t i = 0; i < deploy.size(); ++i) {
    const std::string name = std::filesystem::path(deploy[i]).filename().string();
    EXPECT_EQ(std::filesystem::path(chart[i]).filename().string(), name);
    EXPECT_TRUE(ReadTextFile(deploy[i]) == ReadTextFile(chart[i]))
        << "helm/bmad/dashboards/" << name << " differs from deploy/grafana/dashboards/" << name
        << ": cp deploy/grafana/dashboards/*.json helm/bmad/dashboards/";
  }
}

TEST(DeployFilesTest, DashboardsAreGrafanaTenWithATemplatedPrometheusDatasource) {
  std::set<std::string> uids;
  for (const std::string& file : DashboardFiles(kDashboards)) {
    const std::string name = std::filesystem::path(file).filename().string();
    const json d = LoadDashboard(name);
    ASSERT_TRUE(d.is_object()) << name;
    EXPECT_GE(d.value("schemaVersion", 0), 36) << name << ": Grafana 10 writes schemaVersion 36 or later";
    EXPECT_TRUE(uids.insert(d.value("uid", "")).second) << name << ": uid missing or not unique";
    EXPECT_FALSE(d.value("title", "").empty()) << name;
    EXPECT_TRUE(d["id"].is_null()) << name << ": provisioned dashboards carry no database id";

    bool datasource_var = false;
    for (const json& v : d["templating"]["list"]) {
      if (v.value("name", "") == "datasource") {
        datasource_var = v.value("type", "") == "datasource" && v.value("query", "") == "prometheus";
      } else if (v.value("type", "") == "query") {
        EXPECT_EQ(v["datasource"]["uid"], "${datasource}") << name << " variable " << v.value("name", "");
      }
    }
    EXPECT_TRUE(datasource_var) << name << ": needs a `datasource` variable of type datasource, query prometheus";

    std::set<int> ids;
    for (const json& p : AllPanels(d)) {
      const std::string title = p.value("title", "");
      EXPECT_FALSE(title.empty()) << name << ": a panel without a title";
      EXPECT_TRUE(ids.insert(p.value("id", -1)).second) << name << " / " << title << ": panel id not unique";
      ASSERT_TRUE(p.contains("gridPos")) << name << " / " << title;
      for (const char* k : {"h", "w", "x", "y"}) EXPECT_TRUE(p["gridPos"].contains(k)) << name << " / " << title;
      EXPECT_LE(p["gridPos"].value("x", 0) + p["gridPos"].value("w", 0), 24) << name << " / " << title;
      if (p.value("type", "") == "row") continue;
      EXPECT_FALSE(p.value("description", "").empty()) << name << " / " << title << ": describe the panel";
      EXPECT_EQ(p["datasource"]["type"], "prometheus") << name << " / " << title;
      EXPECT_EQ(p["datasource"]["uid"], "${datasource}") << name << " / " << title;
      ASSERT_TRUE(p.contains("targets") && !p["targets"].empty()) << name << " / " << title;
      std::set<std::string> refs;
      for (const json& t : p["targets"]) {
        EXPECT_FALSE(t.value("expr", "").empty()) << name << " / " << title;
        EXPECT_EQ(t["datasource"]["uid"], "${datasource}") << name << " / " << title;
        EXPECT_TRUE(refs.insert(t.value("refId", "")).second) << name << " / " << title << ": refId not unique";
      }
    }
  }
}

TEST(DeployFilesTest, DashboardsShowWhatTheOperationsGuideDescribes) {
  // The panels the deployment issue asks for, by the metrics they read.
  const std::map<std::string, std::vector<std::string>> wanted = {
      {"cluster-overview.json",
       {"bmad_coordinator_requests_total", "bmad_coordinator_generation_tokens_total",
        "histogram_quantile(0.5, sum by (le) (rate(bmad_coordinator_time_to_first_token_seconds_bucket",
        "histogram_quantile(0.99, sum by (le) (rate(bmad_coordinator_time_to_first_token_seconds_bucket",
        "bmad_coordinator_inter_token_latency_seconds_bucket", "bmad_coordinator_e2e_request_latency_seconds_bucket",
        "bmad_coordinator_queue_depth", "bmad_coordinator_rejections_total", "bmad_coordinator_migrations_total",
        "bmad_coordinator_live_replicas"}},
      {"worker.json",
       {"bmad_worker_batch_size_sequences", "bmad_worker_step_seconds", "bmad_worker_kv_usage_ratio",
        "bmad_worker_prefix_cache_hits_total", "bmad_worker_preemptions_total", "bmad_worker_system_allocations",
        "bmad_comm_seconds"}},
      {"router.json",
       {"sum by (policy) (rate(bmad_coordinator_requests_routed_total", "sum by (pool) (rate(bmad_coordinator_requests_routed_total",
        "bmad_coordinator_long_tail_requests_total", "bmad_coordinator_replica_load_ratio",
        "bmad_coordinator_replica_weight_ratio"}}};
  const std::string guide = ReadTextFile(kSource + "/docs/operations.md");
  for (const auto& [name, metrics] : wanted) {
    const json d = LoadDashboard(name);
    const std::string exprs = AllExpressions(d);
    for (const std::string& m : metrics) EXPECT_NE(exprs.find(m), std::string::npos) << name << " has no panel on " << m;
    // docs/operations.md describes every panel, by its title.
    for (const json& p : AllPanels(d)) {
      if (p.value("type", "") == "row") continue;
      EXPECT_NE(guide.find("**" + p.value("title", "") + "**"), std::string::npos)
          << "docs/operations.md does not describe panel \"" << p.value("title", "") << "\" of " << name;
    }
  }
}

TEST(DeployFilesTest, GrafanaProvisioningPointsAtPrometheusAndTheDashboards) {
  const YAML::Node ds = YAML::LoadFile(kSource + "/deploy/grafana/provisioning/datasources/bmad-prometheus.yaml");
  ASSERT_TRUE(ds["datasources"] && ds["datasources"].size() == 1);
  EXPECT_EQ(ds["datasources"][0]["type"].as<std::string>(), "prometheus");
  const YAML::Node dash = YAML::LoadFile(kSource + "/deploy/grafana/provisioning/dashboards/bmad.yaml");
  ASSERT_TRUE(dash["providers"] && dash["providers"].size() == 1);
  EXPECT_EQ(dash["providers"][0]["type"].as<std::string>(), "file");
  EXPECT_FALSE(dash["providers"][0]["options"]["path"].as<std::string>().empty());
}

TEST(DeployFilesTest, PrometheusConfigIsValidAndScrapesCoordinatorAndWorkers) {
  CommandResult r = RunCommand({"promtool", "check", "config", kSource + "/deploy/prometheus/prometheus.yml"}, 60s);
  EXPECT_EQ(r.status, 0) << r.out << r.err << " (promtool comes with Debian's prometheus package)";
  const YAML::Node config = YAML::LoadFile(kSource + "/deploy/prometheus/prometheus.yml");
  std::set<std::string> jobs;
  for (const YAML::Node& job : config["scrape_configs"]) jobs.insert(job["job_name"].as<std::string>());
  EXPECT_EQ(jobs, (std::set<std::string>{"bmad-coordinator", "bmad-worker"}));
  // The targets are those of deploy/config/local.yaml: coordinator_port, worker_port + i.
  const YAML::Node local = YAML::LoadFile(kSource + "/deploy/config/local.yaml");
  const std::string prom = ReadTextFile(kSource + "/deploy/prometheus/prometheus.yml");
  const int coordinator = local["metrics"]["coordinator_port"].as<int>();
  const int worker = local["metrics"]["worker_port"].as<int>();
  const int replicas = local["cluster"]["normal_replicas"].as<int>() + local["cluster"]["long_tail_replicas"].as<int>();
  EXPECT_NE(prom.find("'127.0.0.1:" + std::to_string(coordinator) + "'"), std::string::npos);
  for (int i = 0; i < replicas; ++i) {
    EXPECT_NE(prom.find("'127.0.0.1:" + std::to_string(worker + i) + "'"), std::string::npos) << "replica " << i;
  }
}

// The -D options of the first `cmake -S . -B build` in a file, as name -> value.
std::map<std::string, std::string> CmakeOptions(const std::string& text) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(text, m, std::regex(R"(cmake -S \. -B build((?: +-D[A-Za-z_]+=[^ \\\n>]+)+))")))
      << "no `cmake -S . -B build -D...` line";
  std::map<std::string, std::string> options;
  const std::string flags = m.size() > 1 ? m[1].str() : "";
  const std::regex option(R"(-D([A-Za-z_]+)=("?)([^" ]*)\2)");
  for (auto it = std::sregex_iterator(flags.begin(), flags.end(), option); it != std::sregex_iterator(); ++it) {
    options[(*it)[1].str()] = (*it)[3].str();
  }
  return options;
}

TEST(DeployFilesTest, DockerfileBuildsWhatRunShBuilds) {
  const std::string run_sh = ReadTextFile(kSource + "/tests/run.sh");
  const std::string dockerfile = ReadTextFile(kSource + "/deploy/Dockerfile");
  std::map<std::string, std::string> release = CmakeOptions(run_sh);
  std::map<std::string, std::string> image = CmakeOptions(dockerfile);
  ASSERT_TRUE(release.count("BMAD_CUDA")) << "tests/run.sh no longer passes BMAD_CUDA";
  EXPECT_EQ(image["BMAD_CUDA"], "ON") << "the image must build the CUDA backend";
  release.erase("BMAD_CUDA");
  image.erase("BMAD_CUDA");
  EXPECT_EQ(image, release) << "deploy/Dockerfile's cmake options differ from tests/run.sh's release build";
  EXPECT_EQ(release["CMAKE_BUILD_TYPE"], "Release");
  // The same targets (all of them), and the GPU architectures cmake/BmadCuda.cmake ships.
  EXPECT_NE(run_sh.find("cmake --build build -j"), std::string::npos);
  EXPECT_NE(dockerfile.find("cmake --build build -j"), std::string::npos);
  EXPECT_EQ(dockerfile.find("--target"), std::string::npos) << "build every target, as run.sh does";
  EXPECT_EQ(dockerfile.find("CMAKE_CUDA_ARCHITECTURES"), std::string::npos)
      << "the architectures come from cmake/BmadCuda.cmake";
  EXPECT_NE(ReadTextFile(kSource + "/cmake/BmadCuda.cmake").find("set(CMAKE_CUDA_ARCHITECTURES 80 90)"),
            std::string::npos)
      << "sm_80 and sm_90";
  // The same packages as run.sh (deploy/install-deps.sh), a CUDA base, Open MPI, the programs.
  EXPECT_NE(run_sh.find("./deploy/install-deps.sh"), std::string::npos);
  EXPECT_NE(dockerfile.find("./deploy/install-deps.sh --build-only"), std::string::npos);
  EXPECT_TRUE(std::regex_search(dockerfile, std::regex(R"(FROM nvidia/cuda:\$\{CUDA_VERSION\}-runtime-)")));
  EXPECT_TRUE(std::regex_search(dockerfile, std::regex(R"(ARG CUDA_VERSION=1[3-9]\.)")));
  EXPECT_NE(dockerfile.find("openmpi-bin"), std::string::npos);
  EXPECT_NE(dockerfile.find("openssh-server"), std::string::npos) << "multi-pod replicas: mpirun over ssh";
  for (const char* program : {"build/bin/bmad ", "build/bin/bmad-coordinator", "build/bin/bmad-worker"}) {
    EXPECT_NE(dockerfile.find(program), std::string::npos) << program;
  }
  // Every package the build list names is one run.sh installs too.
  CommandResult all = RunCommand({kSource + "/deploy/install-deps.sh", "--list"}, 30s);
  CommandResult build = RunCommand({kSource + "/deploy/install-deps.sh", "--list", "--build-only"}, 30s);
  ASSERT_EQ(all.status, 0) << all.err;
  ASSERT_EQ(build.status, 0) << build.err;
  std::istringstream in(build.out);
  for (std::string p; in >> p;) EXPECT_NE(all.out.find(p + "\n"), std::string::npos) << p;
}

TEST(DeployFilesTest, ChartCommandsAndPortsMatchTheImage) {
  // The chart runs the programs the image installs on PATH, and the image exposes its ports.
  const YAML::Node values = YAML::LoadFile(kSource + "/helm/bmad/values.yaml");
  const std::string dockerfile = ReadTextFile(kSource + "/deploy/Dockerfile");
  EXPECT_NE(dockerfile.find("/usr/local/bin/"), std::string::npos);
  for (const char* port : {"http", "client", "worker", "coordinatorMetrics", "workerMetrics", "ssh"}) {
    const std::string p = values["ports"][port].as<std::string>();
    EXPECT_TRUE(std::regex_search(dockerfile, std::regex("EXPOSE .*\\b" + p + "\\b"))) << port << " " << p;
  }
}

TEST(DeployFilesTest, TheImagesDefaultCommandSucceeds) {
  // `docker run IMAGE` with no command used to run a bare `bmad`, which prints its usage and
  // exits 2: the container looked failed. Its CMD runs here, on the programs the image installs.
  const std::string dockerfile = ReadTextFile(kSource + "/deploy/Dockerfile");
  std::smatch cmd;
  ASSERT_TRUE(std::regex_search(dockerfile, cmd, std::regex("\nCMD \\[(.*)\\]\\s*$")));
  const json words = json::parse("[" + cmd[1].str() + "]", nullptr, false);
  ASSERT_TRUE(words.is_array() && !words.empty()) << cmd[1];
  std::vector<std::string> argv;
  for (const json& w : words) argv.push_back(w.get<std::string>());
  argv[0] = BinaryPath(argv[0]);
  CommandResult run = RunCommand(argv, 30s);
  EXPECT_EQ(run.status, 0) << cmd[1] << "\n" << run.out << run.err;
  EXPECT_NE(run.out.find("usage: bmad"), std::string::npos) << run.out;
}

}  // namespace
}  // namespace bmad::testing
