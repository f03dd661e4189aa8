// The official `openai` npm client (installed from the npm registry into the build tree on first
// run, at the versions of package-lock.json) against a real cluster that wants an API key: models, completions, chat, streaming, errors;
// and its tool calling helpers against a cluster with a tool call parser.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/support/local_cluster.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"
#include "worker/tools/local_generate.h"

namespace bmad::testing {
namespace {

using namespace std::chrono_literals;

// The client's scripts and the client itself in the build tree: `dir` on success.
void InstallClient(const std::string& dir) {
  const std::string source = std::string(BMAD_SOURCE_DIR) + "/tests/integration/openai_client";
  std::filesystem::create_directories(dir);
  for (const char* file : {"package.json", "package-lock.json", "test.mjs", "tools.mjs"}) {
    std::filesystem::copy_file(source + "/" + file, dir + "/" + file, std::filesystem::copy_options::overwrite_existing);
  }
  if (!std::filesystem::exists(dir + "/node_modules/openai/package.json")) {
    // `npm ci`: exactly the versions of the lockfile, so that a new release of the client or of
    // one of its dependencies cannot change what this test runs.
    ChildProcess npm;
    ASSERT_TRUE(npm.Start({"npm", "ci", "--no-audit", "--no-fund", "--loglevel=error", "--prefix", dir},
                          dir + "/npm.log"))
        << npm.error() << " (is npm installed?)";
    auto status = npm.Wait(240s);
    ASSERT_TRUE(status.has_value()) << "npm install timed out";
    ASSERT_EQ(*status, 0) << npm.ReadLog();
  }
}

TEST(OpenAiClientTest, OfficialClientWorksAgainstTheCluster) {
  const std::string dir = std::string(BMAD_BINARY_DIR) + "/openai_client";
  InstallClient(dir);
  if (HasFatalFailure()) return;

  tools::LocalGenerateOptions local;
  local.model_path = SharedModelsDir() + "/stories260K.gguf";
  local.prompt = "Once upon a time";
  local.sampling.temperature = 0;
  local.sampling.max_tokens = 32;
  local.threads = 1;
  std::string expected;
  ASSERT_TRUE(tools::LocalGenerate(local, [&](std::string_view t) { expected += t; }).ok());

  const std::string keys = MakeTempDir("openai_client_keys") + "/keys";
  std::ofstream(keys) << "# the client's key\nsk-bmad-openai-client-test\n";
  LocalCluster cluster({SharedModelsDir() + "/stories260K.gguf", 1, 0, {"coordinator.api_keys_file=" + keys}});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  ChildProcess node;
  ASSERT_TRUE(node.Start({"node", dir + "/test.mjs"}, dir + "/node.log",
                         {{"BMAD_BASE_URL", cluster.http_url()},
                          {"BMAD_EXPECTED_TEXT", expected},
                          {"BMAD_API_KEY", "sk-bmad-openai-client-test"}}))
      << node.error();
  auto status = node.Wait(120s);
  ASSERT_TRUE(status.has_value()) << "the node client hung:\n" << node.ReadLog();
  EXPECT_EQ(*status, 0) << node.ReadLog();
  EXPECT_NE(node.ReadLog().find("openai client: OK"), std::string::npos) << node.ReadLog();

  // The client socket asks for the same key: `bmad generate` takes it from $BMAD_API_KEY.
  auto generate = [&](const std::map<std::string, std::string>& env, const std::string& log) {
    ChildProcess bmad;
    EXPECT_TRUE(bmad.Start({BinaryPath("bmad"), "generate", "--coordinator", cluster.client_endpoint(), "--prompt",
                            "Once upon a time", "--max-tokens", "32", "--temperature", "0", "--quiet"},
                           dir + "/" + log, env))
        << bmad.error();
    const std::optional<int> status = bmad.Wait(60s);
    return std::make_pair(status.value_or(-1), bmad.ReadLog());
  };
  const auto [keyed_status, keyed_out] = generate({{"BMAD_API_KEY", "sk-bmad-openai-client-test"}}, "keyed.log");
  EXPECT_EQ(keyed_status, 0) << keyed_out;
  EXPECT_EQ(keyed_out, expected + "\n");
  const auto [bare_status, bare_out] = generate({{"BMAD_API_KEY", ""}}, "bare.log");
  EXPECT_EQ(bare_status, 1) << bare_out;
  EXPECT_NE(bare_out.find("UNAUTHENTICATED: this coordinator wants an API key"), std::string::npos) << bare_out;
}

// Tool calling through the client's own helpers (runTools, the stream accumulator), on a model
// with the Llama-2 vocabulary and a 4096-token context (tool prompts outgrow stories260K's 512).
TEST(OpenAiClientTest, OfficialClientCallsTools) {
  const std::string dir = std::string(BMAD_BINARY_DIR) + "/openai_client";
  InstallClient(dir);
  if (HasFatalFailure()) return;
  LocalCluster cluster({SharedModelsDir() + "/llama-2-tiny-random.gguf", 1, 0, {"model.tool_call_parser=hermes"}});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  ChildProcess node;
  ASSERT_TRUE(node.Start({"node", dir + "/tools.mjs"}, dir + "/tools.log", {{"BMAD_BASE_URL", cluster.http_url()}}))
      << node.error();
  auto status = node.Wait(120s);
  ASSERT_TRUE(status.has_value()) << "the node client hung:\n" << node.ReadLog();
  EXPECT_EQ(*status, 0) << node.ReadLog();
  EXPECT_NE(node.ReadLog().find("openai client tools: OK"), std::string::npos) << node.ReadLog();
}

}  // namespace
}  // namespace bmad::testing
