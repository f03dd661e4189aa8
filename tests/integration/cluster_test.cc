// End to end on 127.0.0.1: bmad-coordinator and bmad-worker replicas started with mpirun, with
// the real models. Greedy answers over HTTP equal `bmad generate`; 200 concurrent requests all
// complete; a client that disconnects mid-stream gets its request cancelled and its KV blocks
// freed; kill -9 of a replica mid-stream loses nothing (migrated requests finish with the same
// text); garbage at every door gets a clear error while the cluster keeps serving. The OpenAI
// request features are in openai_features_test.cc.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <csignal>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "common/proto/frames.h"
#include "coordinator/client/client.h"
#include "tests/support/cluster_http.h"
#include "tests/support/free_port.h"
#include "tests/support/local_cluster.h"
#include "tests/support/local_greedy.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"
#include "tests/support/sse_completion.h"
#include "tests/support/synth_model.h"

namespace bmad::testing {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

std::string LocalText(const std::string& model, const std::string& prompt, uint32_t max_tokens,
                      bool ignore_eos = false) {
  return LocalGreedyText(model, prompt, max_tokens, ignore_eos);
}

TEST(ClusterTest, ResponseIdsAreUniqueAndConnectionsStayOpen) {
  LocalCluster cluster({StoriesModelPath(), 1, 0});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  // Ten requests on one kept-alive connection (httplib's default closed it after five): each
  // response carries a fresh, not merely sequential, id.
  httplib::Client c("127.0.0.1", cluster.http_port());
  c.set_keep_alive(true);
  c.set_read_timeout(60, 0);
  std::set<std::string> ids;
  for (int i = 0; i < 10; ++i) {
    auto res = c.Post("/v1/completions", Completion("Once", 2, false).dump(), "application/json");
    ASSERT_TRUE(res) << i;
    ASSERT_EQ(res->status, 200) << res->body;
    const std::string id = json::parse(res->body)["id"];
    EXPECT_TRUE(id.starts_with("cmpl-")) << id;
    EXPECT_GT(id.size(), std::string("cmpl-").size() + 16) << id;  // 16 hex digits, then the request id
    ids.insert(id);
    const std::string keep_alive = res->get_header_value("Keep-Alive");
    EXPECT_EQ(keep_alive.find("max=0"), std::string::npos) << keep_alive;
    EXPECT_NE(res->get_header_value("Connection"), "close") << i;
  }
  EXPECT_EQ(ids.size(), 10u);
}

TEST(ClusterTest, GreedyOverHttpEqualsLocalGenerate) {
  for (const std::string& model : {StoriesModelPath(), TinyRandomModelPath()}) {
    LocalCluster cluster({model, 1, 0});
    std::string error;
    ASSERT_TRUE(cluster.Start(&error)) << error;
    const std::string want = LocalText(model, "Once upon a time", 32);
    HttpResult r = Post(cluster.http_port(), "/v1/completions", Completion("Once upon a time", 32, false).dump());
    ASSERT_EQ(r.status, 200) << r.body;
    json j = json::parse(r.body);
    EXPECT_EQ(j["choices"][0]["text"], want) << model;
    EXPECT_EQ(j["usage"]["completion_tokens"], 32);
    StreamResult s = Stream(cluster.http_port(), Completion("Once upon a time", 32, true));
    EXPECT_TRUE(s.done);
    EXPECT_EQ(s.text, want) << model;
    EXPECT_EQ(s.completion_tokens, 32);
  }
}

// The harness itself: a process that exits while the cluster starts (here the coordinator,
// whose /metrics port another socket holds) is named at once, with the logs, instead of after
// the whole wait for replicas.
TEST(ClusterTest, AProcessThatExitsWhileStartingIsNamed) {
  const int port = PickFreePort();
  const int holder = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  ASSERT_EQ(bind(holder, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(holder, 1), 0);
  LocalCluster cluster(
      {StoriesModelPath(), 1, 0, {"metrics.coordinator_port=" + std::to_string(port)}});
  std::string error;
  EXPECT_FALSE(cluster.Start(&error));
  close(holder);
  EXPECT_NE(error.find("the coordinator exited while the cluster was starting"), std::string::npos)
      << error;
  EXPECT_NE(error.find(std::to_string(port)), std::string::npos) << error;
}

TEST(ClusterTest, GreedyOverTheSocketEqualsLocalGenerate) {
  LocalCluster cluster({StoriesModelPath(), 1, 1});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  auto client = client::Client::Connect(cluster.client_endpoint());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  proto::Submit submit;
  submit.prompt_text = "Once upon a time";
  submit.sampling.temperature = 0;
  submit.sampling.max_tokens = 32;
  std::string streamed;
  auto result = (*client)->Generate(submit, [&](const proto::TokenChunk& c) { streamed += c.text; },
                                    std::chrono::milliseconds(30000));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(streamed, LocalText(StoriesModelPath(), "Once upon a time", 32));
  EXPECT_EQ(result->finish_reason, proto::FinishReason::kLength);
  auto status = (*client)->QueryStatus(std::chrono::milliseconds(5000));
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->replicas.size(), 2u);
  EXPECT_EQ(status->model_name, "stories260K");
}

TEST(ClusterTest, TwoHundredConcurrentRequestsAllComplete) {
  LocalCluster cluster({StoriesModelPath(), 2, 0});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  std::atomic<int> ok{0};
  std::vector<std::jthread> clients;
  for (int i = 0; i < 200; ++i) {
    clients.emplace_back([&, i] {
      StreamResult s = Stream(cluster.http_port(),
                              Completion("Once upon a time " + std::to_string(i), 12, true, true));
      if (s.done && s.completion_tokens == 12) ++ok;
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 200) << cluster.Logs().substr(0, 4000);
}

// A model slow enough on one thread that a long answer takes many seconds (stories260K writes
// 500 tokens in milliseconds): 8 layers of width 512 in F32, stories260K's vocabulary.
std::string SlowModel() {
  return SynthModel("slow8x512.gguf",
                    {"--layers", "8", "--dim", "512", "--heads", "8", "--ffn", "1536", "--ctx",
                     "2048", "--vocab-from", StoriesModelPath(), "--dtype", "f32", "--seed", "3"});
}

// Waits until replica 0 runs nothing, holds no KV block and has counted one cancelled request,
// then checks that the coordinator counted it too. Replica 0's /metrics text ends in `metrics`.
void ExpectOneCancelledAndFreed(LocalCluster& cluster, std::string& metrics,
                                std::chrono::seconds timeout) {
  httplib::Client worker("127.0.0.1", cluster.worker_metrics_port(0));
  ASSERT_TRUE(WaitFor(
      [&] {
        auto res = worker.Get("/metrics");
        metrics = res ? res->body : "";
        return LocalCluster::MetricValue(metrics, "bmad_worker_requests_running{replica=\"normal-0\"}") == 0.0 &&
               LocalCluster::MetricValue(metrics, "bmad_worker_kv_usage_ratio{replica=\"normal-0\"}") == 0.0 &&
               LocalCluster::MetricValue(
                   metrics, "bmad_worker_requests_finished_total{reason=\"cancelled\",replica=\"normal-0\"}") == 1.0;
      },
      timeout))
      << metrics;
  EXPECT_EQ(LocalCluster::MetricValue(cluster.Get("/metrics"),
                                      "bmad_coordinator_requests_finished_total{status=\"cancelled\"}"),
            1.0);
}

TEST(ClusterTest, DisconnectMidStreamCancelsAndFreesBlocks) {
  // On the slow model: stories260K writes 400 tokens in milliseconds, and on a loaded machine
  // the request could end before the coordinator saw the client go.
  LocalCluster cluster({SlowModel(), 1, 0, {"worker.threads=1"}});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  StreamResult s = Stream(cluster.http_port(), Completion("Once", 400, true, true), nullptr,
                          /*stop_after_events=*/5);
  EXPECT_FALSE(s.done);
  std::string metrics;
  ExpectOneCancelledAndFreed(cluster, metrics, 15s);
}

TEST(ClusterTest, ClosingANonStreamingRequestCancelsIt) {
  LocalCluster cluster({SlowModel(), 1, 0, {"worker.threads=1"}});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  // The client gives up after a second; 1900 tokens take this model many seconds. The handler,
  // which writes nothing until the whole answer is there, must notice and cancel the request.
  httplib::Client client("127.0.0.1", cluster.http_port());
  client.set_read_timeout(1, 0);
  EXPECT_FALSE(client.Post("/v1/completions", Completion("Once", 1900, false, true).dump(),
                           "application/json"));
  client.stop();
  std::string metrics;
  ExpectOneCancelledAndFreed(cluster, metrics, 20s);
  // Far fewer tokens than asked for were made.
  EXPECT_LT(LocalCluster::MetricValue(metrics, "bmad_worker_generation_tokens_total{replica=\"normal-0\"}").value_or(1e9),
            1900.0)
      << metrics;
}

TEST(ClusterTest, KillNineOfAReplicaLosesNothing) {
  // On the slow model (about ten milliseconds a token), so that the kill lands mid-stream:
  // stories260K makes 240 tokens in milliseconds, and on a loaded machine every request could
  // finish before the kill.
  LocalCluster cluster({SlowModel(), 2, 0, {"worker.threads=1"}});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog", "Lily had a toy",
                                            "One day the sun", "Tom and Sue", "A big red ball"};
  const int kTokens = 80;
  std::vector<std::string> want;
  for (const auto& p : prompts) want.push_back(LocalText(SlowModel(), p, kTokens, true));
  std::vector<StreamResult> got(prompts.size());
  std::atomic<int> events{0};
  std::vector<std::jthread> clients;  // joined however the test ends (an ASSERT returns early)
  for (size_t i = 0; i < prompts.size(); ++i) {
    clients.emplace_back([&, i] { got[i] = Stream(cluster.http_port(), Completion(prompts[i], kTokens, true, true), &events); });
  }
  ASSERT_TRUE(WaitFor([&] { return events.load() >= static_cast<int>(prompts.size()) * 3; }, 30s, 1ms));
  ASSERT_TRUE(cluster.KillReplica(0));
  for (auto& t : clients) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_TRUE(got[i].done) << prompts[i];
    EXPECT_EQ(got[i].completion_tokens, kTokens) << prompts[i];
    EXPECT_EQ(got[i].text, want[i]) << prompts[i];
  }
  auto migrations = LocalCluster::MetricValue(cluster.Get("/metrics"), "bmad_coordinator_migrations_total");
  ASSERT_TRUE(migrations.has_value());
  EXPECT_GE(*migrations, 1.0) << "the killed replica was serving nothing: the test proved nothing";
  EXPECT_EQ(cluster.LiveReplicas(), 1);
}

std::string ReplicaMetrics(LocalCluster& cluster, int index) {
  httplib::Client worker("127.0.0.1", cluster.worker_metrics_port(index));
  auto res = worker.Get("/metrics");
  return res ? res->body : "";
}

std::optional<double> ReplicaMetric(const std::string& metrics, const std::string& name, int index,
                                    const std::string& labels = "") {
  return LocalCluster::MetricValue(metrics, name + "{" + labels + "replica=\"normal-" + std::to_string(index) + "\"}");
}

// Streams one greedy request, stops the replica serving it (SIGSTOP) past the liveness timeout
// after the first tokens, wakes it, and checks the client got every token of an undisturbed
// run, with no error. The stall must have been taken for a death (a migration), or the test
// proves nothing. Returns the index of the replica that stalled.
int StallTheServingReplicaMidStream(LocalCluster& cluster, int replicas, int tokens) {
  const std::string want = LocalText(SlowModel(), "Once", tokens, true);
  std::atomic<int> events{0};
  StreamResult got;
  std::jthread client([&] { got = Stream(cluster.http_port(), Completion("Once", tokens, true, true), &events); });
  int serving = -1;
  EXPECT_TRUE(WaitFor([&] { return events.load() >= 10; }, 30s, 1ms));
  for (int i = 0; i < replicas; ++i) {
    if (ReplicaMetric(ReplicaMetrics(cluster, i), "bmad_worker_requests_running", i) == 1.0) serving = i;
  }
  EXPECT_GE(serving, 0) << "no replica runs the request";
  if (serving >= 0) {
    EXPECT_TRUE(cluster.SignalRank(serving, 0, SIGSTOP));
    std::this_thread::sleep_for(1500ms);  // the liveness timeout is 600 ms
    EXPECT_TRUE(cluster.SignalRank(serving, 0, SIGCONT));
  }
  client.join();
  EXPECT_TRUE(got.done) << got.error << cluster.Logs();
  EXPECT_EQ(got.completion_tokens, tokens);
  EXPECT_EQ(got.text, want);
  auto migrations = LocalCluster::MetricValue(cluster.Get("/metrics"), "bmad_coordinator_migrations_total");
  EXPECT_GE(migrations.value_or(0), 1.0) << "the stall was not taken for a death";
  return serving;
}

TEST(ClusterTest, AStalledReplicaGetsItsRequestBackWithoutAnError) {
  // The only replica stalls: its request is moved (to nowhere yet) and given back to it when it
  // wakes, under the same id. That used to end the stream with "request 1 is already running
  // here". Now the coordinator first cancels the old copy (an orphan: the heartbeat or a chunk
  // of the woken replica names it), and the worker would replace it anyway if the new
  // assignment came first (that path: worker_process_test).
  LocalCluster cluster({SlowModel(), 1, 0, {"worker.threads=1"}});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  ASSERT_EQ(StallTheServingReplicaMidStream(cluster, 1, 120), 0);
  // No copy is left behind.
  std::string metrics;
  EXPECT_TRUE(WaitFor([&] {
    metrics = ReplicaMetrics(cluster, 0);
    return ReplicaMetric(metrics, "bmad_worker_requests_running", 0) == 0.0 &&
           ReplicaMetric(metrics, "bmad_worker_kv_usage_ratio", 0) == 0.0;
  }, 10s)) << metrics;
}

TEST(ClusterTest, AStalledReplicasOrphanCopyIsCancelled) {
  // With two replicas the request moves to the other one. The stalled replica, once awake, must
  // stop its orphan copy rather than compute it to the end.
  LocalCluster cluster({SlowModel(), 2, 0, {"worker.threads=1"}});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  const int kTokens = 400;
  const int stalled = StallTheServingReplicaMidStream(cluster, 2, kTokens);
  ASSERT_GE(stalled, 0);
  std::string metrics;
  EXPECT_TRUE(WaitFor([&] {
    metrics = ReplicaMetrics(cluster, stalled);
    return ReplicaMetric(metrics, "bmad_worker_requests_running", stalled) == 0.0;
  }, 10s)) << metrics;
  EXPECT_EQ(ReplicaMetric(metrics, "bmad_worker_requests_finished_total", stalled, "reason=\"cancelled\","), 1.0)
      << metrics;
  // Stopped as soon as the coordinator heard from it again (a heartbeat, a chunk), not when the
  // moved copy finished (each replica makes tokens at about the same rate).
  EXPECT_LT(ReplicaMetric(metrics, "bmad_worker_generation_tokens_total", stalled).value_or(1e9), kTokens / 2.0)
      << "the orphan copy ran on";
}

TEST(ClusterTest, ADrainingReplicaIsOfferedNothingAfterItsFirstRefusal) {
  // SIGTERM drains a worker: it finishes what it runs and refuses new work. The coordinator
  // learns it from the first refusal and routes around it; it used to keep offering requests
  // (round robin: every other one), each bounced back.
  LocalCluster cluster({SlowModel(), 2, 0, {"worker.threads=1", "router.policy=round_robin"}});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  std::atomic<int> events{0};
  StreamResult long_one;
  std::jthread client([&] { long_one = Stream(cluster.http_port(), Completion("Once", 300, true, true), &events); });
  ASSERT_TRUE(WaitFor([&] { return events.load() >= 3; }, 30s, 1ms));
  int serving = -1;
  for (int i = 0; i < 2; ++i) {
    if (ReplicaMetric(ReplicaMetrics(cluster, i), "bmad_worker_requests_running", i) == 1.0) serving = i;
  }
  ASSERT_GE(serving, 0);
  ASSERT_TRUE(cluster.SignalRank(serving, 0, SIGTERM));
  ASSERT_TRUE(WaitFor([&] { return cluster.replica_process(serving).ReadLog().find("draining") != std::string::npos; },
                      10s));
  for (int i = 0; i < 6; ++i) {
    HttpResult r = Post(cluster.http_port(), "/v1/completions", Completion("The dog", 2, false).dump());
    EXPECT_EQ(r.status, 200) << r.body;
  }
  client.join();
  EXPECT_TRUE(long_one.done) << long_one.error;  // what it ran when told to drain finished there
  EXPECT_EQ(long_one.completion_tokens, 300);
  const std::string log = cluster.replica_process(serving).ReadLog();
  size_t refusals = 0;
  for (size_t at = log.find("assignment refused"); at != std::string::npos; at = log.find("assignment refused", at + 1)) {
    ++refusals;
  }
  EXPECT_LE(refusals, 1u) << log;
}

TEST(ClusterTest, AWorkerIsReadyOnlyWhileItsCoordinatorAnswers) {
  // The coordinator answers heartbeats; a worker whose coordinator is stopped reports itself
  // not ready (it used to stay ready), and ready again once the coordinator wakes.
  LocalCluster cluster({StoriesModelPath(), 1, 0, {"worker.threads=1"}});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  httplib::Client worker("127.0.0.1", cluster.worker_metrics_port(0));
  auto ready = [&] {
    auto res = worker.Get("/ready");
    return res ? res->status : -1;
  };
  ASSERT_TRUE(WaitFor([&] { return ready() == 200; }, 10s)) << cluster.Logs();
  std::this_thread::sleep_for(1800ms);  // three liveness timeouts
  EXPECT_EQ(ready(), 200) << cluster.Logs();
  cluster.coordinator_process().Signal(SIGSTOP);
  const bool went_unready = WaitFor([&] { return ready() == 503; }, 5s);
  cluster.coordinator_process().Signal(SIGCONT);
  EXPECT_TRUE(went_unready) << cluster.Logs();
  EXPECT_TRUE(WaitFor([&] { return ready() == 200; }, 10s)) << cluster.Logs();
  // And it serves.
  HttpResult r = Post(cluster.http_port(), "/v1/completions", Completion("Once", 4, false).dump());
  EXPECT_EQ(r.status, 200) << r.body;
}

TEST(ClusterTest, EachCoordinatorProcessNumbersItsRequestsAndAssignmentsAfresh) {
  // A replica may still run a copy of the last coordinator process's request when the new one
  // assigns its own requests there. Were the new request numbered as the old (ids restarted
  // from 1), the replica would take it for a replacement of the copy (and count neither in its
  // metrics), and the copy's chunks must never be taken for the new request's (another client's
  // text). Both the request ids and the assignment numbers start at random in each process.
  const std::string dir = MakeTempDir("bmad-restart-");
  const std::string client = "tcp://127.0.0.1:" + std::to_string(PickFreePort());
  const std::string worker_endpoint = "tcp://127.0.0.1:" + std::to_string(PickFreePort());
  {
    std::ofstream f(dir + "/c.yaml");
    f << "model:\n  path: " << StoriesModelPath() << "\n"
      << "coordinator:\n  client_endpoint: " << client << "\n  worker_endpoint: " << worker_endpoint
      << "\n  http_port: " << PickFreePort() << "\n  drain_timeout_ms: 0\n"
      << "metrics:\n  coordinator_port: " << PickFreePort() << "\n";
  }
  std::vector<uint32_t> numbers;
  std::vector<uint64_t> ids;
  for (int run = 0; run < 2; ++run) {
    ChildProcess coordinator;
    ASSERT_TRUE(coordinator.Start({BinaryPath("bmad-coordinator"), "--config", dir + "/c.yaml",
                                   "--max-run-ms", "60000"},
                                  dir + "/coordinator" + std::to_string(run) + ".log"));
    zmq::context_t ctx;
    zmq::socket_t worker(ctx, zmq::socket_type::dealer);
    worker.set(zmq::sockopt::linger, 0);
    worker.set(zmq::sockopt::rcvtimeo, 200);
    worker.set(zmq::sockopt::routing_id, "fake/" + std::to_string(run));
    worker.connect(worker_endpoint);
    proto::ReplicaInfo info;
    info.replica_id = "fake";
    info.tp = info.pp = 1;
    info.kv_blocks = 100;
    info.block_size = 16;
    info.max_seqs = 8;
    info.model_name = "stories260K";
    info.context_length = 512;
    bool registered = false;
    for (int i = 0; i < 100 && !registered; ++i) {  // until the coordinator is up
      ASSERT_TRUE(proto::SendMessage(worker, proto::Register{info, 1}).ok());
      auto in = proto::ReceiveMessage(worker, false);
      registered = in && in->message.ok() && std::holds_alternative<proto::RegisterAck>(*in->message) &&
                   std::get<proto::RegisterAck>(*in->message).accepted;
    }
    ASSERT_TRUE(registered) << coordinator.ReadLog();
    ASSERT_TRUE(proto::SendMessage(worker, proto::Heartbeat{"fake", {}, {}}).ok());
    zmq::socket_t submitter(ctx, zmq::socket_type::dealer);
    submitter.set(zmq::sockopt::linger, 0);
    submitter.set(zmq::sockopt::rcvtimeo, 5000);
    submitter.connect(client);
    proto::SamplingParams greedy;
    greedy.temperature = 0;
    greedy.max_tokens = 2;
    ASSERT_TRUE(proto::SendMessage(submitter, proto::Submit{"c", "", true, "", {1, 403}, greedy, 1, 0, true}).ok());
    auto accepted = proto::ReceiveMessage(submitter, false);
    ASSERT_TRUE(accepted && accepted->message.ok() && std::holds_alternative<proto::Accepted>(*accepted->message));
    const uint64_t id = std::get<proto::Accepted>(*accepted->message).request_id;
    EXPECT_GE(id, 1u);
    EXPECT_LE(id, uint64_t{1} << 52);  // exact as a JSON number
    ids.push_back(id);
    std::optional<proto::Assign> assign;
    for (int i = 0; i < 50 && !assign; ++i) {
      auto in = proto::ReceiveMessage(worker, false);
      if (in && in->message.ok() && std::holds_alternative<proto::Assign>(*in->message)) {
        assign = std::get<proto::Assign>(*in->message);
      }
    }
    ASSERT_TRUE(assign.has_value()) << coordinator.ReadLog();
    EXPECT_EQ(assign->request_id, id);
    numbers.push_back(assign->assignment);
    EXPECT_EQ(coordinator.Stop(), 0) << coordinator.ReadLog();
  }
  // Drawn at random per process: equal once in 2^32 runs (ids: 2^52).
  EXPECT_NE(numbers[0], numbers[1]);
  EXPECT_NE(ids[0], ids[1]);
}

TEST(ClusterTest, GarbageGetsClearErrorsAndServingGoesOn) {
  LocalCluster cluster({StoriesModelPath(), 1, 0});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  const int port = cluster.http_port();
  struct Case {
    std::string body;
    int status;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"{not json", 400, "not valid JSON"},
      {R"({"prompt": "hi", "max_tokens": "many"})", 400, "max_tokens"},
      {R"({"prompt": "hi", "max_tokens": -5})", 400, "max_tokens"},
      {R"({"prompt": 42})", 400, "prompt"},
      {R"({"prompt": "hi", "temperature": "hot"})", 400, "temperature"},
      {R"({"prompt": "hi", "model": "gpt-4"})", 404, "gpt-4"},
      {json{{"prompt", std::vector<int>(600, 5)}, {"max_tokens", 4}}.dump(), 400, "context"},
      {R"({"prompt": "hi", "max_tokens": 600})", 400, "context length"},
      {R"({"prompt": [1, 99999], "max_tokens": 4})", 400, "99999"},
  };
  for (const Case& c : cases) {
    HttpResult r = Post(port, "/v1/completions", c.body);
    EXPECT_EQ(r.status, c.status) << c.body << " -> " << r.body;
    json j = json::parse(r.body, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.body;
    EXPECT_NE(j["error"]["message"].get<std::string>().find(c.message), std::string::npos)
        << c.body << " -> " << r.body;
  }
  HttpResult chat = Post(port, "/v1/chat/completions", R"({"messages": "hello"})");
  EXPECT_EQ(chat.status, 400);
  httplib::Client c("127.0.0.1", port);
  EXPECT_EQ(c.Get("/v1/nothing")->status, 404);
  // Routes and methods the API lacks, worded as OpenAI words them (code null, not a model error).
  auto embeddings = c.Post("/v1/embeddings", "{}", "application/json");
  ASSERT_TRUE(embeddings);
  EXPECT_EQ(embeddings->status, 404);
  json route = json::parse(embeddings->body);
  EXPECT_EQ(route["error"]["message"], "Invalid URL (POST /v1/embeddings)");
  EXPECT_TRUE(route["error"]["code"].is_null()) << embeddings->body;
  auto get_completions = c.Get("/v1/completions");
  ASSERT_TRUE(get_completions);
  EXPECT_EQ(get_completions->status, 405);
  EXPECT_EQ(get_completions->get_header_value("Allow"), "POST");
  // An unknown model names the parameter.
  HttpResult no_model = Post(port, "/v1/completions", R"({"prompt": "hi", "model": "gpt-4"})");
  EXPECT_EQ(json::parse(no_model.body)["error"]["param"], "model") << no_model.body;
  EXPECT_EQ(json::parse(no_model.body)["error"]["code"], "model_not_found") << no_model.body;

  // The socket door: random bytes, a truncated message, a worker-only message.
  zmq::context_t ctx;
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.set(zmq::sockopt::rcvtimeo, 5000);
  dealer.connect(cluster.client_endpoint());
  auto expect_error = [&](const std::string& what) {
    auto in = proto::ReceiveMessage(dealer, false);
    ASSERT_TRUE(in.has_value()) << what;
    ASSERT_TRUE(in->message.ok()) << what;
    ASSERT_TRUE(std::holds_alternative<proto::ErrorMessage>(*in->message)) << what;
    EXPECT_FALSE(std::get<proto::ErrorMessage>(*in->message).message.empty());
  };
  dealer.send(zmq::buffer(std::string("\x01\x02garbage bytes here!", 20)), zmq::send_flags::none);
  expect_error("random bytes");
  std::string submit = proto::Encode(proto::Submit{"c1", "", false, "hi", {}, {}, 1, 0, true});
  dealer.send(zmq::buffer(submit.substr(0, submit.size() - 16)), zmq::send_flags::none);
  expect_error("truncated");
  ASSERT_TRUE(proto::SendMessage(dealer, proto::Heartbeat{}).ok());
  expect_error("worker message on the client door");
  proto::SamplingParams bad;
  bad.max_tokens = 0;
  ASSERT_TRUE(proto::SendMessage(dealer, proto::Submit{"c2", "", false, "hi", {}, bad, 1, 0, true}).ok());
  expect_error("max_tokens 0");
  // 4 MB of text cannot fit 512 tokens: refused by its size, before the event loop spends
  // seconds tokenizing it while every stream waits.
  proto::SamplingParams four;
  four.max_tokens = 4;
  ASSERT_TRUE(proto::SendMessage(dealer, proto::Submit{"c5", "", false, std::string(4 << 20, 'a'), {}, four, 1, 0, true}).ok());
  {
    auto in = proto::ReceiveMessage(dealer, false, 8 << 20);
    ASSERT_TRUE(in.has_value() && in->message.ok());
    ASSERT_TRUE(std::holds_alternative<proto::ErrorMessage>(*in->message));
    const proto::ErrorMessage& e = std::get<proto::ErrorMessage>(*in->message);
    EXPECT_EQ(e.code, StatusCode::kOutOfRange);
    EXPECT_NE(e.message.find("the prompt has 4194304 bytes, more than this model's context length of 512 tokens"),
              std::string::npos)
        << e.message;
  }

  // Still serving, on both doors.
  HttpResult ok = Post(port, "/v1/completions", Completion("Once upon a time", 8, false).dump());
  EXPECT_EQ(ok.status, 200) << ok.body;
  proto::SamplingParams greedy;
  greedy.temperature = 0;
  greedy.max_tokens = 8;
  ASSERT_TRUE(proto::SendMessage(dealer, proto::Submit{"c3", "", false, "Once upon a time", {}, greedy, 1, 0, true}).ok());
  auto accepted = proto::ReceiveMessage(dealer, false);
  ASSERT_TRUE(accepted && accepted->message.ok());
  EXPECT_TRUE(std::holds_alternative<proto::Accepted>(*accepted->message));
}

}  // namespace
}  // namespace bmad::testing
