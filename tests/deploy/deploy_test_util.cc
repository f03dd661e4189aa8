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

namespace {
CommandResult RunInstallHelm() {
  return RunCommand({std::string(BMAD_SOURCE_DIR) + "/deploy/install-helm.sh"}, std::chrono::seconds(900));
}
}  // namespace

const std::string& Helm() {
  static const std::string helm = [] {
    CommandResult r = RunInstallHelm();
    if (r.status != 0) return std::string();
    std::string path = r.out;
    while (!path.empty() && (path.back() == '\n' || path.back() == ' ')) path.pop_back();
    if (const size_t nl = path.rfind('\n'); nl != std::string::npos) path = path.substr(nl + 1);
    return path;
  }();
  return helm;
}

std::string HelmInstallError() { return RunInstallHelm().err; }

std::vector<YAML::Node> Rendered::Kind(const std::string& kind) const {
  std::vector<YAML::Node> out;
  for (const YAML::Node& o : objects) {
    if (o["kind"].as<std::string>() == kind) out.push_back(o);
  }
  return out;
}

YAML::Node Rendered::Get(const std::string& kind, const std::string& name) const {
  for (const YAML::Node& o : objects) {
    if (o["kind"].as<std::string>() == kind && o["metadata"]["name"].as<std::string>() == name) return o;
  }
  ADD_FAILURE() << "no " << kind << " named " << name;
  return YAML::Node();
}

CommandResult Template(const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {Helm(), "template", "bmad", kChart, "--namespace", kNamespace};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return RunCommand(argv, std::chrono::seconds(120));
}

Rendered Render(const std::vector<std::string>& extra) {
  CommandResult r = Template(extra);
  EXPECT_EQ(r.status, 0) << r.err;
  Rendered out;
  for (const YAML::Node& doc : YAML::LoadAll(r.out)) {
    if (doc.IsMap() && doc["kind"]) out.objects.push_back(doc);
  }
  return out;
}

bool HelmErrorNamesValue(const std::string& helm_error, const std::string& dotted_key) {
  std::string pointer = "'/" + dotted_key + "'";
  std::replace(pointer.begin(), pointer.end(), '.', '/');
  // The whole key, not a prefix of a longer one: "pools.normal" is not "pools.normal.replicas".
  for (const std::string& named : {dotted_key + ":", dotted_key + " ", pointer}) {
    if (helm_error.find(named) != std::string::npos) return true;
  }
  return false;
}

YAML::Node Container(const YAML::Node& pod_spec, const std::string& name) {
  for (const YAML::Node& c : pod_spec["containers"]) {
    if (c["name"].as<std::string>() == name) return c;
  }
  ADD_FAILURE() << "no container " << name;
  return YAML::Node();
}

std::vector<YAML::Node> PodTemplates(const Rendered& r) {
  std::vector<YAML::Node> pods;
  for (const YAML::Node& d : r.Kind("Deployment")) pods.push_back(d["spec"]["template"]);
  for (const YAML::Node& lws : r.Kind("LeaderWorkerSet")) {
    for (const char* role : {"leaderTemplate", "workerTemplate"}) {
      if (lws["spec"]["leaderWorkerTemplate"][role]) pods.push_back(lws["spec"]["leaderWorkerTemplate"][role]);
    }
  }
  return pods;
}

}  // namespace bmad::testing
