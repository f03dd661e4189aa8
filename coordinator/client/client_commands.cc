#include "coordinator/client/client_commands.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "common/cli/flags.h"
#include "common/cli/sampling_flags.h"
#include "coordinator/client/client.h"
#include "coordinator/client/cluster_status_format.h"
#include "coordinator/client/http_bench.h"
#include "worker/sampling/sampling_params_validation.h"
#include "worker/tools/length_distribution.h"

namespace bmad::client {
namespace {

constexpr const char* kDefaultCoordinator = "tcp://127.0.0.1:5555";  // coordinator.client_endpoint
constexpr int64_t kMaxTimeoutMs = 24 * 3600 * 1000;
constexpr int kExitInterrupted = 130;  // the shell's convention for "ended by SIGINT"

// Set by SIGINT while a remote generation runs; Client::Generate watches it.
std::atomic<bool> g_interrupted{false};
void OnInterrupt(int) { g_interrupted.store(true); }

int UsageError(const char* command, const Status& s) {
  std::fprintf(stderr, "%s: %s\n", command, s.message().c_str());
  return 2;
}

// Checks that a flag's value lies in [low, high]; the message names the flag.
Status InRange(const char* flag, double value, double low, double high) {
  if (std::isfinite(value) && value >= low && value <= high) return Status::Ok();
  char buf[160];
  std::snprintf(buf, sizeof buf, "--%s must be between %.10g and %.10g", flag, low, high);
  return InvalidArgument(buf);
}

std::string SummaryLine(const GenerateResult& r) {
  const uint64_t tokens = r.usage.completion_tokens ? r.usage.completion_tokens : r.token_ids.size();
  const double decode_s = r.total_s - std::max(r.first_token_s, 0.0);
  char buf[256];
  int n = std::snprintf(buf, sizeof buf, "%llu tokens", static_cast<unsigned long long>(tokens));
  if (r.prompt_tokens) n += std::snprintf(buf + n, sizeof buf - n, " (prompt %u)", r.prompt_tokens);
  if (r.first_token_s >= 0) {
    n += std::snprintf(buf + n, sizeof buf - n, ", first token %.1f ms", r.first_token_s * 1000);
  }
  if (tokens > 1 && decode_s > 0) {
    n += std::snprintf(buf + n, sizeof buf - n, ", %.1f tokens/s after the first",
                       double(tokens - 1) / decode_s);
  }
  std::snprintf(buf + n, sizeof buf - n, ", finish %s",
                std::string(proto::FinishReasonName(r.finish_reason)).c_str());
  return buf;
}

// The default of --api-key: $BMAD_API_KEY, or none.
std::string ApiKeyFromEnvironment() {
  const char* key = std::getenv("BMAD_API_KEY");
  return key ? std::string(key) : std::string();
}

}  // namespace

bool WantsRemoteGenerate(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a == "--") break;
    if (a == "--coordinator" || a.starts_with("--coordinator=")) return true;
  }
  return false;
}

int RunRemoteGenerate(const std::vector<std::string>& args) {
  constexpr const char* kCommand = "bmad generate";
  std::string endpoint, prompt, model;
  int64_t priority = proto::Submit::kDefaultPriority, slo_ms = 0, timeout_ms = 30000;
  bool quiet = false;
  cli::SamplingFlags sampling;
  cli::Flags flags("bmad generate --coordinator ENDPOINT --prompt TEXT [flags]");
  flags.AddString("coordinator", &endpoint, "The coordinator's client endpoint (tcp://host:port).");
  flags.AddString("prompt", &prompt, "Text to continue.");
  flags.AddString("model", &model, "Model name (default: the cluster's).");
  sampling.AddTo(flags);
  flags.AddInt("priority", &priority,
               "Priority class, 0 the most urgent (default: the coordinator's, 1 of its 3 classes).");
  flags.AddInt("slo-ms", &slo_ms, "Deadline for the whole request (0: the server's default).");
  flags.AddInt("timeout-ms", &timeout_ms, "Give up after this long without news (default 30000).");
  flags.AddBool("quiet", &quiet, "No summary line on stderr.");
  std::string api_key = ApiKeyFromEnvironment();
  flags.AddString("api-key", &api_key,
                  "Key for a coordinator with coordinator.api_keys_file (default: $BMAD_API_KEY, "
                  "which keeps it out of the process list).");
  std::vector<std::string> positional;
  Status s = flags.Parse(args, &positional);
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (s.ok() && endpoint.empty()) s = InvalidArgument("--coordinator is required");
  if (s.ok() && !flags.Seen("prompt")) s = InvalidArgument("--prompt is required");
  if (s.ok() && !positional.empty()) s = InvalidArgument("unexpected argument '" + positional[0] + "'");
  if (s.ok()) s = InRange("max-tokens", double(sampling.max_tokens), 1, 1 << 24);
  // The ranges the cluster holds requests to, as local generate checks them: a value it would
  // refuse is bad usage here (exit 2), not a server error. The vocabulary is the cluster's:
  // stop token ids are checked there.
  Result<proto::SamplingParams> params = sampling.Params();
  if (s.ok()) s = params.status();
  if (s.ok()) s = sampling::ValidateSamplingParams(*params, std::numeric_limits<int32_t>::max());
  if (s.ok() && priority != proto::Submit::kDefaultPriority) s = InRange("priority", double(priority), 0, 1000);
  if (s.ok()) s = InRange("slo-ms", double(slo_ms), 0, std::numeric_limits<uint32_t>::max());
  if (s.ok()) s = InRange("timeout-ms", double(timeout_ms), 1, double(kMaxTimeoutMs));
  if (!s.ok()) return UsageError(kCommand, s);

  proto::Submit submit;
  submit.model = model;
  submit.prompt_text = prompt;
  submit.sampling = *params;
  submit.priority = static_cast<int32_t>(priority);
  submit.slo_ms = static_cast<uint32_t>(slo_ms);
  submit.stream = true;
  submit.api_key = api_key;

  Result<std::unique_ptr<Client>> client = Client::Connect(endpoint);
  if (!client.ok()) return UsageError(kCommand, client.status());
  bool printed = false;
  g_interrupted.store(false);
  const auto previous_handler = std::signal(SIGINT, OnInterrupt);
  Result<GenerateResult> result = (*client)->Generate(
      submit,
      [&](const proto::TokenChunk& chunk) {
        if (chunk.text.empty()) return;
        std::fwrite(chunk.text.data(), 1, chunk.text.size(), stdout);
        std::fflush(stdout);
        printed = true;
      },
      std::chrono::milliseconds(timeout_ms), &g_interrupted);
  std::signal(SIGINT, previous_handler);
  if (printed) std::printf("\n");
  // Before the summary on stderr, so a merged log reads in order; and output that could not be
  // written (a full disk, a closed pipe) is no success.
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "%s: cannot write the output: %s\n", kCommand, std::strerror(errno));
    return 1;
  }
  if (!result.ok()) {
    std::fprintf(stderr, "%s: %s\n", kCommand, result.status().ToString().c_str());
    return result.status().code() == StatusCode::kCancelled ? kExitInterrupted : 1;
  }
  if (!quiet) std::fprintf(stderr, "%s\n", SummaryLine(*result).c_str());
  return 0;
}

int RunStatusCommand(const std::vector<std::string>& args) {
  constexpr const char* kCommand = "bmad status";
  std::string endpoint = kDefaultCoordinator;
  bool json = false;
  int64_t timeout_ms = 5000;
  cli::Flags flags("bmad status [--coordinator ENDPOINT] [--json]");
  flags.AddString("coordinator", &endpoint,
                  std::string("The coordinator's client endpoint (default ") + kDefaultCoordinator + ").");
  flags.AddBool("json", &json, "Print the cluster status as JSON.");
  flags.AddInt("timeout-ms", &timeout_ms, "Give up after this long (default 5000).");
  std::vector<std::string> positional;
  Status s = flags.Parse(args, &positional);
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (s.ok() && !positional.empty()) s = InvalidArgument("unexpected argument '" + positional[0] + "'");
  if (s.ok()) s = InRange("timeout-ms", double(timeout_ms), 1, double(kMaxTimeoutMs));
  if (!s.ok()) return UsageError(kCommand, s);
  Result<std::unique_ptr<Client>> client = Client::Connect(endpoint);
  if (!client.ok()) return UsageError(kCommand, client.status());
  Result<proto::ClusterStatus> status = (*client)->QueryStatus(std::chrono::milliseconds(timeout_ms));
  if (!status.ok()) {
    std::fprintf(stderr, "%s: %s\n", kCommand, status.status().ToString().c_str());
    return 1;
  }
  const std::string text = json ? ClusterStatusJson(*status) : FormatClusterStatusTable(*status);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

int RunBenchHttpCommand(const std::vector<std::string>& args) {
  constexpr const char* kCommand = "bmad bench http";
  BenchHttpOptions o;
  std::string api = "completions";
  int64_t seed = 1;
  cli::Flags flags(
      "bmad bench http --url URL --requests N (--rate R | --concurrency C) --prompt-len DIST "
      "--output-len DIST [--model NAME] [--api completions|chat] [--timeout-s S] [--seed S]");
  flags.AddString("url", &o.url, "The server's base URL, e.g. http://127.0.0.1:8000.");
  flags.AddInt("requests", &o.requests, "Requests to send.");
  // Bounded here, so that a 0 typed is refused as such (0 in the options means "not given").
  flags.AddDouble("rate", &o.rate, "Open loop: Poisson arrivals, requests per second.",
                  tools::kMinArrivalRate, 1e6);
  flags.AddInt("concurrency", &o.concurrency, "Closed loop: requests kept in flight.", 1,
               kMaxBenchHttpConcurrency);
  flags.AddString("prompt-len", &o.prompt_len, "Prompt tokens: N, A-B or A,B,C.");
  flags.AddString("output-len", &o.output_len, "Output tokens: N, A-B or A,B,C.");
  flags.AddString("model", &o.model, "Model name (default: the first from GET /v1/models).");
  flags.AddString("api", &api, "completions (prompts as token ids; default) or chat (text).");
  flags.AddDouble("timeout-s", &o.timeout_s, "Per-request timeout in seconds (default 300).");
  flags.AddInt("seed", &seed, "Workload seed (default 1).");
  flags.AddInt("vocab-size", &o.vocab_size, "Draw prompt token ids below this (default: 100..19999).", 8,
               int64_t{1} << 31);
  // Not $BMAD_API_KEY by default: this benchmarks other servers too, which must not get our key.
  flags.AddString("api-key", &o.api_key, "Bearer token for servers that want one.");
  flags.AddInt("report-split-at", &o.report_split_at,
               "Also report latencies for prompts below N tokens and for the rest (0: off).");
  flags.AddDouble("urgent-share", &o.urgent_share,
                  "Share of requests sent with slo_ms --urgent-slo-ms, reported apart (0: off).", 0, 1);
  flags.AddInt("urgent-slo-ms", &o.urgent_slo_ms, "The urgent requests' slo_ms (bmad's deadline).", 1,
               std::numeric_limits<uint32_t>::max());
  std::vector<std::string> positional;
  Status s = flags.Parse(args, &positional);
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (s.ok() && !positional.empty()) s = InvalidArgument("unexpected argument '" + positional[0] + "'");
  for (const char* required : {"url", "requests", "prompt-len", "output-len"}) {
    if (s.ok() && !flags.Seen(required)) s = InvalidArgument(std::string("--") + required + " is required");
  }
  if (s.ok() && api != "completions" && api != "chat") {
    s = InvalidArgument("--api must be completions or chat, got '" + api + "'");
  }
  if (s.ok() && seed < 0) s = InvalidArgument("--seed must not be negative");
  o.api = api == "chat" ? OpenAiApi::kChat : OpenAiApi::kCompletions;
  o.seed = static_cast<uint64_t>(seed);
  if (s.ok()) s = ValidateBenchHttpOptions(o);
  if (!s.ok()) return UsageError(kCommand, s);

  // A redrawn bar on a terminal; otherwise (logs, CI) a plain line every few seconds.
  const bool tty = isatty(fileno(stderr)) == 1;
  auto progress = [tty](const BenchProgress& p) {
    if (tty) {
      constexpr int kWidth = 30;
      const int filled = p.total ? static_cast<int>(kWidth * p.finished / p.total) : 0;
      std::fprintf(stderr, "\r[%s%s] %lld/%lld done, %lld failed, %.1f s",
                   std::string(static_cast<size_t>(filled), '#').c_str(),
                   std::string(static_cast<size_t>(kWidth - filled), '.').c_str(),
                   static_cast<long long>(p.finished), static_cast<long long>(p.total),
                   static_cast<long long>(p.failed), p.elapsed_s);
      if (p.last) std::fprintf(stderr, "\n");
    } else {
      std::fprintf(stderr, "%s: %lld/%lld done, %lld failed, %.1f s\n", "bench http",
                   static_cast<long long>(p.finished), static_cast<long long>(p.total),
                   static_cast<long long>(p.failed), p.elapsed_s);
    }
    std::fflush(stderr);
  };
  Result<BenchHttpReport> report = RunBenchHttp(o, progress, tty ? 0.2 : 5.0);
  if (!report.ok()) {
    std::fprintf(stderr, "%s: %s\n", kCommand, report.status().ToString().c_str());
    return 1;
  }
  std::printf("%s%s\n", report->Text(o).c_str(), report->Json(o).c_str());
  std::fflush(stdout);
  return report->succeeded > 0 ? 0 : 1;
}

std::vector<cli::Command> ClientCommands() {
  return {{{"status"}, "Show a cluster's replicas, their load and the coordinator's queue.",
           RunStatusCommand},
          {{"bench", "http"},
           "Load any OpenAI-compatible server with streaming requests; latency and throughput.",
           RunBenchHttpCommand}};
}

}  // namespace bmad::client
