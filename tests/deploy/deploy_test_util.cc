#include "tests/deploy/deploy_test_util.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "tests/support/paths.h"
#include "tests/support/process.h"

namespace bmad::testing {

namespace {

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

}  // namespace

CommandResult RunCommand(const std::vector<std::string>& argv, std::chrono::seconds timeout,
                         const std::vector<std::pair<std::string, std::string>>& env) {
  CommandResult result;
  const std::string dir = MakeTempDir("bmad-cmd-");
  std::string line = "exec";
  for (const std::string& a : argv) {
    line += ' ';
    line += ShellQuote(a);
  }
  line += " >";
  line += ShellQuote(dir + "/out");
  line += " 2>";
  line += ShellQuote(dir + "/err");
  ChildProcess child;
  std::map<std::string, std::string> vars(env.begin(), env.end());
  if (!child.Start({"/bin/bash", "-c", line}, dir + "/log", vars)) {
    result.err = child.error();
  } else if (auto status = child.Wait(std::chrono::duration_cast<std::chrono::milliseconds>(timeout))) {
    result.status = *status;
    result.out = ReadTextFile(dir + "/out");
    result.err = ReadTextFile(dir + "/err") + child.ReadLog();
  } else {
    child.Stop();
    result.out = ReadTextFile(dir + "/out");
    result.err = "timed out after " + std::to_string(timeout.count()) + " s\n" + ReadTextFile(dir + "/err");
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return result;
}

std::string ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

namespace {
void Collect(const nlohmann::json& panels, std::vector<nlohmann::json>* out) {
  if (!panels.is_array()) return;
  for (const nlohmann::json& p : panels) {
    out->push_back(p);
    if (p.contains("panels")) Collect(p["panels"], out);
  }
}
}  // namespace

std::vector<nlohmann::json> AllPanels(const nlohmann::json& dashboard) {
  std::vector<nlohmann::json> out;
  if (dashboard.contains("panels")) Collect(dashboard["panels"], &out);
  return out;
}

std::vector<std::string> DashboardFiles(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".json") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace bmad::testing
