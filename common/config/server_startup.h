// The start of every server process (bmad-coordinator, bmad-worker): its config file with the
// command line's --set overrides applied, and the log level set from it.
#pragma once

#include <string>
#include <vector>

#include "common/config/config.h"
#include "common/status.h"

namespace bmad {

// Reads `path` with `overrides` (ReadConfigFile) and sets the process's log level: `log_level`
// (a --log-level flag) when not empty, else the config's log.level. An unreadable or invalid
// config, or an unknown level, is an error naming it, and the log level is left as it was.
Result<ServerConfig> LoadServerConfig(const std::string& path,
                                      const std::vector<std::string>& overrides,
                                      const std::string& log_level);

}  // namespace bmad
