// Loading ServerConfig from YAML (the only code that touches yaml-cpp) and printing it back.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/config/config.h"
#include "common/status.h"

namespace bmad {

// One problem in a config: the key's dotted path and where it is (line/column 1-based; 0 when
// the problem has no single place, e.g. a missing file or a cross-key rule).
struct ConfigError {
  std::string source;  // file name, or "<override>" for --set values
  std::string key;     // dotted path, e.g. "scheduler.max_seqs"; empty for whole-file problems
  int line = 0;
  int column = 0;
  std::string message;

  // "source:line:column: key: message" (parts that are unknown are left out).
  std::string ToString() const;
};

struct ConfigLoad {
  ServerConfig config;               // defaults overlaid with every value that loaded cleanly
  std::vector<ConfigError> errors;   // every problem found; empty means the config is good
  bool ok() const { return errors.empty(); }
};

// Parses YAML text. `overrides` are "section.key=value" strings applied after the text (the
// value is read as YAML, so lists work: "parallel.stage_layers=[2,4]").
ConfigLoad LoadConfigText(std::string_view yaml, std::string_view source_name,
                          const std::vector<std::string>& overrides = {});
ConfigLoad LoadConfigFile(const std::string& path, const std::vector<std::string>& overrides = {});

// Convenience for programs: the config, or InvalidArgument listing every error, one per line.
Result<ServerConfig> ReadConfigFile(const std::string& path,
                                    const std::vector<std::string>& overrides = {});

// Rules that span keys (e.g. stage_layers must have pp entries); paths name the keys involved.
std::vector<ConfigError> ValidateConfig(const ServerConfig& config);

// The effective configuration as YAML, every key present (docs/configuration.md explains them).
std::string DumpConfigYaml(const ServerConfig& config);

// The value of one key as shell-friendly text (strings unquoted, lists comma-separated);
// kNotFound for an unknown key.
Result<std::string> GetConfigValue(const ServerConfig& config, const std::string& dotted_key);

// Every key as "section.key", in declaration order.
std::vector<std::string> ListConfigKeys();

// The key reference of docs/configuration.md (Markdown tables: key, default, allowed values,
// meaning), generated from config_fields.h; a test keeps the document equal to it.
std::string ConfigReferenceMarkdown();

}  // namespace bmad
