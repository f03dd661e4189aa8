// The official `openai` npm client (installed from the npm registry into the build tree on first
// run) against a real cluster: models, completions, chat, streaming, errors.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/support/local_cluster.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"
#include "worker/tools/local_generate.h"

namespace bmad::testing {
namespace {

using namespace std::chrono_literals;

TEST(OpenAiClientTest, OfficialClientWorksAgainstTheCluster) {
  const std::string source = std::string(BMAD_SOURCE_DIR) + "/tests/integration/openai_client";
  const std::string dir = std::string(BMAD_BINARY_DIR) + "/openai_client";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(source + "/package.json", dir + "/package.json",
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(source + "/test.mjs", dir + "/test.mjs",
                             std::filesystem::copy_options::overwrite_existing);
  if (!std::filesystem::exists(dir + "/node_modules/openai/package.json")) {
    ChildProcess npm;
    ASSERT_TRUE(npm.Start({"npm", "install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix", dir},
                          dir + "/npm.log"))
        << npm.error() << " (is npm installed?)";
    auto status = npm.Wait(240s);
    ASSERT_TRUE(status.has_value()) << "npm install timed out";
    ASSERT_EQ(*status, 0) << npm.ReadLog();
  }

  tools::LocalGenerateOptions local;
  local.model_path = SharedModelsDir() + "/stories260K.gguf";
  local.prompt = "Once upon a time";
  local.sampling.temperature = 0;
  local.sampling.max_tokens = 32;
  local.threads = 1;
  std::string expected;
  ASSERT_TRUE(tools::LocalGenerate(local, [&](std::string_view t) { expected += t; }).ok());

  LocalCluster cluster({SharedModelsDir() + "/stories260K.gguf", 1, 0});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  ChildProcess node;
  ASSERT_TRUE(node.Start({"node", dir + "/test.mjs"}, dir + "/node.log",
                         {{"BMAD_BASE_URL", cluster.http_url()}, {"BMAD_EXPECTED_TEXT", expected}}))
      << node.error();
  auto status = node.Wait(120s);
  ASSERT_TRUE(status.has_value()) << "the node client hung:\n" << node.ReadLog();
  EXPECT_EQ(*status, 0) << node.ReadLog();
  EXPECT_NE(node.ReadLog().find("openai client: OK"), std::string::npos) << node.ReadLog();
}

}  // namespace
}  // namespace bmad::testing
