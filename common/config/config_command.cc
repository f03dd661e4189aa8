#include "common/config/config_command.h"

#include <cstdio>

#include "common/cli/flags.h"
#include "common/config/config_loader.h"

namespace bmad {
namespace {

int RunConfigCheck(const std::vector<std::string>& args) {
  std::vector<std::string> overrides;
  bool quiet = false;
  cli::Flags flags("bmad config check FILE [--set section.key=value]...");
  flags.AddList("set", &overrides, "Override one key after loading the file.");
  flags.AddBool("quiet", &quiet, "Print nothing when the file is good.");
  std::vector<std::string> positional;
  if (Status s = flags.Parse(args, &positional); !s.ok()) {
    std::fprintf(stderr, "bmad config check: %s\n", s.message().c_str());
    return 2;
  }
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (positional.size() != 1) {
    std::fprintf(stderr, "bmad config check: expected one FILE argument\n%s",
                 flags.Help().c_str());
    return 2;
  }
  ConfigLoad load = LoadConfigFile(positional[0], overrides);
  if (!load.ok()) {
    size_t from_overrides = 0;
    for (const ConfigError& e : load.errors) {
      std::fprintf(stderr, "%s\n", e.ToString().c_str());
      if (e.source == "<override>") ++from_overrides;
    }
    const std::string where = from_overrides == load.errors.size() ? "the --set overrides"
                              : from_overrides > 0                 ? positional[0] + " and the --set overrides"
                                                                   : positional[0];
    std::fprintf(stderr, "%zu error%s in %s\n", load.errors.size(), load.errors.size() == 1 ? "" : "s",
                 where.c_str());
    return 1;
  }
  if (!quiet) {
    std::printf("# %s is valid; effective configuration:\n%s", positional[0].c_str(),
                DumpConfigYaml(load.config).c_str());
  }
  return 0;
}

int RunConfigGet(const std::vector<std::string>& args) {
  std::vector<std::string> overrides;
  cli::Flags flags("bmad config get section.key FILE [--set section.key=value]...");
  flags.AddList("set", &overrides, "Override one key after loading the file.");
  std::vector<std::string> positional;
  Status s = flags.Parse(args, &positional);
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (!s.ok() || positional.size() != 2) {
    std::fprintf(stderr, "bmad config get: %s\n%s", s.ok() ? "expected KEY and FILE" : s.message().c_str(),
                 flags.Help().c_str());
    return 2;
  }
  Result<ServerConfig> config = ReadConfigFile(positional[1], overrides);
  if (!config.ok()) {
    std::fprintf(stderr, "bmad config get: %s\n", config.status().message().c_str());
    return 1;
  }
  Result<std::string> value = GetConfigValue(*config, positional[0]);
  if (!value.ok()) {
    std::fprintf(stderr, "bmad config get: %s\n", value.status().message().c_str());
    return 1;
  }
  std::printf("%s\n", value->c_str());
  return 0;
}

int RunConfigDocs(const std::vector<std::string>& args) {
  constexpr const char* kUsage = "usage: bmad config docs   (prints the key reference as Markdown)\n";
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    std::printf("%s", kUsage);
    return 0;
  }
  if (!args.empty()) {
    std::fprintf(stderr, "%s", kUsage);
    return 2;
  }
  std::printf("%s", ConfigReferenceMarkdown().c_str());
  return 0;
}

}  // namespace

std::vector<cli::Command> ConfigCommands() {
  return {{{"config", "check"}, "Validate a config file and print the effective configuration.",
           RunConfigCheck},
          {{"config", "docs"}, "Print every config key with its default as Markdown.",
           RunConfigDocs},
          {{"config", "get"}, "Print one key's effective value (for scripts).", RunConfigGet}};
}

}  // namespace bmad
