// The socket door's long text prompts are tokenized off the event loop: with the tokenizer held
// at a gate, the loop still answers; a cancel that comes while the prompt is being tokenized is
// answered with a cancellation and nothing is accepted; a stop meanwhile refuses it. An in-process
// coordinator on 127.0.0.1 (ephemeral ports), no replica: requests are accepted and queue.
#include <gtest/gtest.h>

#include <set>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <thread>
#include <zmq.hpp>

#include <httplib.h>

#include "common/proto/frames.h"
#include "coordinator/server/coordinator_server.h"
#include "tests/coordinator/server/fake_replica.h"
#include "tests/coordinator/server/in_process_coordinator.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"
#include "worker/model/gguf/gguf_file.h"
#include "worker/model/tokenizer/tokenizer.h"

namespace bmad::coord {
namespace {

// Holds the tokenizer thread before each prompt until opened.
class Gate {
 public:
  void Pass() {
    std::unique_lock<std::mutex> lock(mu_);
    ++entered_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
  }
  bool WaitEntered(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(20), [&] { return entered_ >= n; });
  }
  void Open() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int entered_ = 0;
  bool open_ = false;
};

class SocketDoorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerConfig c = LoopbackCoordinatorConfig(max_queued_);
    c.coordinator.drain_timeout_ms = drain_ms_;
    c.coordinator.api_keys_file = api_keys_file_;
    CoordinatorRunOptions o;
    o.max_run_ms = 60000;
    o.tokenize_inline_max_bytes = inline_max_bytes_;
    o.before_tokenize = [this] { gate_.Pass(); };
    o.loop_stall_limit_ms = loop_stall_limit_ms_;
    o.on_loop_round = [this] {
      if (hold_loop_.load()) loop_gate_.Pass();
    };
    auto server = CoordinatorServer::Create(c, o);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    run_ = std::thread([this] { run_status_ = server_->Run(); });
    client_.set(zmq::sockopt::linger, 0);
    client_.set(zmq::sockopt::rcvtimeo, 10000);
    client_.connect(server_->client_endpoint());
  }
  void TearDown() override {
    gate_.Open();
    loop_gate_.Open();
    if (server_) server_->RequestStop();
    if (run_.joinable()) run_.join();
  }

  void Send(const proto::Message& m) { ASSERT_TRUE(proto::SendMessage(client_, m).ok()); }
  proto::Message Receive() {
    auto in = proto::ReceiveMessage(client_, false);
    EXPECT_TRUE(in.has_value()) << "no answer within 10 s";
    if (!in || !in->message.ok()) return proto::StatusQuery{};
    return *in->message;
  }
  static proto::Submit TextSubmit(const std::string& id, const std::string& text) {
    proto::Submit s;
    s.client_request_id = id;
    s.prompt_text = text;
    s.sampling.temperature = 0;
    s.sampling.max_tokens = 4;
    return s;
  }

  double Metric(const std::string& series) { return CoordinatorMetric(server_->http_port(), series); }

  // `m` is the error a stop gives request `id` it had accepted and not finished.
  static void ExpectFailedByTheStop(const proto::Message& m, const std::string& id) {
    ASSERT_TRUE(std::holds_alternative<proto::ErrorMessage>(m)) << proto::MessageName(m);
    const auto& error = std::get<proto::ErrorMessage>(m);
    EXPECT_EQ(error.client_request_id, id);
    EXPECT_EQ(error.code, StatusCode::kUnavailable);
    EXPECT_NE(error.message.find("stopped before the request finished"), std::string::npos) << error.message;
  }

  void CancelAndWait(const std::string& id) {
    proto::Cancel cancel;
    cancel.client_request_id = id;
    Send(cancel);
    Receive();  // its cancellation
  }

  size_t inline_max_bytes_ = 0;  // every text prompt goes to the tokenizer thread
  std::string api_keys_file_;
  int64_t drain_ms_ = 5000;
  int64_t loop_stall_limit_ms_ = 10000;
  std::atomic<bool> hold_loop_{false};
  Gate loop_gate_;
  int64_t max_queued_ = 1024;
  Gate gate_;
  std::unique_ptr<CoordinatorServer> server_;
  std::thread run_;
  Status run_status_;
  zmq::context_t ctx_;
  zmq::socket_t client_{ctx_, zmq::socket_type::dealer};
};

TEST_F(SocketDoorTest, TheLoopAnswersWhileAPromptIsBeingTokenized) {
  Send(TextSubmit("a", "Once upon a time"));
  ASSERT_TRUE(gate_.WaitEntered(1));
  Send(proto::StatusQuery{});
  const proto::Message status = Receive();  // the tokenizer is still held
  ASSERT_TRUE(std::holds_alternative<proto::ClusterStatus>(status)) << proto::MessageName(status);
  EXPECT_EQ(std::get<proto::ClusterStatus>(status).model_name, "stories260K");
  gate_.Open();
  const proto::Message accepted = Receive();
  ASSERT_TRUE(std::holds_alternative<proto::Accepted>(accepted)) << proto::MessageName(accepted);
  auto file = gguf::GgufFile::Open(testing::StoriesModelPath());
  ASSERT_TRUE(file.ok());
  auto tok = tokenizer::LoadTokenizer(**file);
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ(std::get<proto::Accepted>(accepted).client_request_id, "a");
  EXPECT_EQ(std::get<proto::Accepted>(accepted).prompt_tokens, tok->Encode("Once upon a time").size());
  CancelAndWait("a");  // no replica will ever take it: the stop need not wait for it
}

// A request's latency counts from when its Submit came, not from when it was admitted after
// tokenizing: the wait for the tokenizer is the client's wait too (it was left out of time to
// first token and end-to-end latency).
TEST_F(SocketDoorTest, LatenciesCountFromWhenTheSubmitCameNotFromItsAdmission) {
  Send(TextSubmit("slow", "Once upon a time"));
  ASSERT_TRUE(gate_.WaitEntered(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // waiting to be tokenized
  gate_.Open();
  ASSERT_TRUE(std::holds_alternative<proto::Accepted>(Receive()));
  CancelAndWait("slow");
  EXPECT_EQ(Metric("bmad_coordinator_e2e_request_latency_seconds_count"), 1.0);
  EXPECT_GE(Metric("bmad_coordinator_e2e_request_latency_seconds_sum"), 0.3);
}

TEST_F(SocketDoorTest, ACancelWhileTokenizingIsAnsweredAndNothingIsAccepted) {
  Send(TextSubmit("b", "Once upon a time"));
  ASSERT_TRUE(gate_.WaitEntered(1));
  proto::Cancel cancel;
  cancel.client_request_id = "b";
  Send(cancel);
  Send(proto::StatusQuery{});  // answered after the cancel is handled
  ASSERT_TRUE(std::holds_alternative<proto::ClusterStatus>(Receive()));
  gate_.Open();
  const proto::Message answer = Receive();
  ASSERT_TRUE(std::holds_alternative<proto::ErrorMessage>(answer)) << proto::MessageName(answer);
  const auto& e = std::get<proto::ErrorMessage>(answer);
  EXPECT_EQ(e.code, StatusCode::kCancelled);
  EXPECT_EQ(e.client_request_id, "b");
  // Nothing was accepted: a cancel by the same id now finds no request.
  Send(cancel);
  const proto::Message again = Receive();
  ASSERT_TRUE(std::holds_alternative<proto::ErrorMessage>(again)) << proto::MessageName(again);
  EXPECT_EQ(std::get<proto::ErrorMessage>(again).code, StatusCode::kNotFound);
  // Counted as a request its client cancelled, as one cancelled after acceptance is.
  EXPECT_EQ(Metric("bmad_coordinator_requests_total"), 1.0);
  EXPECT_EQ(Metric("bmad_coordinator_requests_finished_total{status=\"cancelled\"}"), 1.0);
}

TEST_F(SocketDoorTest, AStopWhileTokenizingRefusesThePromptAtOnceAndEnds) {
  Send(TextSubmit("c", "Once upon a time"));
  ASSERT_TRUE(gate_.WaitEntered(1));
  server_->RequestStop();
  const proto::Message answer = Receive();  // the tokenizer is still held
  gate_.Open();
  ASSERT_TRUE(std::holds_alternative<proto::ErrorMessage>(answer)) << proto::MessageName(answer);
  EXPECT_EQ(std::get<proto::ErrorMessage>(answer).code, StatusCode::kUnavailable);
  EXPECT_EQ(std::get<proto::ErrorMessage>(answer).client_request_id, "c");
  run_.join();
  EXPECT_TRUE(run_status_.ok()) << run_status_.ToString();
}

// A wedged event loop fails the probes: /health and /ready answer 503 on both ports once the loop
// has not turned for loop_stall_limit_ms (they answered 200 for ever, from threads of their
// own, so a liveness probe never restarted a hung coordinator), and 200 again once it turns.
class SocketDoorStallTest : public SocketDoorTest {
 protected:
  void SetUp() override {
    loop_stall_limit_ms_ = 300;
    SocketDoorTest::SetUp();
  }
  int Probe(int port, const std::string& path) {
    httplib::Client client("127.0.0.1", port);
    client.set_read_timeout(5, 0);
    auto res = client.Get(path);
    return res ? res->status : -1;
  }
};

TEST_F(SocketDoorStallTest, ProbesFailWhileTheEventLoopIsWedged) {
  EXPECT_EQ(Probe(server_->metrics_port(), "/health"), 200);
  EXPECT_EQ(Probe(server_->http_port(), "/health"), 200);
  hold_loop_.store(true);
  ASSERT_TRUE(loop_gate_.WaitEntered(1));  // the loop is held now
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_EQ(Probe(server_->metrics_port(), "/health"), 503);
  EXPECT_EQ(Probe(server_->metrics_port(), "/ready"), 503);
  EXPECT_EQ(Probe(server_->http_port(), "/health"), 503);
  EXPECT_EQ(Probe(server_->http_port(), "/ping"), 503);
  hold_loop_.store(false);
  loop_gate_.Open();
  EXPECT_TRUE(testing::WaitFor([&] { return Probe(server_->metrics_port(), "/health") == 200; }, std::chrono::seconds(10),
                      std::chrono::milliseconds(20)));
  EXPECT_EQ(Probe(server_->http_port(), "/health"), 200);
}

// A request's deadline counts from the front door: each Assign carries what is left of it, so
// time spent queued (here: no replica yet) is not given back, the default deadline's too
// (scheduler.default_slo_ms, 5000 ms). Each Assign carried slo_ms whole, and 0 without one.
TEST_F(SocketDoorTest, AnAssignCarriesWhatIsLeftOfTheDeadline) {
  gate_.Open();
  proto::Submit slow = TextSubmit("slow", "Once upon a time");
  slow.slo_ms = 2000;
  proto::Submit overdue = TextSubmit("overdue", "Once upon a time");
  overdue.slo_ms = 100;
  proto::Submit none = TextSubmit("none", "Once upon a time");
  for (const proto::Submit& s : {slow, overdue, none}) {
    Send(s);
    ASSERT_TRUE(std::holds_alternative<proto::Accepted>(Receive()));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // queued, with no replica
  FakeReplica replica(ctx_, server_->worker_endpoint(), "late");
  ASSERT_TRUE(replica.Register());
  std::vector<uint32_t> slos;
  for (int i = 0; i < 40 && slos.size() < 3; ++i) {
    replica.Receive(std::chrono::milliseconds(250));
    slos.clear();
    for (const proto::Message& m : replica.received()) {
      if (const auto* a = std::get_if<proto::Assign>(&m)) slos.push_back(a->slo_ms);
    }
  }
  ASSERT_EQ(slos.size(), 3u);
  std::sort(slos.begin(), slos.end());
  EXPECT_EQ(slos[0], 1u);  // overdue: the most urgent
  EXPECT_GT(slos[1], 0u);
  EXPECT_LE(slos[1], 1700u);  // slow: at least the 300 ms waited are gone
  EXPECT_GT(slos[2], 0u);
  EXPECT_LE(slos[2], 4700u);  // none set: the default, less the wait
}

// A stop whose drain ends with a request unfinished (its replica never answers).
class SocketDoorStopTest : public SocketDoorTest {
 protected:
  void SetUp() override {
    // Long enough that the loop reads the late Submit (sent right after the stop) before the
    // deadline ends it, even on a loaded machine.
    drain_ms_ = 3000;
    SocketDoorTest::SetUp();
  }
};

TEST_F(SocketDoorStopTest, AStopAnswersTheRequestLeftAndCountsTheSubmitsItRefuses) {
  gate_.Open();
  // A live replica the drain waits for (with none, the stop would not wait: the next test).
  FakeReplica replica(ctx_, server_->worker_endpoint(), "silent");
  ASSERT_TRUE(replica.Register());
  Send(TextSubmit("queued", "Once upon a time"));
  ASSERT_TRUE(std::holds_alternative<proto::Accepted>(Receive()));
  server_->RequestStop();
  Send(TextSubmit("late", "Once upon a time"));  // refused however soon after the stop it comes
  const proto::Message refused = Receive();
  ASSERT_TRUE(std::holds_alternative<proto::ErrorMessage>(refused)) << proto::MessageName(refused);
  EXPECT_EQ(std::get<proto::ErrorMessage>(refused).client_request_id, "late");
  EXPECT_EQ(std::get<proto::ErrorMessage>(refused).code, StatusCode::kUnavailable);
  // At the drain deadline the queued request fails; before, it was left unanswered.
  ExpectFailedByTheStop(Receive(), "queued");
  run_.join();
  EXPECT_EQ(Metric("bmad_coordinator_requests_total"), 2.0);
  EXPECT_EQ(Metric("bmad_coordinator_rejections_total{reason=\"unavailable\"}"), 1.0);
  EXPECT_EQ(Metric("bmad_coordinator_requests_finished_total{status=\"error\"}"), 1.0);
}

// A stop with requests queued and no live replica: nothing can serve them, so they fail at once
// instead of at the end of the drain (they waited all of drain_timeout_ms for nothing).
class SocketDoorNoReplicaStopTest : public SocketDoorTest {
 protected:
  void SetUp() override {
    drain_ms_ = 50000;  // far past the client's 10 s receive timeout
    SocketDoorTest::SetUp();
  }
};

TEST_F(SocketDoorNoReplicaStopTest, QueuedRequestsFailAtOnceWhenNoReplicaIsLive) {
  gate_.Open();
  Send(TextSubmit("queued", "Once upon a time"));
  ASSERT_TRUE(std::holds_alternative<proto::Accepted>(Receive()));
  server_->RequestStop();
  ExpectFailedByTheStop(Receive(), "queued");
  run_.join();
  EXPECT_TRUE(run_status_.ok()) << run_status_.ToString();
}

// A stop with no drain time: the loop ends at once, with most of a burst of submits still
// unread on the socket. Each used to get no answer at all; now every one is answered (accepted
// ones fail as the stop fails them, unread ones are refused), and counted.
class SocketDoorQuickStopTest : public SocketDoorTest {
 protected:
  void SetUp() override {
    drain_ms_ = 0;
    max_queued_ = 4096;
    SocketDoorTest::SetUp();
  }
};

TEST_F(SocketDoorQuickStopTest, SubmitsLeftOnTheSocketAtTheStopAreAnsweredAndCounted) {
  constexpr int kSubmits = 900;  // under the client socket's send limit (1000)
  Send(proto::StatusQuery{});  // the connection is up: the burst goes straight through
  ASSERT_TRUE(std::holds_alternative<proto::ClusterStatus>(Receive()));
  for (int i = 0; i < kSubmits; ++i) {
    proto::Submit s;
    s.client_request_id = "burst-" + std::to_string(i);
    s.prompt_is_tokens = true;
    s.prompt_tokens = {1, 2, 3};
    s.sampling.max_tokens = 4;
    Send(s);
  }
  server_->RequestStop();
  run_.join();
  client_.set(zmq::sockopt::rcvtimeo, 2000);
  std::set<std::string> ended;
  for (int i = 0; i < 2 * kSubmits; ++i) {
    auto in = proto::ReceiveMessage(client_, false);
    if (!in) break;
    ASSERT_TRUE(in->message.ok());
    if (const auto* e = std::get_if<proto::ErrorMessage>(&*in->message)) {
      EXPECT_EQ(e->code, StatusCode::kUnavailable) << e->message;
      EXPECT_TRUE(ended.insert(e->client_request_id).second) << "answered twice: " << e->client_request_id;
    }
  }
  EXPECT_EQ(ended.size(), static_cast<size_t>(kSubmits)) << "submits left without an answer";
  EXPECT_EQ(Metric("bmad_coordinator_requests_total"), double(kSubmits));
}

// At most max_queued_per_priority prompts are being tokenized; one more is told to retry later.
class SocketDoorBoundTest : public SocketDoorTest {
 protected:
  void SetUp() override {
    max_queued_ = 2;
    SocketDoorTest::SetUp();
  }
};

TEST_F(SocketDoorBoundTest, PromptsBeyondTheBoundAreRefusedWhileTheOthersTokenize) {
  Send(TextSubmit("d1", "Once upon a time"));
  ASSERT_TRUE(gate_.WaitEntered(1));
  Send(TextSubmit("d2", "Lily liked to play"));
  Send(TextSubmit("d3", "There was a dog"));
  const proto::Message refused = Receive();  // while the first two are held
  ASSERT_TRUE(std::holds_alternative<proto::ErrorMessage>(refused)) << proto::MessageName(refused);
  const auto& e = std::get<proto::ErrorMessage>(refused);
  EXPECT_EQ(e.code, StatusCode::kResourceExhausted);
  EXPECT_EQ(e.client_request_id, "d3");
  EXPECT_EQ(e.retry_after_ms, 1000u);
  gate_.Open();
  for (const char* id : {"d1", "d2"}) {
    const proto::Message accepted = Receive();
    ASSERT_TRUE(std::holds_alternative<proto::Accepted>(accepted)) << proto::MessageName(accepted);
    EXPECT_EQ(std::get<proto::Accepted>(accepted).client_request_id, id);
  }
  CancelAndWait("d1");
  CancelAndWait("d2");
  EXPECT_EQ(Metric("bmad_coordinator_requests_total"), 3.0);
  EXPECT_EQ(Metric("bmad_coordinator_rejections_total{reason=\"overloaded\"}"), 1.0);
  EXPECT_EQ(Metric("bmad_coordinator_requests_finished_total{status=\"cancelled\"}"), 2.0);
}

// With the default threshold a short prompt is tokenized on the loop: accepted with the
// tokenizer thread's gate never entered.
class SocketDoorInlineTest : public SocketDoorTest {
 protected:
  void SetUp() override {
    inline_max_bytes_ = CoordinatorRunOptions{}.tokenize_inline_max_bytes;
    SocketDoorTest::SetUp();
  }
};

TEST_F(SocketDoorInlineTest, ShortPromptsStayOnTheLoop) {
  Send(TextSubmit("e", "Once upon a time"));
  const proto::Message accepted = Receive();  // the gate is closed: only the loop can answer
  ASSERT_TRUE(std::holds_alternative<proto::Accepted>(accepted)) << proto::MessageName(accepted);
  CancelAndWait("e");
}

class SocketDoorApiKeyTest : public SocketDoorTest {
 protected:
  void SetUp() override {
    inline_max_bytes_ = CoordinatorRunOptions{}.tokenize_inline_max_bytes;
    api_keys_file_ = testing::MakeTempDir("socket_api_keys") + "/keys";
    std::ofstream(api_keys_file_) << "sk-socket\n";
    SocketDoorTest::SetUp();
  }
};

TEST_F(SocketDoorApiKeyTest, ASubmitWithoutAKeyOfTheFileIsRefusedAndNothingIsAccepted) {
  for (const char* key : {"", "sk-other"}) {
    proto::Submit submit = TextSubmit(std::string("no-") + key, "Once upon a time");
    submit.api_key = key;
    Send(submit);
    const proto::Message refused = Receive();
    ASSERT_TRUE(std::holds_alternative<proto::ErrorMessage>(refused)) << proto::MessageName(refused);
    const auto& error = std::get<proto::ErrorMessage>(refused);
    EXPECT_EQ(error.code, StatusCode::kUnauthenticated) << error.message;
    EXPECT_EQ(error.client_request_id, submit.client_request_id);
    EXPECT_NE(error.message.find(*key ? "not one this coordinator accepts" : "wants an API key"), std::string::npos)
        << error.message;
  }
  EXPECT_EQ(Metric("bmad_coordinator_rejections_total{reason=\"unauthenticated\"}"), 2.0);
  EXPECT_EQ(Metric("bmad_coordinator_requests_queued"), 0.0);
  // Status needs no key, as /metrics needs none.
  Send(proto::StatusQuery{});
  EXPECT_TRUE(std::holds_alternative<proto::ClusterStatus>(Receive()));
  proto::Submit submit = TextSubmit("keyed", "Once upon a time");
  submit.api_key = "sk-socket";
  Send(submit);
  const proto::Message accepted = Receive();
  ASSERT_TRUE(std::holds_alternative<proto::Accepted>(accepted)) << proto::MessageName(accepted);
  CancelAndWait("keyed");
}

}  // namespace
}  // namespace bmad::coord
