// deploy/quickstart.sh, the README's first command, end to end on 127.0.0.1 with the binaries of
// this build: it starts the coordinator and two mpirun replicas, answers through the ZeroMQ
// socket and both HTTP endpoints, prints the cluster's status, and stops everything it started.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "tests/deploy/deploy_test_util.h"
#include "tests/support/paths.h"

namespace bmad::testing {
namespace {

using namespace std::chrono_literals;

const std::string kSource = BMAD_SOURCE_DIR;

struct StopClusterOnExit {
  std::string state;
  ~StopClusterOnExit() { RunCommand({kSource + "/deploy/cluster.sh", "stop", "--state", state}, 60s); }
};

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A bin folder with this build's binaries, except that the coordinator starts a second late:
// the script must wait for it (its first polls find nothing listening) rather than give up.
std::string SlowCoordinatorBin(const std::string& dir) {
  const std::string real = std::string(BMAD_BINARY_DIR) + "/bin";
  std::filesystem::create_directories(dir);
  for (const char* name : {"bmad", "bmad-worker"}) {
    std::filesystem::create_symlink(real + "/" + name, dir + "/" + name);
  }
  WriteTextFile(dir + "/bmad-coordinator",
                "#!/bin/sh\nsleep 1\nexec '" + real + "/bmad-coordinator' \"$@\"\n");
  std::filesystem::permissions(dir + "/bmad-coordinator", std::filesystem::perms::owner_all);
  return dir;
}

// A bin folder whose worker exits at once with a message, as one that cannot bind its port would.
std::string FailingWorkerBin(const std::string& dir) {
  const std::string real = std::string(BMAD_BINARY_DIR) + "/bin";
  std::filesystem::create_directories(dir);
  for (const char* name : {"bmad", "bmad-coordinator"}) {
    std::filesystem::create_symlink(real + "/" + name, dir + "/" + name);
  }
  WriteTextFile(dir + "/bmad-worker", "#!/bin/sh\necho 'worker: simulated start-up failure' >&2\nexit 3\n");
  std::filesystem::permissions(dir + "/bmad-worker", std::filesystem::perms::owner_all);
  return dir;
}

// A replica that dies while starting is reported as soon as it is gone, with its log, rather
// than after the whole wait for replicas to come up; and the rest is stopped.
TEST(QuickstartTest, AReplicaThatExitsWhileStartingIsReportedWithItsLog) {
  const std::string dir = MakeTempDir("bmad-quickstart-fail-");
  const std::string state = dir + "/state";
  StopClusterOnExit guard{state};
  const CommandResult run =
      RunCommand({kSource + "/deploy/quickstart.sh"}, 240s,
                 {{"BMAD_QUICKSTART_BIN", FailingWorkerBin(dir + "/bin")},
                  {"BMAD_QUICKSTART_STATE", state}});
  const std::string both = run.out + "\n--- stderr ---\n" + run.err;
  EXPECT_EQ(run.status, 1) << both;
  EXPECT_TRUE(Contains(run.err, "exited while starting")) << both;
  EXPECT_TRUE(Contains(run.err, "replica-")) << both;
  EXPECT_TRUE(Contains(run.err, "simulated start-up failure")) << both;
  EXPECT_FALSE(Contains(run.err, "did not come up")) << both;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "cmdline", std::ios::binary);
    const std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_FALSE(Contains(cmdline, state)) << "pid " << name << " still runs: " << cmdline;
  }
}

TEST(QuickstartTest, ServesThroughEveryFrontDoorAndStopsEverything) {
  const std::string dir = MakeTempDir("bmad-quickstart-");
  const std::string state = dir + "/state";
  StopClusterOnExit guard{state};
  const CommandResult run =
      RunCommand({kSource + "/deploy/quickstart.sh"}, 240s,
                 {{"BMAD_QUICKSTART_BIN", SlowCoordinatorBin(dir + "/bin")},
                  {"BMAD_QUICKSTART_STATE", state}});
  const std::string both = run.out + "\n--- stderr ---\n" + run.err;
  ASSERT_EQ(run.status, 0) << both;
  EXPECT_TRUE(Contains(run.out, "started coordinator and 2 replicas")) << both;
  EXPECT_TRUE(Contains(run.out, "== through the ZeroMQ socket")) << both;
  EXPECT_TRUE(Contains(run.out, "\"object\":\"text_completion\"")) << both;
  EXPECT_TRUE(Contains(run.out, "chat.completion.chunk")) << both;
  EXPECT_TRUE(Contains(run.out, "data: [DONE]")) << both;
  EXPECT_TRUE(Contains(run.out, "normal-0")) << both;
  EXPECT_TRUE(Contains(run.out, "long_tail-0")) << both;
  EXPECT_TRUE(Contains(run.out, "== stopping")) << both;
  // Nothing it started is left running: every process it started names the model it wrote
  // into the state directory on its command line.
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "cmdline", std::ios::binary);
    const std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_FALSE(Contains(cmdline, state)) << "pid " << name << " still runs: " << cmdline;
  }
}

}  // namespace
}  // namespace bmad::testing
