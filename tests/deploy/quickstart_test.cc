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

// A bin folder with this build's binaries, except `replaced`, which is a shell script running
// `body` (where $REAL is this build's bin folder).
std::string BinWithScript(const std::string& dir, const std::string& replaced,
                          const std::string& body) {
  const std::string real = std::string(BMAD_BINARY_DIR) + "/bin";
  std::filesystem::create_directories(dir);
  for (const char* name : {"bmad", "bmad-coordinator", "bmad-worker"}) {
    if (name != replaced) std::filesystem::create_symlink(real + "/" + name, dir + "/" + name);
  }
  WriteTextFile(dir + "/" + replaced, "#!/bin/sh\nREAL='" + real + "'\n" + body);
  std::filesystem::permissions(dir + "/" + replaced, std::filesystem::perms::owner_all);
  return dir;
}

CommandResult RunQuickstart(const std::string& bin, const std::string& state) {
  return RunCommand({kSource + "/deploy/quickstart.sh"}, 240s,
                    {{"BMAD_QUICKSTART_BIN", bin}, {"BMAD_QUICKSTART_STATE", state}});
}

// Nothing quickstart started is left running: every process it starts names the model it
// wrote into the state directory on its command line.
void ExpectNothingLeftRunning(const std::string& state) {
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "cmdline", std::ios::binary);
    const std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_FALSE(Contains(cmdline, state)) << "pid " << name << " still runs: " << cmdline;
  }
}

// A replica that dies while starting (here a worker that exits at once with a message, as one
// that cannot bind its port would) is reported as soon as it is gone, with its log, rather than
// after the whole wait for replicas to come up; and the rest is stopped.
TEST(QuickstartTest, AReplicaThatExitsWhileStartingIsReportedWithItsLog) {
  const std::string dir = MakeTempDir("bmad-quickstart-fail-");
  const std::string state = dir + "/state";
  StopClusterOnExit guard{state};
  const CommandResult run = RunQuickstart(
      BinWithScript(dir + "/bin", "bmad-worker",
                    "echo 'worker: simulated start-up failure' >&2\nexit 3\n"),
      state);
  const std::string both = run.out + "\n--- stderr ---\n" + run.err;
  EXPECT_EQ(run.status, 1) << both;
  EXPECT_TRUE(Contains(run.err, "exited while starting")) << both;
  EXPECT_TRUE(Contains(run.err, "replica-")) << both;
  EXPECT_TRUE(Contains(run.err, "simulated start-up failure")) << both;
  EXPECT_FALSE(Contains(run.err, "did not come up")) << both;
  ExpectNothingLeftRunning(state);
}

// The coordinator starts a second late: the script must wait for it (its first polls find
// nothing listening) rather than give up.
TEST(QuickstartTest, ServesThroughEveryFrontDoorAndStopsEverything) {
  const std::string dir = MakeTempDir("bmad-quickstart-");
  const std::string state = dir + "/state";
  StopClusterOnExit guard{state};
  const CommandResult run = RunQuickstart(
      BinWithScript(dir + "/bin", "bmad-coordinator",
                    "sleep 1\nexec \"$REAL/bmad-coordinator\" \"$@\"\n"),
      state);
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
  ExpectNothingLeftRunning(state);
}

}  // namespace
}  // namespace bmad::testing
