#include "common/config/server_startup.h"

#include "common/config/config_loader.h"
#include "common/log.h"

namespace bmad {

Result<ServerConfig> LoadServerConfig(const std::string& path,
                                      const std::vector<std::string>& overrides,
                                      const std::string& log_level) {
  BMAD_ASSIGN_OR_RETURN(ServerConfig config, ReadConfigFile(path, overrides));
  log::Level level = config.log.level;
  if (!log_level.empty()) {
    BMAD_ASSIGN_OR_RETURN(level, log::ParseLevel(log_level));
  }
  log::SetLevel(level);
  return config;
}

}  // namespace bmad
