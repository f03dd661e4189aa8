#include "coordinator/client/client_commands.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "tests/coordinator/client/fake_coordinator.h"
#include "tests/coordinator/client/fake_openai_server.h"

namespace bmad::client {
namespace {

using ::testing::internal::CaptureStderr;
using ::testing::internal::CaptureStdout;
using ::testing::internal::GetCapturedStderr;
using ::testing::internal::GetCapturedStdout;
using testing::ChunkFor;
using testing::FakeCoordinator;

struct Ran {
  int code = -1;
  std::string out, err;
};

template <typename F>
Ran RunCaptured(F command, const std::vector<std::string>& args) {
  Ran r;
  CaptureStdout();
  CaptureStderr();
  r.code = command(args);
  r.out = GetCapturedStdout();
  r.err = GetCapturedStderr();
  return r;
}

std::string LastLine(const std::string& text) {
  std::string t = text;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  return t.substr(t.rfind('\n') == std::string::npos ? 0 : t.rfind('\n') + 1);
}

// Usage errors: exit 2 and exactly one line on stderr.
void ExpectUsageError(int (*command)(const std::vector<std::string>&),
                      const std::vector<std::string>& args, const std::string& mentions) {
  const Ran r = RunCaptured(command, args);
  EXPECT_EQ(r.code, 2) << mentions;
  EXPECT_NE(r.err.find(mentions), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(ClientCommandsTest, GenerateFlagErrors) {
  ExpectUsageError(RunRemoteGenerate, {"--prompt", "hi"}, "--coordinator is required");
  ExpectUsageError(RunRemoteGenerate, {"--coordinator", "tcp://127.0.0.1:1"}, "--prompt is required");
  ExpectUsageError(RunRemoteGenerate, {"--coordinator", "x:1", "--prompt", "p", "--max-tokens", "0"},
                   "--max-tokens");
  // The cluster's own ranges, named as local generate names them: a value the cluster would
  // refuse is bad usage here, not a server error after the request went out.
  ExpectUsageError(RunRemoteGenerate, {"--coordinator", "x:1", "--prompt", "p", "--top-p", "2"},
                   "'top_p' must be a finite number in (0, 1]");
  ExpectUsageError(RunRemoteGenerate, {"--coordinator", "x:1", "--prompt", "p", "--temperature", "50"},
                   "'temperature' must be a finite number in [0, 2]");
  ExpectUsageError(RunRemoteGenerate, {"--coordinator", "x:1", "--prompt", "p", "--top-p", "0"},
                   "'top_p' must be a finite number in (0, 1]");
  ExpectUsageError(RunRemoteGenerate, {"--coordinator", "x:1", "--prompt", "p", "--temperature", "hot"},
                   "--temperature");
  ExpectUsageError(RunRemoteGenerate, {"--coordinator", "x:1", "--prompt", "p", "--timeout-ms", "0"},
                   "--timeout-ms");
  ExpectUsageError(RunRemoteGenerate, {"--coordinator", "bogus://", "--prompt", "p"}, "bogus://");
  ExpectUsageError(RunRemoteGenerate, {"--nope"}, "unknown flag --nope");
  const Ran help = RunCaptured(RunRemoteGenerate, {"--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("--slo-ms"), std::string::npos);
}

TEST(ClientCommandsTest, WantsRemoteGenerate) {
  EXPECT_TRUE(WantsRemoteGenerate({"--prompt", "x", "--coordinator", "h:1"}));
  EXPECT_TRUE(WantsRemoteGenerate({"--coordinator=h:1"}));
  EXPECT_FALSE(WantsRemoteGenerate({"--model", "m.gguf", "--prompt", "--coordinator-ish"}));
  EXPECT_FALSE(WantsRemoteGenerate({"--", "--coordinator"}));
}

TEST(ClientCommandsTest, GenerateStreamsTextAndSummarises) {
  FakeCoordinator fake([](FakeCoordinator& f, const std::string& peer, const proto::Message& m) {
    const auto* s = std::get_if<proto::Submit>(&m);
    if (!s) return;
    if (s->prompt_text == "fail") {
      f.Send(peer, proto::ErrorMessage{StatusCode::kResourceExhausted, "queue full", 0,
                                       s->client_request_id, 0});
      return;
    }
    f.Send(peer, proto::Accepted{s->client_request_id, 1, 3});
    f.Send(peer, ChunkFor(*s, 1, 0, 0, {5}, "Hello"));
    proto::TokenChunk last = ChunkFor(*s, 1, 1, 1, {6}, ", world", proto::FinishReason::kStop);
    last.usage.completion_tokens = 2;
    f.Send(peer, last);
  });
  Ran r = RunCaptured(RunRemoteGenerate, {"--coordinator", fake.endpoint(), "--prompt", "hi",
                                          "--max-tokens", "8", "--priority", "0", "--slo-ms", "900",
                                          "--stop", "END", "--seed", "4"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "Hello, world\n");
  EXPECT_NE(r.err.find("2 tokens (prompt 3)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("first token"), std::string::npos);
  EXPECT_NE(r.err.find("finish stop"), std::string::npos);
  const std::vector<proto::Message> received = fake.Received();
  const auto& submit = std::get<proto::Submit>(received.front());
  EXPECT_EQ(submit.sampling.max_tokens, 8u);
  EXPECT_EQ(submit.priority, 0);
  EXPECT_EQ(submit.slo_ms, 900u);
  EXPECT_EQ(submit.sampling.stop_strings, std::vector<std::string>{"END"});
  EXPECT_TRUE(submit.sampling.has_seed);
  EXPECT_EQ(submit.sampling.temperature, 0.0f);

  r = RunCaptured(RunRemoteGenerate, {"--coordinator", fake.endpoint(), "--prompt", "fail"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("queue full"), std::string::npos) << r.err;
}

TEST(ClientCommandsTest, GenerateSendsLogitBiasAndMinTokensAndFailsOnUnwritableOutput) {
  FakeCoordinator fake([](FakeCoordinator& f, const std::string& peer, const proto::Message& m) {
    const auto* s = std::get_if<proto::Submit>(&m);
    if (!s) return;
    f.Send(peer, proto::Accepted{s->client_request_id, 1, 3});
    f.Send(peer, ChunkFor(*s, 1, 0, 0, {5}, "Hello", proto::FinishReason::kLength));
  });
  // stdout on /dev/full: the text cannot be written, so the command fails (it exited 0).
  std::fflush(stdout);
  const int saved = ::dup(1);
  const int full = ::open("/dev/full", O_WRONLY);
  ASSERT_GE(full, 0);
  ASSERT_GE(::dup2(full, 1), 0);
  CaptureStderr();
  const int code = RunRemoteGenerate({"--coordinator", fake.endpoint(), "--prompt", "hi",
                                      "--min-tokens", "2", "--logit-bias", "7=-100"});
  const std::string err = GetCapturedStderr();
  std::clearerr(stdout);
  ::dup2(saved, 1);
  ::close(saved);
  ::close(full);
  EXPECT_EQ(code, 1) << err;
  EXPECT_NE(err.find("cannot write the output: No space left on device"), std::string::npos) << err;
  const std::vector<proto::Message> received = fake.Received();
  ASSERT_FALSE(received.empty());
  const auto& submit = std::get<proto::Submit>(received.front());
  EXPECT_EQ(submit.sampling.min_tokens, 2u);
  EXPECT_EQ(submit.sampling.logit_bias, (std::vector<proto::LogitBias>{{7, -100.0f}}));
  ExpectUsageError(RunRemoteGenerate, {"--coordinator", "x:1", "--prompt", "p", "--logit-bias", "7"},
                   "--logit-bias wants ID=BIAS");
}

TEST(ClientCommandsTest, StatusPrintsATableOrJson) {
  proto::ClusterStatus status;
  status.model_name = "m";
  proto::ReplicaInfo replica;
  replica.replica_id = "replica-0";
  replica.live = true;
  status.replicas.push_back(replica);
  FakeCoordinator fake([&](FakeCoordinator& f, const std::string& peer, const proto::Message& m) {
    if (std::holds_alternative<proto::StatusQuery>(m)) f.Send(peer, status);
  });
  Ran r = RunCaptured(RunStatusCommand, {"--coordinator", fake.endpoint()});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("replica-0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("total"), std::string::npos);

  r = RunCaptured(RunStatusCommand, {"--coordinator", fake.endpoint(), "--json"});
  EXPECT_EQ(r.code, 0);
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["replicas"][0]["replica_id"], "replica-0");

  FakeCoordinator silent(nullptr);
  r = RunCaptured(RunStatusCommand, {"--coordinator", silent.endpoint(), "--timeout-ms", "100"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("DEADLINE_EXCEEDED"), std::string::npos) << r.err;

  ExpectUsageError(RunStatusCommand, {"--timeout-ms", "-5"}, "--timeout-ms");
  ExpectUsageError(RunStatusCommand, {"extra"}, "unexpected argument 'extra'");
}

TEST(ClientCommandsTest, BenchHttpFlagErrors) {
  const std::vector<std::string> ok = {"--url", "http://127.0.0.1:1", "--requests", "2",
                                       "--prompt-len", "4", "--output-len", "4"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = ok;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  ExpectUsageError(RunBenchHttpCommand, {"--requests", "2"}, "--url is required");
  ExpectUsageError(RunBenchHttpCommand, ok, "exactly one of --rate");
  ExpectUsageError(RunBenchHttpCommand, with({"--rate", "1", "--concurrency", "2"}), "exactly one");
  ExpectUsageError(RunBenchHttpCommand, with({"--concurrency", "2", "--api", "embeddings"}), "--api");
  ExpectUsageError(RunBenchHttpCommand, with({"--concurrency", "x"}), "--concurrency expects an integer");
  ExpectUsageError(RunBenchHttpCommand, with({"--concurrency", "2", "--prompt-len", "a-b"}),
                   "--prompt-len");
  ExpectUsageError(RunBenchHttpCommand, with({"--rate", "-1"}), "--rate");
  ExpectUsageError(RunBenchHttpCommand, with({"--concurrency", "1", "--seed", "-1"}), "--seed");
  ExpectUsageError(RunBenchHttpCommand,
                   {"--url", "localhost:8000", "--requests", "1", "--concurrency", "1",
                    "--prompt-len", "1", "--output-len", "1"},
                   "http://");
}

TEST(ClientCommandsTest, BenchHttpPrintsTheReportWithJsonLast) {
  testing::FakeOpenAiServer server;
  Ran r = RunCaptured(RunBenchHttpCommand,
                      {"--url", server.url(), "--requests", "4", "--concurrency", "2",
                       "--prompt-len", "8", "--output-len", "3", "--model", "steady"});
  EXPECT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(LastLine(r.out));
  EXPECT_EQ(j["succeeded"], 4);
  EXPECT_EQ(j["output_tokens"], 12);
  EXPECT_NE(r.out.find("throughput"), std::string::npos);
  EXPECT_NE(r.err.find("4/4 done"), std::string::npos) << "progress lines when not on a TTY";

  // Every request failing is a failed run.
  r = RunCaptured(RunBenchHttpCommand,
                  {"--url", server.url(), "--requests", "1", "--concurrency", "1", "--prompt-len",
                   "8", "--output-len", "3", "--model", "truncated"});
  EXPECT_EQ(r.code, 1);
}

}  // namespace
}  // namespace bmad::client
