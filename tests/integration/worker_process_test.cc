// The real bmad-worker process driven by a fake coordinator: a ZeroMQ ROUTER in the test,
// speaking the protocol. Registration, heartbeats, assignments streamed back token by token
// (greedy output equal to llama.cpp's reference and to `bmad generate`), bad assignments, cancel
// (blocks freed: the worker's /metrics shows it), garbage on the socket, drain and exit.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <thread>

#include "common/proto/frames.h"
#include "tests/integration/worker_test_harness.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"
#include "tests/support/synth_model.h"
#include "tests/support/tcp_proxy.h"
#include "worker/tools/local_generate.h"

namespace bmad::testing {
namespace {

using namespace std::chrono_literals;

TEST(WorkerProcessTest, ServesAFakeCoordinator) {
  FakeCoordinator coord;
  ChildProcess worker;
  auto reg = StartWorker(worker, coord);
  ASSERT_TRUE(reg.has_value());
  EXPECT_EQ(reg->info.replica_id, "test-replica");
  EXPECT_EQ(reg->info.model_name, "stories260K");
  EXPECT_EQ(reg->info.block_size, 16u);
  EXPECT_EQ(reg->info.kv_blocks, 63u);
  EXPECT_EQ(reg->info.context_length, 512u);
  coord.Send(proto::RegisterAck{true, "welcome"});
  auto idle = coord.Expect<proto::Heartbeat>();
  ASSERT_TRUE(idle.has_value());
  EXPECT_FALSE(idle->has_last_assignment) << "no Assign taken yet";

  // Greedy generation streamed token by token equals llama.cpp's reference.
  coord.Send(Greedy(7, kPrompt, 32));
  std::vector<proto::TokenChunk> chunks = coord.Collect(7);
  ASSERT_FALSE(chunks.empty());
  EXPECT_EQ(Ids(chunks), kGreedy32);
  EXPECT_EQ(Text(chunks), ", there was a little girl named Lily. She loved to play outside in the park. One day, she saw");
  EXPECT_EQ(chunks.back().finish_reason, proto::FinishReason::kLength);
  EXPECT_EQ(chunks.back().usage.prompt_tokens, 5u);
  EXPECT_EQ(chunks.back().usage.completion_tokens, 32u);

  // ...and equals `bmad generate --model` in this process.
  tools::LocalGenerateOptions local;
  local.model_path = SharedModelsDir() + "/stories260K.gguf";
  local.prompt = "Once upon a time";
  local.sampling.temperature = 0;
  local.sampling.max_tokens = 32;
  std::string local_text;
  auto stats = tools::LocalGenerate(local, [&](std::string_view t) { local_text += t; });
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(Text(chunks), local_text);

  // A migrated request continues after the tokens already streamed: the same text follows.
  proto::Assign resumed = Greedy(8, kPrompt, 32);
  resumed.generated_tokens.assign(kGreedy32.begin(), kGreedy32.begin() + 10);
  coord.Send(resumed);
  std::vector<proto::TokenChunk> rest = coord.Collect(8, /*first_offset=*/10);
  ASSERT_FALSE(rest.empty());
  EXPECT_EQ(rest.front().sequence, 0u);  // chunk numbers are this replica's
  EXPECT_EQ(Ids(rest), std::vector<uint32_t>(kGreedy32.begin() + 10, kGreedy32.end()));

  // Bad assignments are refused with the request id and a reason; the worker goes on.
  coord.Send(Greedy(9, {1, 99999}, 4));
  auto err = coord.Expect<proto::ErrorMessage>();
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->request_id, 9u);
  EXPECT_NE(err->message.find("token id 99999"), std::string::npos) << err->message;
  proto::Assign negative = Greedy(10, kPrompt, 4);
  negative.sampling.top_p = -1;
  coord.Send(negative);
  err = coord.Expect<proto::ErrorMessage>();
  ASSERT_TRUE(err.has_value());
  EXPECT_NE(err->message.find("top_p"), std::string::npos) << err->message;
  coord.Send(Greedy(11, std::vector<uint32_t>(600, 5), 4));  // longer than the context (512)
  err = coord.Expect<proto::ErrorMessage>();
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->code, StatusCode::kOutOfRange);

  // Garbage on the socket is logged and ignored.
  coord.SendRaw("this is not a protocol message");
  coord.Send(Greedy(12, kPrompt, 3));
  EXPECT_EQ(Ids(coord.Collect(12)), std::vector<uint32_t>(kGreedy32.begin(), kGreedy32.begin() + 3));

  // Drain: running requests finish, then the process exits cleanly.
  coord.Send(Greedy(14, kPrompt, 8));
  coord.Send(proto::Drain{});
  EXPECT_EQ(coord.Collect(14).back().finish_reason, proto::FinishReason::kLength);
  auto status = worker.Wait(20s);
  ASSERT_TRUE(status.has_value()) << worker.ReadLog();
  EXPECT_EQ(*status, 0) << worker.ReadLog();
}

TEST(WorkerProcessTest, CancellingMidStreamFreesTheRequestsBlocks) {
  // On the slow model: stories260K writes 400 tokens in milliseconds, and on a loaded machine
  // the request could end before the cancel reached it.
  FakeCoordinator coord;
  ChildProcess worker;
  auto reg = StartWorker(worker, coord, SlowModel());
  ASSERT_TRUE(reg.has_value());
  coord.Send(proto::RegisterAck{true, "welcome"});
  // Cancelling mid-stream frees the request's blocks (visible in the worker's metrics).
  proto::Assign long_request = Greedy(13, {1}, 400);
  long_request.sampling.ignore_eos = true;
  coord.Send(long_request);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(coord.Expect<proto::TokenChunk>().has_value());
  coord.Send(proto::WorkerCancel{13});
  bool cancelled = false;
  while (auto c = coord.Expect<proto::TokenChunk>()) {
    if (c->request_id == 13 && c->finish_reason != proto::FinishReason::kNone) {
      EXPECT_EQ(c->finish_reason, proto::FinishReason::kCancelled);
      cancelled = true;
      break;
    }
  }
  EXPECT_TRUE(cancelled);
  const std::string metrics_address = reg->info.metrics_address;
  const int metrics_port = std::stoi(metrics_address.substr(metrics_address.find(':') + 1));
  httplib::Client http("127.0.0.1", metrics_port);
  std::string metrics;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto res = http.Get("/metrics");
        metrics = res ? res->body : "";
        return metrics.find("bmad_worker_kv_usage_ratio{replica=\"test-replica\"} 0\n") != std::string::npos;
      },
      10s))
      << metrics;
  EXPECT_NE(metrics.find("bmad_worker_requests_finished_total{reason=\"cancelled\",replica=\"test-replica\"} 1"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("vllm:num_requests_running{replica=\"test-replica\"} 0"), std::string::npos);
  EXPECT_NE(metrics.find("vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"64\""), std::string::npos);
  // The heartbeat agrees: nothing active.
  ASSERT_TRUE(WaitFor([&] {
    coord.Expect<proto::Heartbeat>(200ms);
    return coord.last_heartbeat_.active_request_ids.empty();
  }, 10s));

  worker.Stop();
}

TEST(WorkerProcessTest, AnAssignmentOfARunningIdReplacesItsCopy) {
  // The coordinator took the replica for dead (a stall past its liveness timeout), moved the
  // request, and gives it back with the tokens the client has: the worker used to refuse the
  // id as "already running here", and the client got that error.
  // On the slow model, so that each copy is still running when the next Assign or the cancel
  // lands (stories260K writes 500 tokens in milliseconds).
  FakeCoordinator coord;
  ChildProcess worker;
  auto reg = StartWorker(worker, coord, SlowModel());
  ASSERT_TRUE(reg.has_value());
  coord.Send(proto::RegisterAck{true, "welcome"});
  // The undisturbed answer, which a replacement given its first 10 tokens continues.
  coord.Send(Greedy(19, kPrompt, 32));
  const std::vector<uint32_t> greedy32 = Ids(coord.Collect(19));
  ASSERT_EQ(greedy32.size(), 32u) << worker.ReadLog();
  proto::Assign first = Greedy(20, kPrompt, 500);
  first.sampling.ignore_eos = true;
  first.assignment = 1;
  coord.Send(first);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(coord.Expect<proto::TokenChunk>().has_value()) << worker.ReadLog();
  proto::Assign again = Greedy(20, kPrompt, 32);
  again.generated_tokens.assign(greedy32.begin(), greedy32.begin() + 10);
  again.assignment = 2;
  coord.Send(again);
  // Given back twice in a row (both usually reach the worker within one step): the last wins.
  again.assignment = 3;
  coord.Send(again);
  // The older copies' chunks already on their way come first; then the last copy's, numbered
  // from 0 and starting after the 10 tokens it was given.
  int old_chunks = 0;
  std::vector<proto::TokenChunk> replaced;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline) {
    auto m = coord.Next(1s);
    if (!m) continue;
    ASSERT_FALSE(std::holds_alternative<proto::ErrorMessage>(*m))
        << std::get<proto::ErrorMessage>(*m).message;
    auto* c = std::get_if<proto::TokenChunk>(&*m);
    if (c == nullptr || c->request_id != 20) continue;
    EXPECT_NE(c->finish_reason, proto::FinishReason::kCancelled) << "the old copy's end is not news";
    if (c->assignment != 3) {  // each chunk says which assignment it answers
      EXPECT_TRUE(replaced.empty()) << "a chunk of an older copy after the last copy's first";
      ++old_chunks;
      continue;
    }
    EXPECT_EQ(c->sequence, replaced.size());
    replaced.push_back(*c);
    if (c->finish_reason != proto::FinishReason::kNone) break;
  }
  ASSERT_FALSE(replaced.empty()) << worker.ReadLog();
  EXPECT_EQ(replaced.front().token_offset, 10u);
  EXPECT_EQ(Ids(replaced), std::vector<uint32_t>(greedy32.begin() + 10, greedy32.end()));
  EXPECT_EQ(replaced.back().finish_reason, proto::FinishReason::kLength);
  EXPECT_LT(old_chunks, 400) << "the old copy ran on";
  EXPECT_NE(worker.ReadLog().find("replaces the running copy"), std::string::npos) << worker.ReadLog();
  // A cancel that reaches a replacement before it was added ends it like a running request.
  first.request_id = 21;
  coord.Send(first);
  ASSERT_TRUE(coord.Expect<proto::TokenChunk>().has_value());
  again.request_id = 21;
  // Long enough that it cannot finish before the cancel arrives, however slow the machine.
  again.sampling.max_tokens = 500;
  again.sampling.ignore_eos = true;
  coord.Send(again);
  coord.Send(proto::WorkerCancel{21});
  bool cancelled = false;
  while (auto c = coord.Expect<proto::TokenChunk>(5s)) {
    if (c->request_id == 21 && c->finish_reason == proto::FinishReason::kCancelled) {
      EXPECT_EQ(c->assignment, 3u);
      cancelled = true;
      break;
    }
  }
  EXPECT_TRUE(cancelled);
  // Nothing of either copy is left.
  ASSERT_TRUE(WaitFor([&] {
    coord.Expect<proto::Heartbeat>(200ms);
    return coord.last_heartbeat_.active_request_ids.empty() && coord.last_heartbeat_.load.kv_usage == 0;
  }, 10s));
  // The heartbeat names the newest Assign taken, so that the coordinator can tell a request it
  // lost from one still on its way.
  EXPECT_TRUE(coord.last_heartbeat_.has_last_assignment);
  EXPECT_EQ(coord.last_heartbeat_.last_assignment, 3u);
  // Each request finished once, as its last copy ended: the replaced copies count as nothing.
  const std::string& address = reg->info.metrics_address;
  httplib::Client http("127.0.0.1", std::stoi(address.substr(address.find(':') + 1)));
  auto res = http.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_NE(res->body.find("bmad_worker_requests_finished_total{reason=\"cancelled\",replica=\"test-replica\"} 1\n"),
            std::string::npos)
      << res->body;
  EXPECT_NE(res->body.find("bmad_worker_requests_finished_total{reason=\"length\",replica=\"test-replica\"} 2\n"),
            std::string::npos)
      << res->body;
  worker.Stop();
}

// The gaps between the heartbeats a worker sends while it prefills one long prompt in a single
// step; `step_ms` is how long that took (until the first token).
struct StepGaps {
  int64_t step_ms = 0;
  int64_t longest_gap_ms = 0;
  int heartbeats = 0;
  bool unhealthy_during_step = false;  // /health answered 503 at some point of the step
  int health_after_step = 0;           // /health's status once the step had ended
};

StepGaps HeartbeatsDuringALongStep(const std::vector<std::string>& sets) {
  // 1900 prompt tokens in one step of a model slow enough to take seconds over them.
  const std::string model = SlowModel();
  FakeCoordinator coord;
  std::vector<std::string> all_sets = {"scheduler.max_batch_tokens=2048", "cache.num_blocks=256"};
  all_sets.insert(all_sets.end(), sets.begin(), sets.end());
  ChildProcess worker;
  StepGaps gaps;
  auto reg = StartWorker(worker, coord, model, all_sets);
  EXPECT_TRUE(reg.has_value());
  if (!reg) return gaps;
  const std::string& address = reg->info.metrics_address;
  httplib::Client http("127.0.0.1", std::stoi(address.substr(address.find(':') + 1)));
  http.set_read_timeout(2, 0);
  auto health = [&] {
    auto res = http.Get("/health");
    return res ? res->status : -1;
  };
  coord.Send(proto::RegisterAck{true, "welcome"});
  EXPECT_TRUE(coord.Expect<proto::Heartbeat>().has_value());
  proto::Assign long_prompt = Greedy(1, std::vector<uint32_t>(1900, 300), 1);
  for (size_t i = 0; i < long_prompt.prompt_tokens.size(); ++i) long_prompt.prompt_tokens[i] = 3 + (i * 7) % 500;
  const auto start = std::chrono::steady_clock::now();
  auto last = start;
  coord.Send(long_prompt);
  bool done = false;
  // /health is polled beside the loop: a slow answer inline (a loaded machine) delayed the
  // reading of heartbeats and looked like a gap between them.
  std::atomic<bool> step_over{false};
  std::atomic<bool> unhealthy{false};
  std::thread health_poll([&] {
    while (!step_over.load()) {
      if (health() == 503) unhealthy.store(true);
      std::this_thread::sleep_for(50ms);
    }
  });
  while (!done && std::chrono::steady_clock::now() - start < 60s) {
    auto m = coord.Next(200ms);
    const auto now = std::chrono::steady_clock::now();
    if (m && std::holds_alternative<proto::Heartbeat>(*m)) {
      gaps.longest_gap_ms = std::max<int64_t>(
          gaps.longest_gap_ms, std::chrono::duration_cast<std::chrono::milliseconds>(now - last).count());
      last = now;
      ++gaps.heartbeats;
    } else if (m && std::holds_alternative<proto::TokenChunk>(*m)) {
      gaps.step_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - start).count();
      gaps.longest_gap_ms = std::max<int64_t>(
          gaps.longest_gap_ms, std::chrono::duration_cast<std::chrono::milliseconds>(now - last).count());
      done = true;
    }
  }
  step_over.store(true);
  health_poll.join();
  gaps.unhealthy_during_step = unhealthy.load();
  EXPECT_TRUE(done) << worker.ReadLog();
  gaps.health_after_step = health();
  worker.Stop();
  return gaps;
}

TEST(WorkerProcessTest, HeartbeatsGoOnDuringAStepLongerThanTheLivenessTimeout) {
  // Heartbeats used to go out only between steps: a long prefill step made a busy replica look
  // dead to the coordinator, which then moved its requests.
  const StepGaps gaps = HeartbeatsDuringALongStep({});
  ASSERT_GE(gaps.step_ms, 1000) << "the step must be long for this test to mean anything";
  EXPECT_LE(gaps.longest_gap_ms, 500) << gaps.heartbeats << " heartbeats in a " << gaps.step_ms << " ms step";
  EXPECT_GE(gaps.heartbeats, gaps.step_ms / 50 / 3);
  EXPECT_FALSE(gaps.unhealthy_during_step);
  EXPECT_EQ(gaps.health_after_step, 200);
}

TEST(WorkerProcessTest, HeartbeatsStopWhenAStepRunsPastTheStepTimeout) {
  // A step running past parallel.step_timeout_ms is a hang: the replica goes silent so that
  // the coordinator moves its requests (and /health fails: see the end).
  const StepGaps gaps = HeartbeatsDuringALongStep({"parallel.step_timeout_ms=300"});
  ASSERT_GE(gaps.step_ms, 1000) << "the step must be long for this test to mean anything";
  EXPECT_GE(gaps.longest_gap_ms, gaps.step_ms - 300 - 300) << gaps.heartbeats << " heartbeats";
  // And /health fails meanwhile, so that a liveness probe restarts a replica whose step hangs;
  // it is healthy again once the step ends.
  EXPECT_TRUE(gaps.unhealthy_during_step);
  EXPECT_EQ(gaps.health_after_step, 200);
}

TEST(WorkerProcessTest, AReplicaTheCoordinatorRefusesExitsWithAnError) {
  FakeCoordinator coord;
  ChildProcess worker;
  ASSERT_TRUE(StartWorker(worker, coord).has_value());
  coord.Send(proto::RegisterAck{false, "model 'stories260K' is not the cluster's model 'llama'"});
  auto status = worker.Wait(20s);
  ASSERT_TRUE(status.has_value()) << worker.ReadLog();
  EXPECT_EQ(*status, 1) << worker.ReadLog();
  EXPECT_NE(worker.ReadLog().find("the coordinator refused this replica: model 'stories260K'"), std::string::npos)
      << worker.ReadLog();
}

TEST(WorkerProcessTest, ASigtermWhileTheModelLoadsStopsTheWorkerOnceLoaded) {
  // A model big enough to take a noticeable time to load (about a second here), so that the
  // signal lands while it loads: it used to be lost, and the worker served on until killed.
  const std::string model = SynthModel("loads-for-a-second.gguf",
                                       {"--layers", "12", "--dim", "768", "--heads", "12", "--ffn", "2048",
                                        "--vocab-from", StoriesModelPath(), "--ctx", "1024", "--dtype", "q8_0"});
  ASSERT_FALSE(model.empty());
  const std::string dir = MakeTempDir("bmad-worker-sigterm-");
  FakeCoordinator coord;
  ChildProcess worker;
  ASSERT_TRUE(worker.Start({BinaryPath("bmad-worker"), "--config", WriteConfig(dir, coord.endpoint(), model),
                            "--max-run-ms", "120000"},
                           dir + "/worker.log"))
      << worker.error();
  ASSERT_TRUE(WaitFor([&] { return worker.ReadLog().find("loading the model") != std::string::npos; }, 30s, 2ms))
      << worker.ReadLog();
  const bool loading = worker.ReadLog().find("replica ready") == std::string::npos;
  worker.Signal(SIGTERM);
  auto status = worker.Wait(30s);
  ASSERT_TRUE(status.has_value()) << "the worker did not stop\n" << worker.ReadLog();
  EXPECT_EQ(*status, 0) << worker.ReadLog();
  EXPECT_NE(worker.ReadLog().find("stop requested"), std::string::npos) << worker.ReadLog();
  if (!loading) GTEST_SKIP() << "the model had loaded before the signal: the case was not exercised";
}

TEST(WorkerProcessTest, ASecondSigtermStopsWithoutFinishingTheRunningRequests) {
  // The first SIGTERM drains: a request of 2000 tokens on the slow model (tens of seconds) keeps
  // the worker running. The second used to change nothing; now the worker stops after its step
  // and tells the coordinator it is going down, so that its requests move at once.
  FakeCoordinator coord;
  ChildProcess worker;
  ASSERT_TRUE(StartWorker(worker, coord, SlowModel(), {"cache.num_blocks=256"}).has_value());
  coord.Send(proto::RegisterAck{true, "welcome"});
  proto::Assign long_request = Greedy(30, kPrompt, 2000);
  long_request.sampling.ignore_eos = true;
  coord.Send(long_request);
  ASSERT_TRUE(coord.Expect<proto::TokenChunk>().has_value()) << worker.ReadLog();
  worker.Signal(SIGTERM);
  ASSERT_TRUE(WaitFor([&] { return worker.ReadLog().find("stop requested: draining") != std::string::npos; },
                      10s, 5ms))
      << worker.ReadLog();
  // Still draining: more of the request comes, and the process is alive.
  int chunks_while_draining = 0;
  while (chunks_while_draining < 3) {
    auto c = coord.Expect<proto::TokenChunk>(10s);
    ASSERT_TRUE(c.has_value()) << worker.ReadLog();
    ASSERT_EQ(c->finish_reason, proto::FinishReason::kNone) << "the request finished: it was too short";
    ++chunks_while_draining;
  }
  ASSERT_FALSE(worker.Wait(0ms).has_value()) << worker.ReadLog();

  // The second as a launcher sends it through mpirun (SIGUSR1): the two count together.
  worker.Signal(SIGUSR1);
  std::optional<proto::Shutdown> down;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (!down && std::chrono::steady_clock::now() < deadline) {
    auto m = coord.Next(200ms);
    if (!m) continue;
    if (auto* c = std::get_if<proto::TokenChunk>(&*m)) {
      EXPECT_EQ(c->finish_reason, proto::FinishReason::kNone) << "the request was ended, not handed back";
    } else if (auto* d = std::get_if<proto::Shutdown>(&*m)) {
      down = *d;
    }
  }
  ASSERT_TRUE(down.has_value()) << "no Shutdown after the second SIGTERM\n" << worker.ReadLog();
  EXPECT_NE(down->reason.find("test-replica was stopped before 1 running request(s) finished"), std::string::npos)
      << down->reason;
  auto status = worker.Wait(20s);
  ASSERT_TRUE(status.has_value()) << "the worker did not stop\n" << worker.ReadLog();
  EXPECT_EQ(*status, 0) << worker.ReadLog();
  EXPECT_NE(worker.ReadLog().find("stopping now, without finishing the running requests"), std::string::npos)
      << worker.ReadLog();
  // Nothing after the Shutdown: a heartbeat would make the replica look live again.
  while (auto m = coord.Next(300ms)) {
    EXPECT_FALSE(std::holds_alternative<proto::Heartbeat>(*m)) << "a heartbeat after the Shutdown";
  }
}

TEST(WorkerProcessTest, ADrainPastItsBoundHandsTheRunningRequestsBack) {
  // worker.drain_timeout_ms: a request of 2000 tokens on the slow model outlasts a drain of 1 s;
  // the worker then stops and tells the coordinator, which moves the request on, instead of
  // draining until Kubernetes kills the pod at the end of its grace period (the chart sets the
  // bound within it).
  FakeCoordinator coord;
  ChildProcess worker;
  ASSERT_TRUE(StartWorker(worker, coord, SlowModel(), {"cache.num_blocks=256", "worker.drain_timeout_ms=1000"})
                  .has_value());
  coord.Send(proto::RegisterAck{true, "welcome"});
  proto::Assign long_request = Greedy(31, kPrompt, 2000);
  long_request.sampling.ignore_eos = true;
  coord.Send(long_request);
  ASSERT_TRUE(coord.Expect<proto::TokenChunk>().has_value()) << worker.ReadLog();
  worker.Signal(SIGTERM);
  std::optional<proto::Shutdown> down;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!down && std::chrono::steady_clock::now() < deadline) {
    auto m = coord.Next(200ms);
    if (!m) continue;
    if (auto* c = std::get_if<proto::TokenChunk>(&*m)) {
      ASSERT_EQ(c->finish_reason, proto::FinishReason::kNone) << "the request ended: it was too short";
    } else if (auto* d = std::get_if<proto::Shutdown>(&*m)) {
      down = *d;
    }
  }
  ASSERT_TRUE(down.has_value()) << "no Shutdown once the drain ran past its bound\n" << worker.ReadLog();
  EXPECT_TRUE(down->planned);
  EXPECT_NE(down->reason.find("test-replica was stopped before 1 running request(s) finished"), std::string::npos)
      << down->reason;
  auto status = worker.Wait(20s);
  ASSERT_TRUE(status.has_value()) << "the worker did not stop\n" << worker.ReadLog();
  EXPECT_EQ(*status, 0) << worker.ReadLog();
  const std::string log = worker.ReadLog();
  EXPECT_NE(log.find("stop requested: draining"), std::string::npos) << log;
  EXPECT_NE(log.find("draining past worker.drain_timeout_ms"), std::string::npos) << log;
}

TEST(WorkerProcessTest, ASigtermToTheChartsLaunchScriptDrainsTheReplica) {
  // The Helm chart's leader script used to exec mpirun, which answers a SIGTERM by signalling its
  // ranks a second later and killing them a second after that: a pod's termination cut every
  // running request short. Run here as the pod runs it (one rank, on this host) with a request
  // of 1000 tokens on the slow model, seconds of work after the signal.
  FakeCoordinator coord;
  const std::string dir = MakeTempDir("bmad-launch-replica-");
  const std::string worker_bin = BinaryPath("bmad-worker");
  const char* path = std::getenv("PATH");
  ChildProcess launcher;
  ASSERT_TRUE(launcher.Start(
      {"/bin/bash", std::string(BMAD_SOURCE_DIR) + "/helm/bmad/files/launch-replica.sh"}, dir + "/launch.log",
      {{"BMAD_POOL", "normal"}, {"BMAD_RANKS", "1"}, {"BMAD_SLOTS_PER_POD", "1"},
       {"BMAD_CONFIG", WriteConfig(dir, coord.endpoint(), SlowModel())}, {"BMAD_HOSTFILE", dir + "/hostfile"},
       {"BMAD_REPLICA_ID", "test-replica"}, {"BMAD_WORKER_ARGS", "--set\ncache.num_blocks=256\n--max-run-ms\n120000"},  // one a line, as the chart writes them
       {"PATH", worker_bin.substr(0, worker_bin.rfind('/')) + ":" + (path ? path : "/usr/bin:/bin")}}))
      << launcher.error();
  ASSERT_TRUE(coord.Expect<proto::Register>(60s).has_value()) << launcher.ReadLog();
  coord.Send(proto::RegisterAck{true, "welcome"});
  proto::Assign request = Greedy(40, kPrompt, 1000);
  request.sampling.ignore_eos = true;
  coord.Send(request);
  auto first = coord.Expect<proto::TokenChunk>();
  ASSERT_TRUE(first.has_value()) << launcher.ReadLog();
  const auto signalled = std::chrono::steady_clock::now();
  launcher.Signal(SIGTERM);
  uint32_t tokens = static_cast<uint32_t>(first->token_ids.size());
  proto::FinishReason finish = first->finish_reason;
  while (finish == proto::FinishReason::kNone) {
    auto c = coord.Expect<proto::TokenChunk>(10s);
    ASSERT_TRUE(c.has_value()) << "the request was cut short after " << tokens << " tokens\n" << launcher.ReadLog();
    tokens += static_cast<uint32_t>(c->token_ids.size());
    finish = c->finish_reason;
  }
  EXPECT_EQ(finish, proto::FinishReason::kLength);
  EXPECT_EQ(tokens, 1000u);
  // Its last word is a Shutdown, so the coordinator stops counting on it at once (a final
  // heartbeat made it look live until the liveness timeout).
  auto down = coord.Expect<proto::Shutdown>(20s);
  ASSERT_TRUE(down.has_value()) << "no Shutdown after the drain\n" << launcher.ReadLog();
  EXPECT_NE(down->reason.find("test-replica stopped after draining"), std::string::npos) << down->reason;
  auto status = launcher.Wait(30s);
  ASSERT_TRUE(status.has_value()) << "the launcher did not stop\n" << launcher.ReadLog();
  EXPECT_EQ(*status, 0) << launcher.ReadLog();
  const std::string log = launcher.ReadLog();
  EXPECT_NE(log.find("launch-replica: stop requested: draining the replica"), std::string::npos) << log;
  EXPECT_NE(log.find("stop requested: draining"), std::string::npos) << log;
  EXPECT_NE(log.find("replica stopped"), std::string::npos) << log;
  // The case this test is for: the drain outlasted mpirun's two seconds.
  EXPECT_GE(std::chrono::steady_clock::now() - signalled, 2500ms)
      << "the request finished too soon after the signal for the test to mean anything";
}

TEST(WorkerProcessTest, AWorkerReconnectsWhenItsCoordinatorVanishesWithoutClosing) {
  // A coordinator whose node died (or cut off by a partition) closes nothing: the worker's
  // connection stayed up, TCP retransmitting for about 15 minutes, while the coordinator
  // restarted behind the same name waited for replicas. ZeroMQ's own heartbeats now end the
  // dead connection within the liveness timeout, and the worker connects again. A relay
  // stands between them here: frozen, it is that silent dead peer.
  auto port_of = [](const std::string& endpoint) { return std::stoi(endpoint.substr(endpoint.rfind(':') + 1)); };
  auto first = std::make_unique<FakeCoordinator>();
  TcpProxy relay(port_of(first->endpoint()));
  ASSERT_GT(relay.port(), 0);
  const std::string dir = MakeTempDir("bmad-worker-reconnect-");
  ChildProcess worker;
  ASSERT_TRUE(worker.Start({BinaryPath("bmad-worker"), "--config",
                            WriteConfig(dir, "tcp://127.0.0.1:" + std::to_string(relay.port())), "--set",
                            "coordinator.liveness_timeout_ms=1000", "--max-run-ms", "120000"},
                           dir + "/worker.log"))
      << worker.error();
  ASSERT_TRUE(first->Expect<proto::Register>().has_value()) << worker.ReadLog();
  first->Send(proto::RegisterAck{true, "welcome"});
  ASSERT_TRUE(first->Expect<proto::Heartbeat>().has_value());
  ASSERT_EQ(relay.accepted(), 1);

  relay.Freeze();
  first.reset();
  FakeCoordinator second;
  relay.SetUpstream(port_of(second.endpoint()));
  auto heard = second.Next(20s);
  ASSERT_TRUE(heard.has_value()) << "the worker never reached the new coordinator\n" << worker.ReadLog();
  EXPECT_TRUE(std::holds_alternative<proto::Heartbeat>(*heard) || std::holds_alternative<proto::Register>(*heard))
      << proto::MessageName(*heard);
  EXPECT_GE(relay.accepted(), 2);
  worker.Stop();
}

TEST(WorkerProcessTest, ReadyOnlyWhileTheCoordinatorAnswers) {
  // /ready used to stay 200 after the coordinator died: readiness meant "registered once".
  // Now the replica needs an answer to its heartbeats within the liveness timeout.
  FakeCoordinator coord;
  ChildProcess worker;
  auto reg = StartWorker(worker, coord, SharedModelsDir() + "/stories260K.gguf",
                         {"coordinator.liveness_timeout_ms=1000"});
  ASSERT_TRUE(reg.has_value());
  const std::string& address = reg->info.metrics_address;
  httplib::Client http("127.0.0.1", std::stoi(address.substr(address.find(':') + 1)));
  auto ready = [&] {
    auto res = http.Get("/ready");
    return res ? res->status : -1;
  };
  EXPECT_EQ(ready(), 503) << "ready before registration";
  // Its registrations unanswered past the liveness timeout: the log says so (a mistyped endpoint
  // used to leave the worker waiting without a word).
  EXPECT_TRUE(WaitFor([&] { return worker.ReadLog().find("not registered: no answer from the coordinator") !=
                                   std::string::npos; }, 10s))
      << worker.ReadLog();
  coord.Send(proto::RegisterAck{true, "welcome"});
  // Answering each heartbeat for 3 s (three liveness timeouts; one is long enough that the
  // check after the last answer cannot run past it on a loaded machine) keeps it ready.
  ASSERT_TRUE(WaitFor([&] { return ready() == 200; }, 10s)) << worker.ReadLog();
  const auto answer_until = std::chrono::steady_clock::now() + 3000ms;
  int answered = 0;
  bool echoed = false;  // the acks' newest Assign number comes back in later heartbeats
  while (std::chrono::steady_clock::now() < answer_until) {
    if (auto hb = coord.Expect<proto::Heartbeat>(200ms)) {
      echoed = echoed || (hb->has_seen_assignment && hb->seen_assignment == 0xfeedu);
      coord.Send(proto::HeartbeatAck{0xfeedu, true});
      ++answered;
    }
  }
  EXPECT_GE(answered, 10);
  EXPECT_TRUE(echoed) << "the heartbeats never echoed the number the acks carried";
  EXPECT_EQ(ready(), 200) << worker.ReadLog();
  // Silence: not ready within the timeout (generously bounded here), and the log says why.
  const auto silent_since = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitFor([&] { return ready() == 503; }, 5s)) << worker.ReadLog();
  EXPECT_GE(std::chrono::steady_clock::now() - silent_since, 800ms);
  EXPECT_NE(worker.ReadLog().find("no word from the coordinator"), std::string::npos) << worker.ReadLog();
  EXPECT_TRUE(worker.running());  // its requests, if any, are not given up
  // One answer and it is ready again.
  ASSERT_TRUE(coord.Expect<proto::Heartbeat>(2s).has_value());
  coord.Send(proto::HeartbeatAck{});
  EXPECT_TRUE(WaitFor([&] { return ready() == 200; }, 5s)) << worker.ReadLog();
  EXPECT_NE(worker.ReadLog().find("the coordinator answers again"), std::string::npos);
  EXPECT_EQ(worker.Stop(), 0) << worker.ReadLog();
}

TEST(WorkerProcessTest, ABurstOfNotFoundAnswersGetsOneRegistrationAHeartbeatInterval) {
  // After an outage the heartbeats queued meanwhile reach a restarted coordinator at once, and
  // each is answered "unknown replica; register": one Register per answer registered the replica
  // over and over.
  FakeCoordinator coord;
  ChildProcess worker;
  auto reg = StartWorker(worker, coord, SharedModelsDir() + "/stories260K.gguf",
                         {"worker.heartbeat_ms=1000", "coordinator.liveness_timeout_ms=5000"});
  ASSERT_TRUE(reg.has_value());
  coord.Send(proto::RegisterAck{true, "welcome"});
  ASSERT_TRUE(coord.Expect<proto::Heartbeat>(5s).has_value());
  // A heartbeat interval after the registration, so the first answer may register at once.
  std::this_thread::sleep_for(1100ms);
  for (int i = 0; i < 20; ++i) {
    coord.Send(proto::ErrorMessage{StatusCode::kNotFound, "unknown replica; register", 0, "", 0});
  }
  // 1.5 s: the answer's Register, and one more a heartbeat interval later (still unregistered).
  int registers = 0;
  const auto until = std::chrono::steady_clock::now() + 1500ms;
  while (std::chrono::steady_clock::now() < until) {
    auto m = coord.Next(50ms);
    if (m && std::holds_alternative<proto::Register>(*m)) ++registers;
  }
  EXPECT_GE(registers, 1) << worker.ReadLog();
  EXPECT_LE(registers, 3) << "a Register per answer";
  EXPECT_EQ(worker.Stop(), 0) << worker.ReadLog();
}

TEST(WorkerProcessTest, BadStartupIsOneClearError) {
  const std::string dir = MakeTempDir("bmad-worker-");
  {
    std::ofstream f(dir + "/bad.yaml");
    f << "model:\n  path: /nonexistent/model.gguf\nmetrics:\n  worker_port: 0\n";
  }
  // Starts the worker on bad.yaml with `sets` and `more` arguments; it must exit `code` with
  // `message` in its log.
  auto expect_failure = [&](const std::vector<std::string>& sets, const std::string& message,
                            const std::vector<std::string>& more = {}, int code = 1) {
    std::vector<std::string> args = {BinaryPath("bmad-worker"), "--config", dir + "/bad.yaml"};
    for (const std::string& set : sets) {
      args.push_back("--set");
      args.push_back(set);
    }
    args.insert(args.end(), more.begin(), more.end());
    ChildProcess worker;
    ASSERT_TRUE(worker.Start(args, dir + "/w.log"));
    auto status = worker.Wait(20s);
    ASSERT_TRUE(status.has_value());
    EXPECT_EQ(*status, code) << worker.ReadLog();
    EXPECT_NE(worker.ReadLog().find(message), std::string::npos) << worker.ReadLog();
  };
  const std::string stories = "model.path=" + SharedModelsDir() + "/stories260K.gguf";
  expect_failure({}, "/nonexistent/model.gguf");
  expect_failure({"worker.backend=cuda", stories}, "cuda");
  // Block 0 is reserved: one block is none. The error names the key that was set.
  expect_failure({"cache.num_blocks=1", stories}, "cache.num_blocks is 1: block 0 is reserved");
  // The replica index offsets the metrics port: past 65535 is an error, not a wrapped port.
  expect_failure({"metrics.worker_port=65530", stories},
                 "metrics.worker_port 65530 + replica index 10 is port 65540, past 65535", {"--replica-index", "10"});
  // A stray argument is a usage error, as for every bmad command.
  expect_failure({stories}, "unexpected argument 'stray'", {"stray"}, 2);
}

}  // namespace
}  // namespace bmad::testing
