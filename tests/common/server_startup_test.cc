#include "common/config/server_startup.h"

#include <gtest/gtest.h>

#include <fstream>

#include "common/log.h"
#include "tests/support/paths.h"

namespace bmad {
namespace {

// Puts the process's log level back whatever a test set.
struct RestoreLogLevel {
  log::Level saved = log::GetLevel();
  ~RestoreLogLevel() { log::SetLevel(saved); }
};

std::string WriteConfig(const std::string& yaml) {
  const std::string path = testing::MakeTempDir("server_startup_") + "/cluster.yaml";
  std::ofstream(path) << yaml;
  return path;
}

TEST(ServerStartupTest, AppliesOverridesAndTheConfigsLogLevel) {
  RestoreLogLevel restore;
  log::SetLevel(log::Level::kInfo);
  const std::string path = WriteConfig("log: {level: warn}\ncoordinator: {http_port: 8100}\n");
  Result<ServerConfig> c = LoadServerConfig(path, {"coordinator.http_port=8200"}, "");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->coordinator.http_port, 8200);
  EXPECT_EQ(log::GetLevel(), log::Level::kWarn);
}

TEST(ServerStartupTest, TheFlagWinsOverTheConfig) {
  RestoreLogLevel restore;
  const std::string path = WriteConfig("log: {level: warn}\n");
  ASSERT_TRUE(LoadServerConfig(path, {}, "debug").ok());
  EXPECT_EQ(log::GetLevel(), log::Level::kDebug);
}

TEST(ServerStartupTest, ErrorsNameTheProblemAndLeaveTheLevelAlone) {
  RestoreLogLevel restore;
  log::SetLevel(log::Level::kError);
  const std::string path = WriteConfig("log: {level: warn}\n");
  Result<ServerConfig> bad_level = LoadServerConfig(path, {}, "loud");
  ASSERT_FALSE(bad_level.ok());
  EXPECT_NE(bad_level.status().message().find("loud"), std::string::npos)
      << bad_level.status().message();
  Result<ServerConfig> missing = LoadServerConfig(path + ".missing", {}, "");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("cluster.yaml.missing"), std::string::npos)
      << missing.status().message();
  Result<ServerConfig> bad_key = LoadServerConfig(path, {"coordinator.colour=red"}, "");
  ASSERT_FALSE(bad_key.ok());
  EXPECT_NE(bad_key.status().message().find("coordinator.colour"), std::string::npos)
      << bad_key.status().message();
  EXPECT_EQ(log::GetLevel(), log::Level::kError);
}

}  // namespace
}  // namespace bmad
