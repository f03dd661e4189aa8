// Small helpers shared by the deployment tests: run a command with its output in files, read a
// file, walk Grafana dashboards.
#pragma once

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

}  // namespace bmad::testing
