// deploy/cluster.sh end to end on 127.0.0.1: `start --foreground` brings up the coordinator and
// two replicas (each its own mpirun job) from one config file; SIGTERM to the script, in the
// middle of a streaming request, drains: the coordinator refuses new requests (on its socket,
// from a client connected before) while the stream finishes with every token, then every
// process exits and the pid files are gone.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "coordinator/client/client.h"
#include "tests/deploy/deploy_test_util.h"
#include "tests/support/free_port.h"
#include "tests/support/local_cluster.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"
#include "tests/support/sse_completion.h"

namespace bmad::testing {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

const std::string kSource = BMAD_SOURCE_DIR;

// Whatever happens, nothing the script started outlives the test.
struct StopClusterOnExit {
  std::string state;
  ~StopClusterOnExit() {
    RunCommand({kSource + "/deploy/cluster.sh", "stop", "--state", state}, 60s);
  }
};

SseCompletion Stream(int port, int max_tokens, std::atomic<int>* events) {
  const json body = {{"prompt", "Once upon a time"}, {"max_tokens", max_tokens}, {"temperature", 0},
                     {"ignore_eos", true}, {"stream", true}, {"stream_options", {{"include_usage", true}}}};
  return StreamCompletion(port, "/v1/completions", body, events);
}

std::vector<pid_t> Pids(const std::string& state) {
  std::vector<pid_t> pids;
  for (const auto& e : std::filesystem::directory_iterator(state)) {
    if (e.path().extension() != ".pid") continue;
    std::ifstream in(e.path());
    pid_t pid = 0;
    if (in >> pid) pids.push_back(pid);
  }
  return pids;
}

TEST(ClusterScriptTest, SigtermDrainsInFlightRequestsThenStopsEverything) {
  const std::string dir = MakeTempDir("bmad-cluster-script-");
  const std::string state = dir + "/state";
  StopClusterOnExit guard{state};
  // A model slow enough (3 to 10 ms a token on one thread, by machine) that a stream is still
  // running when the script is told to stop.
  const std::string model = dir + "/model.gguf";
  CommandResult synth = RunCommand(
      {BinaryPath("bmad"), "model", "synth", "--out", model, "--layers", "12", "--dim", "768", "--heads", "12",
       "--ffn", "2048", "--vocab-from", SharedModelsDir() + "/stories260K.gguf", "--ctx", "1024", "--dtype", "q8_0"},
      120s);
  ASSERT_EQ(synth.status, 0) << synth.err;

  const int http_port = PickFreePort();
  const std::string client_endpoint = "tcp://127.0.0.1:" + std::to_string(PickFreePort());
  const std::vector<std::string> sets = {
      "--set", "model.path=" + model,
      "--set", "coordinator.http_port=" + std::to_string(http_port),
      "--set", "coordinator.client_endpoint=" + client_endpoint,
      "--set", "coordinator.worker_endpoint=tcp://127.0.0.1:" + std::to_string(PickFreePort()),
      "--set", "metrics.coordinator_port=" + std::to_string(PickFreePort()),
      "--set", "metrics.worker_port=" + std::to_string(PickFreePorts(2))};  // two replicas
  // A cluster ran here before: its log is kept, one generation back.
  std::filesystem::create_directories(state);
  std::filesystem::permissions(state, std::filesystem::perms::owner_all, std::filesystem::perm_options::replace);
  WriteTextFile(state + "/coordinator.log", "the previous cluster's log\n");
  std::vector<std::string> argv = {kSource + "/deploy/cluster.sh", "start", "--config",
                                   kSource + "/deploy/config/local.yaml", "--state", state,
                                   "--bin", std::string(BMAD_BINARY_DIR) + "/bin", "--foreground"};
  argv.insert(argv.end(), sets.begin(), sets.end());
  ChildProcess script;
  ASSERT_TRUE(script.Start(argv, dir + "/cluster.log")) << script.error();

  auto live = [&] {
    httplib::Client c("127.0.0.1", http_port);
    c.set_connection_timeout(1, 0);
    auto res = c.Get("/metrics");
    return res ? LocalCluster::MetricValue(res->body, "bmad_coordinator_live_replicas").value_or(-1) : -1.0;
  };
  ASSERT_TRUE(WaitFor([&] { return live() == 2; }, 60s, 200ms))
      << script.ReadLog() << RunCommand({"/bin/bash", "-c", "tail -n 20 " + state + "/*.log"}, 10s).out;
  const std::vector<pid_t> pids = Pids(state);
  ASSERT_EQ(pids.size(), 3u) << "coordinator and two replicas";
  EXPECT_EQ(ReadTextFile(state + "/coordinator.log.1"), "the previous cluster's log\n");

  // A client of the socket, connected now: the drain below lasts as long as the stream's last
  // tokens take (a few ms each), shorter than a process takes to start on a loaded machine.
  Result<std::unique_ptr<client::Client>> socket_client = client::Client::Connect(client_endpoint);
  ASSERT_TRUE(socket_client.ok()) << socket_client.status().ToString();
  Result<proto::ClusterStatus> before = (*socket_client)->QueryStatus(10s);
  ASSERT_TRUE(before.ok()) << before.status().ToString();

  // A long stream, and SIGTERM to the script once tokens flow.
  constexpr int kTokens = 600;
  std::atomic<int> events{0};
  SseCompletion result;
  std::jthread client([&] { result = Stream(http_port, kTokens, &events); });
  ASSERT_TRUE(WaitFor([&] { return events.load() >= 10; }, 30s, 5ms)) << "the stream never started";
  const auto signalled = std::chrono::steady_clock::now();
  script.Signal(SIGTERM);
  const int at_signal = events.load();

  // While it drains, the coordinator refuses new requests on its socket.
  EXPECT_TRUE(WaitFor(
      [&] { return ReadTextFile(state + "/coordinator.log").find("finishing in-flight requests") != std::string::npos; },
      5s, 10ms))
      << "the coordinator was not told to stop";
  proto::Submit late;
  late.prompt_text = "Hello";
  late.sampling.max_tokens = 4;
  Result<client::GenerateResult> refused = (*socket_client)->Generate(late, nullptr, 10s);
  client.join();
  EXPECT_TRUE(result.done) << "the in-flight stream was cut: " << result.error;
  EXPECT_EQ(result.completion_tokens, kTokens) << result.error;
  EXPECT_LT(at_signal, kTokens / 2) << "the stream was nearly done before the stop: the test proved little";
  ASSERT_FALSE(refused.ok()) << "a request during the drain was served: " << refused->text;
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("shutting down"), std::string::npos) << refused.status().ToString();

  // Then everything stops, cleanly and in bounded time.
  auto status = script.Wait(40s);
  ASSERT_TRUE(status.has_value()) << "cluster.sh did not exit\n" << script.ReadLog();
  EXPECT_EQ(*status, 0) << script.ReadLog();
  const double stop_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count();
  EXPECT_LT(stop_s, 25.0);
  for (pid_t pid : pids) EXPECT_NE(kill(pid, 0), 0) << "pid " << pid << " is still running";
  EXPECT_TRUE(Pids(state).empty()) << "pid files left in " << state;
  const std::string coordinator_log = ReadTextFile(state + "/coordinator.log");
  EXPECT_NE(coordinator_log.find("finishing in-flight requests"), std::string::npos) << coordinator_log;
  EXPECT_EQ(script.ReadLog().find("killing them"), std::string::npos) << script.ReadLog();
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir);
}

// The pids listed, one per line, in a file (empty when it does not exist).
std::vector<pid_t> PidsListedIn(const std::string& file) {
  std::vector<pid_t> pids;
  std::ifstream in(file);
  for (pid_t pid; in >> pid;) pids.push_back(pid);
  return pids;
}

bool Running(pid_t pid) {
  if (kill(pid, 0) != 0) return false;
  const std::string stat = ReadTextFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = stat.rfind(") ");
  return close == std::string::npos || stat.compare(close + 2, 1, "Z") != 0;  // not a zombie
}

// Ranks that ignore the drain are killed at the end of a stop, ranks included: Open MPI puts
// each rank in a process group of its own, so killing mpirun's group (as the script did) left
// them running, with their ports and memory, while `stop` said "stopped"; so did a rank whose
// mpirun had died before the stop. And `start
// --foreground` stops everything when its terminal goes away (SIGHUP), not only on Ctrl-C or
// SIGTERM: the launched processes are in sessions of their own and never see that signal.
TEST(ClusterScriptTest, AHangupStopsEverythingAndRanksThatIgnoreTheDrainAreKilled) {
  const std::string dir = MakeTempDir("bmad-cluster-kill-");
  const std::string state = dir + "/state";
  StopClusterOnExit guard{state};
  // The real bmad and coordinator; each replica's rank a script that records its pid and
  // ignores every signal but SIGKILL.
  const std::string bin = dir + "/bin", real = std::string(BMAD_BINARY_DIR) + "/bin";
  std::filesystem::create_directories(bin);
  for (const char* name : {"bmad", "bmad-coordinator"}) std::filesystem::create_symlink(real + "/" + name, bin + "/" + name);
  WriteTextFile(bin + "/bmad-worker", "#!/bin/bash\ntrap '' USR1 TERM HUP INT\necho $$ >>'" + dir +
                                          "/rank-pids'\nwhile :; do sleep 1; done\n");
  std::filesystem::permissions(bin + "/bmad-worker", std::filesystem::perms::owner_all);
  std::vector<std::string> argv = {kSource + "/deploy/cluster.sh", "start", "--config",
                                   kSource + "/deploy/config/local.yaml", "--state", state, "--bin", bin,
                                   "--foreground", "--wait", "0",
                                   "--set", "model.path=" + SharedModelsDir() + "/stories260K.gguf",
                                   "--set", "coordinator.http_port=" + std::to_string(PickFreePort()),
                                   "--set", "coordinator.client_endpoint=tcp://127.0.0.1:" + std::to_string(PickFreePort()),
                                   "--set", "coordinator.worker_endpoint=tcp://127.0.0.1:" + std::to_string(PickFreePort()),
                                   "--set", "metrics.coordinator_port=" + std::to_string(PickFreePort())};
  ChildProcess script;
  ASSERT_TRUE(script.Start(argv, dir + "/cluster.log")) << script.error();
  ASSERT_TRUE(WaitFor([&] { return PidsListedIn(dir + "/rank-pids").size() == 2; }, 60s, 100ms))
      << script.ReadLog() << RunCommand({"/bin/bash", "-c", "tail -n 20 " + state + "/*.log"}, 10s).out;
  const std::vector<pid_t> ranks = PidsListedIn(dir + "/rank-pids");
  const std::vector<pid_t> launched = Pids(state);
  ASSERT_EQ(launched.size(), 3u) << "coordinator and two replicas";
  // One replica's mpirun dies first (OOM-killed, say): its rank lives on, and the stop must
  // still find it through the session mpirun led.
  const std::vector<pid_t> normal = PidsListedIn(state + "/replica-normal-0.pid");
  ASSERT_FALSE(normal.empty());
  ASSERT_EQ(kill(normal[0], SIGKILL), 0);
  ASSERT_TRUE(WaitFor([&] { return !Running(normal[0]); }, 10s, 50ms));
  for (pid_t pid : ranks) EXPECT_TRUE(Running(pid)) << "rank " << pid << " died with its mpirun: the test proves less";

  script.Signal(SIGHUP);
  auto status = script.Wait(60s);
  ASSERT_TRUE(status.has_value()) << "cluster.sh did not exit on SIGHUP\n" << script.ReadLog();
  EXPECT_EQ(*status, 0) << script.ReadLog();
  EXPECT_NE(script.ReadLog().find("killing them"), std::string::npos) << script.ReadLog();
  for (pid_t pid : ranks) {
    EXPECT_TRUE(WaitFor([&] { return !Running(pid); }, 10s, 50ms)) << "rank " << pid << " outlived the stop";
  }
  for (pid_t pid : launched) EXPECT_FALSE(Running(pid)) << "pid " << pid << " outlived the stop";
  EXPECT_TRUE(Pids(state).empty()) << "pid files left in " << state;
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir);
}

// `stop` signals only processes `start` launched. A pid file is trusted only when it names the
// process it recorded (pid and start time): a stale file whose pid now belongs to another
// process, and a state directory others can write, are refused. (The script also refuses pids
// 0 and 1; not tried here: the old script's `kill -KILL -- -1` from a pid file holding 1
// killed every process of the user, the test runner included.)
TEST(ClusterScriptTest, StopSignalsOnlyWhatStartLaunched) {
  const std::string dir = MakeTempDir("bmad-cluster-stale-");
  const std::string state = dir + "/state";
  std::filesystem::create_directories(state);
  std::filesystem::permissions(state, std::filesystem::perms::owner_all, std::filesystem::perm_options::replace);
  ChildProcess bystander;
  ASSERT_TRUE(bystander.Start({"/bin/sleep", "300"}, dir + "/sleep.log")) << bystander.error();
  const std::string pid = std::to_string(bystander.pid());
  WriteTextFile(state + "/coordinator.pid", pid + "\n");               // the old format: a bare pid
  WriteTextFile(state + "/replica-normal-0.pid", pid + " gone\n");     // exited at once
  WriteTextFile(state + "/replica-long_tail-0.pid", pid + " 12345\n"); // another start time
  CommandResult stop = RunCommand({kSource + "/deploy/cluster.sh", "stop", "--state", state}, 60s);
  EXPECT_EQ(stop.status, 0) << stop.err;
  EXPECT_NE(stop.out.find("stopped"), std::string::npos) << stop.out;
  EXPECT_TRUE(Pids(state).empty()) << "the stale pid files are cleared";
  EXPECT_TRUE(Running(bystander.pid())) << "stop signalled a process it did not launch";

  std::filesystem::permissions(state, std::filesystem::perms::all, std::filesystem::perm_options::replace);
  CommandResult open = RunCommand({kSource + "/deploy/cluster.sh", "stop", "--state", state}, 60s);
  EXPECT_EQ(open.status, 2) << open.out;
  EXPECT_NE(open.err.find("others can write to the state directory"), std::string::npos) << open.err;

  // A pid file whose process is gone while its pid leads another program's session (the pid
  // reused after a crash, by a program that made a session and left a child in it): that
  // session's processes are not swept, whether the state directory has a token (they lack it)
  // or not (an older cluster.sh's: only sessions of processes verified as launched are swept).
  std::filesystem::permissions(state, std::filesystem::perms::owner_all, std::filesystem::perm_options::replace);
  for (const bool with_token : {false, true}) {
    // The leader is reaped by the shell that waits for it (a zombie would keep its pid taken).
    CommandResult spawn = RunCommand(
        {"/bin/bash", "-c", "setsid /bin/bash -c \"sleep 300 >/dev/null 2>&1 & echo \\$! >'" + dir +
                                "/child'; echo \\$\\$ >'" + dir + "/leader'\" & wait"},
        30s);
    ASSERT_EQ(spawn.status, 0) << spawn.err;
    const std::vector<pid_t> child = PidsListedIn(dir + "/child");
    const std::vector<pid_t> leader = PidsListedIn(dir + "/leader");
    ASSERT_EQ(child.size(), 1u);
    ASSERT_EQ(leader.size(), 1u);
    ASSERT_TRUE(WaitFor([&] { return !Running(leader[0]); }, 10s, 50ms));
    WriteTextFile(state + "/replica-normal-0.pid", std::to_string(leader[0]) + " 99999\n");
    if (with_token) WriteTextFile(state + "/token", "0123456789abcdef\n");
    CommandResult swept = RunCommand({kSource + "/deploy/cluster.sh", "stop", "--state", state}, 60s);
    EXPECT_EQ(swept.status, 0) << swept.err;
    EXPECT_TRUE(Running(child[0])) << "stop killed a process of a session it did not launch (token: " << with_token << ")";
    kill(child[0], SIGKILL);
  }

  // A flag at the end without its value is a usage error that names it.
  CommandResult flag = RunCommand({kSource + "/deploy/cluster.sh", "start", "--config"}, 60s);
  EXPECT_EQ(flag.status, 2) << flag.out << flag.err;
  EXPECT_NE(flag.err.find("--config needs a value"), std::string::npos) << flag.err;
  bystander.Signal(SIGKILL);
  bystander.Wait(10s);
  std::filesystem::remove_all(dir);
}

// The start time /proc gives process `pid` (field 22 of its stat line), as cluster.sh records it.
std::string StartTime(pid_t pid) {
  const std::string stat = ReadTextFile("/proc/" + std::to_string(pid) + "/stat");
  std::istringstream fields(stat.substr(stat.rfind(") ") + 2));
  std::string field;
  for (int i = 0; i < 20; ++i) fields >> field;
  return field;
}

// `start` checks everything before it stops a cluster already running: a hostfile with too few
// slots used to take the running cluster down and then start nothing.
TEST(ClusterScriptTest, AStartThatCannotRunLeavesTheRunningClusterAlone) {
  const std::string dir = MakeTempDir("bmad-cluster-keep-");
  const std::string state = dir + "/state";
  std::filesystem::create_directories(state);
  std::filesystem::permissions(state, std::filesystem::perms::owner_all, std::filesystem::perm_options::replace);
  ChildProcess running;  // the running cluster's coordinator, as start recorded it
  ASSERT_TRUE(running.Start({"/bin/sleep", "300"}, dir + "/sleep.log")) << running.error();
  WriteTextFile(state + "/coordinator.pid", std::to_string(running.pid()) + " " + StartTime(running.pid()) + "\n");
  WriteTextFile(dir + "/hosts", "gpu-a slots=1\n");
  auto start_with = [&](const std::string& set, const std::string& more = "model.name=m") {
    return RunCommand({kSource + "/deploy/cluster.sh", "start", "--config", kSource + "/deploy/config/local.yaml",
                       "--state", state, "--bin", std::string(BMAD_BINARY_DIR) + "/bin", "--set", set, "--set",
                       more},
                      60s);
  };
  CommandResult start = start_with("cluster.hostfile=" + dir + "/hosts");
  EXPECT_EQ(start.status, 2) << start.out << start.err;
  EXPECT_NE(start.err.find("too few slots"), std::string::npos) << start.err;
  EXPECT_TRUE(Running(running.pid())) << "the running cluster was stopped for a start that could not run";
  EXPECT_FALSE(Pids(state).empty());
  // A model that does not open (only the new coordinator found out, after the stop), and a
  // config that is not valid (its errors printed once, exit 2 as for any usage error).
  WriteTextFile(dir + "/not-a-model.gguf", "text\n");
  CommandResult model = start_with("model.path=" + dir + "/not-a-model.gguf");
  EXPECT_EQ(model.status, 2) << model.out << model.err;
  EXPECT_NE(model.err.find("cluster.sh start: DATA_LOSS: " + dir + "/not-a-model.gguf: not a GGUF file"),
            std::string::npos) << model.err;
  // Nor a parallel layout the model cannot be split into (each rank found out once started).
  CommandResult layout = start_with("parallel.tp=3", "model.path=" + SharedModelsDir() + "/stories260K.gguf");
  EXPECT_EQ(layout.status, 2) << layout.out << layout.err;
  EXPECT_NE(layout.err.find("cluster.sh start: INVALID_ARGUMENT: cannot split the model: 8 attention heads do not "
                            "divide over 3 tensor-parallel ranks (parallel.tp)"),
            std::string::npos) << layout.err;
  CommandResult config = start_with("parallel.tp=0");
  EXPECT_EQ(config.status, 2) << config.out << config.err;
  const size_t first = config.err.find("parallel.tp");
  EXPECT_NE(first, std::string::npos) << config.err;
  EXPECT_EQ(config.err.find("parallel.tp", first + 1), std::string::npos) << "printed twice:\n" << config.err;
  EXPECT_TRUE(Running(running.pid())) << "the running cluster was stopped for a start that could not run";
  EXPECT_FALSE(Pids(state).empty());
  // status: 0 while something runs; 3 (an init script's "not running") once nothing does,
  // whether its process died or a stop removed the pid files (that printed nothing, exit 0).
  auto status = [&] { return RunCommand({kSource + "/deploy/cluster.sh", "status", "--state", state}, 60s); };
  CommandResult up = status();
  EXPECT_EQ(up.status, 0) << up.out << up.err;
  EXPECT_NE(up.out.find("coordinator: running (pid " + std::to_string(running.pid()) + ")"), std::string::npos)
      << up.out;
  running.Signal(SIGKILL);
  running.Wait(10s);
  CommandResult died = status();
  EXPECT_EQ(died.status, 3) << died.out << died.err;
  EXPECT_NE(died.out.find("coordinator: stopped"), std::string::npos) << died.out;
  std::filesystem::remove(state + "/coordinator.pid");
  CommandResult none = status();
  EXPECT_EQ(none.status, 3) << none.out << none.err;
  EXPECT_NE(none.out.find("no cluster running from " + state + " (stopped, or its start failed"), std::string::npos)
      << none.out;
  CommandResult never = RunCommand({kSource + "/deploy/cluster.sh", "status", "--state", dir + "/never"}, 60s);
  EXPECT_EQ(never.status, 3) << never.out << never.err;
  EXPECT_NE(never.out.find("no cluster started with the state directory"), std::string::npos) << never.out;
  std::filesystem::remove_all(dir);
}

// `start --foreground` exits with the coordinator's status when the coordinator ends on its own
// (it exited 0, and a supervisor restarting on failure saw a clean stop), after stopping the
// replicas.
TEST(ClusterScriptTest, AForegroundStartExitsWithTheStatusOfACoordinatorThatCrashed) {
  const std::string dir = MakeTempDir("bmad-cluster-crash-");
  const std::string state = dir + "/state";
  StopClusterOnExit guard{state};
  const std::string bin = dir + "/bin";
  std::filesystem::create_directories(bin);
  std::filesystem::create_symlink(std::string(BMAD_BINARY_DIR) + "/bin/bmad", bin + "/bmad");
  WriteTextFile(bin + "/bmad-coordinator", "#!/bin/bash\necho 'out of luck' >&2\nsleep 2\nexit 3\n");
  WriteTextFile(bin + "/bmad-worker", "#!/bin/bash\necho $$ >>'" + dir + "/rank-pids'\nexec sleep 300\n");
  for (const char* name : {"bmad-coordinator", "bmad-worker"}) {
    std::filesystem::permissions(bin + "/" + name, std::filesystem::perms::owner_all);
  }
  ChildProcess script;
  ASSERT_TRUE(script.Start({kSource + "/deploy/cluster.sh", "start", "--config", kSource + "/deploy/config/local.yaml",
                            "--state", state, "--bin", bin, "--foreground", "--wait", "0",
                            "--set", "cluster.long_tail_replicas=0",
                            "--set", "model.path=" + SharedModelsDir() + "/stories260K.gguf"},  // start checks it opens
                           dir + "/cluster.log"))
      << script.error();
  auto status = script.Wait(60s);
  ASSERT_TRUE(status.has_value()) << script.ReadLog();
  EXPECT_EQ(*status, 3) << script.ReadLog();
  EXPECT_NE(script.ReadLog().find("the coordinator exited with status 3"), std::string::npos) << script.ReadLog();
  EXPECT_NE(script.ReadLog().find("out of luck"), std::string::npos) << script.ReadLog();
  for (pid_t pid : PidsListedIn(dir + "/rank-pids")) {
    EXPECT_TRUE(WaitFor([&] { return !Running(pid); }, 10s, 50ms)) << "rank " << pid << " outlived the stop";
  }
  EXPECT_TRUE(Pids(state).empty());
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir);
}

// `plan` prints what `start` runs. Over a hostfile, replicas take consecutive slots without
// sharing a GPU: a replica that fits one host stays on it (with the GPUs it owns there), and
// the launcher refuses a hostfile that is too small.
TEST(ClusterScriptTest, PlanSplitsTheHostfileBetweenReplicas) {
  const std::string dir = MakeTempDir("bmad-cluster-plan-");
  WriteTextFile(dir + "/hosts", "gpu-a slots=8\ngpu-b slots=8   # second rack\n\n# spare\ngpu-c slots=4\n");
  auto plan = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {kSource + "/deploy/cluster.sh", "plan", "--config",
                                     kSource + "/deploy/config/local.yaml", "--state", dir,
                                     "--bin", std::string(BMAD_BINARY_DIR) + "/bin",
                                     "--set", "cluster.hostfile=" + dir + "/hosts", "--set", "worker.backend=cuda"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return RunCommand(argv, 60s);
  };
  // Four replicas of 4 ranks: two per 8-GPU host, each with its own GPUs.
  CommandResult four = plan({"--set", "parallel.tp=4", "--set", "cluster.normal_replicas=3"});
  ASSERT_EQ(four.status, 0) << four.err;
  for (const char* want : {"normal-0 [gpu-a:4]: env CUDA_VISIBLE_DEVICES=0\\,1\\,2\\,3 mpirun -np 4",
                           "normal-1 [gpu-a:4]: env CUDA_VISIBLE_DEVICES=4\\,5\\,6\\,7 mpirun -np 4",
                           "normal-2 [gpu-b:4]: env CUDA_VISIBLE_DEVICES=0\\,1\\,2\\,3 mpirun -np 4",
                           "long_tail-0 [gpu-b:4]: env CUDA_VISIBLE_DEVICES=4\\,5\\,6\\,7 mpirun -np 4",
                           "--set worker.replica_id=long_tail-0 --set worker.pool=long_tail --replica-index 3"}) {
    EXPECT_NE(four.out.find(want), std::string::npos) << want << "\n" << four.out;
  }
  EXPECT_EQ(ReadTextFile(dir + "/hosts-normal-1"), "gpu-a slots=4\n");
  // Every replica's mpirun starts on this host, and two share each host: each job has its own
  // Open MPI session directory, as on one host (see the test below), in /tmp on every host.
  for (const char* id : {"normal-0", "normal-1", "normal-2", "long_tail-0"}) {
    const std::regex session(std::string(id) + " \\[.*--mca orte_tmpdir_base /tmp/bmad-ompi-[0-9]+-[0-9]+/" + id + " ");
    EXPECT_TRUE(std::regex_search(four.out, session)) << id << "\n" << four.out;
  }
  // One replica of 16 ranks spans two whole hosts; the 4-slot host is left over.
  CommandResult big = plan({"--set", "parallel.tp=8", "--set", "parallel.pp=2", "--set", "cluster.long_tail_replicas=0"});
  ASSERT_EQ(big.status, 0) << big.err;
  EXPECT_NE(big.out.find("normal-0 [gpu-a:8,gpu-b:8]: mpirun -np 16"), std::string::npos) << big.out;
  EXPECT_EQ(ReadTextFile(dir + "/hosts-normal-0"), "gpu-a slots=8\ngpu-b slots=8\n");
  // Replicas of 6 ranks do not split across hosts mid-way: 3 + 1 of them do not fit.
  CommandResult six = plan({"--set", "parallel.tp=6", "--set", "cluster.normal_replicas=3"});
  EXPECT_EQ(six.status, 2) << six.out;
  EXPECT_NE(six.err.find("too few slots"), std::string::npos) << six.err;
  std::filesystem::remove_all(dir);
}

// Replicas on this host each get their own Open MPI session directory in the state directory:
// jobs sharing /tmp/ompi.<host>.<uid> race when one starts while another creates or removes it.
TEST(ClusterScriptTest, PlanGivesEachLocalJobItsOwnOpenMpiSessionDirectory) {
  const std::string dir = MakeTempDir("bmad-cluster-plan-");
  CommandResult local = RunCommand({kSource + "/deploy/cluster.sh", "plan", "--config",
                                    kSource + "/deploy/config/local.yaml", "--state", dir, "--bin",
                                    std::string(BMAD_BINARY_DIR) + "/bin"},
                                   60s);
  ASSERT_EQ(local.status, 0) << local.err;
  for (const char* id : {"normal-0", "long_tail-0"}) {
    const std::string want = std::string(id) + " [this host]: mpirun -np 1 --bind-to none -x OPENBLAS_NUM_THREADS=1 "
                             "--mca btl self\\,vader\\,tcp --mca orte_tmpdir_base " + dir + "/ompi-" + id + " ";
    EXPECT_NE(local.out.find(want), std::string::npos) << want << "\n" << local.out;
    EXPECT_TRUE(std::filesystem::is_directory(dir + "/ompi-" + id)) << id;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace bmad::testing
