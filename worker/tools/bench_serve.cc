#include "worker/tools/bench_serve.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <thread>

#include "common/cli/flags.h"
#include "common/config/config_loader.h"
#include "worker/sampling/sampling_params_validation.h"
#include "worker/server/replica.h"
#include "worker/tools/length_distribution.h"

namespace bmad::tools {
namespace {

struct Planned {
  double arrival_s = 0;
  std::vector<int32_t> prompt;
  int64_t output_len = 0;
  // Observed.
  double first_token_s = -1;
  double last_token_s = 0;
  double finish_s = -1;
  int64_t tokens = 0;
};

}  // namespace

std::string BenchServeResult::Json(const BenchServeOptions& o) const {
  // The length lists can be long ("A,B,C,..."): size the buffer for them.
  std::string head(512 + o.prompt_len.size() + o.output_len.size(), '\0');
  const int head_len = std::snprintf(head.data(), head.size(),
                "{\"bench\":\"serve\",\"backend\":\"%s\",\"scheduler\":\"%s\",\"rate\":%.3f,\"requests\":%lld,"
                "\"prompt_len\":\"%s\",\"output_len\":\"%s\",\"shared_prefix\":%lld,"
                "\"sampling\":{\"temperature\":%g,\"top_k\":%d,\"top_p\":%g,\"min_p\":%g},"
                "\"duration_s\":%.3f,\"arrival_span_s\":%.3f,\"requests_per_s\":%.3f,\"output_tokens_per_s\":%.2f,"
                "\"total_tokens_per_s\":%.2f,",
                std::string(EnumName(o.backend)).c_str(), std::string(EnumName(o.policy)).c_str(),
                o.rate, static_cast<long long>(requests),
                o.prompt_len.c_str(), o.output_len.c_str(), static_cast<long long>(o.shared_prefix),
                static_cast<double>(o.temperature), o.top_k, static_cast<double>(o.top_p),
                static_cast<double>(o.min_p), duration_s, arrival_span_s, requests_per_s, output_tokens_per_s,
                total_tokens_per_s);
  head.resize(static_cast<size_t>(std::max(head_len, 0)));
  char tail[512];
  std::snprintf(tail, sizeof tail,
                ",\"kv_waste_mean\":%.4f,\"kv_waste_max\":%.4f,\"preemptions\":%llu,"
                "\"prefix_hit_ratio\":%.4f,\"steps\":%llu,\"overlap\":\"%s\",\"overlapped_steps\":%llu,\"device_sampled_steps\":%llu,"
                "\"execute_ms_per_step\":%.3f,\"host_ms_per_step\":%.3f,\"plan_ms_per_step\":%.3f}",
                kv_waste_mean, kv_waste_max, static_cast<unsigned long long>(preemptions),
                prefix_hit_ratio, static_cast<unsigned long long>(steps),
                std::string(EnumName(o.overlap)).c_str(),
                static_cast<unsigned long long>(overlapped_steps),
                static_cast<unsigned long long>(device_sampled_steps), execute_ms_per_step,
                host_ms_per_step, plan_ms_per_step);
  return head + "\"ttft_ms\":" + ttft_s.Json(1000) + ",\"itl_ms\":" + itl_s.Json(1000) +
         ",\"e2e_ms\":" + e2e_s.Json(1000) + tail;
}

Result<BenchServeResult> RunBenchServe(const BenchServeOptions& o) {
  if (o.requests < 1) return InvalidArgument("--requests must be at least 1");
  if (o.shared_prefix < 0) return InvalidArgument("--shared-prefix must not be negative");
  BMAD_ASSIGN_OR_RETURN(LengthDistribution prompt_len, LengthDistribution::Parse(o.prompt_len, "--prompt-len"));
  BMAD_ASSIGN_OR_RETURN(LengthDistribution output_len, LengthDistribution::Parse(o.output_len, "--output-len"));

  proto::SamplingParams sampling;
  sampling.temperature = o.temperature;
  sampling.top_k = o.top_k;
  sampling.top_p = o.top_p;
  sampling.min_p = o.min_p;
  sampling.ignore_eos = true;

  // Before the model loads: nothing here depends on the vocabulary (no stop token ids).
  BMAD_RETURN_IF_ERROR(sampling::ValidateSamplingParams(sampling, INT32_MAX));

  ServerConfig config;
  config.model.path = o.model_path;
  config.worker.threads = o.threads;
  config.worker.backend = o.backend;
  config.scheduler.policy = o.policy;
  config.scheduler.max_batch_tokens = o.max_batch_tokens;
  config.scheduler.max_seqs = o.max_seqs;
  config.scheduler.max_waiting = std::max<int64_t>(o.requests, 1);
  config.scheduler.overlap_steps = o.overlap;
  config.cache.kv_bytes = o.kv_bytes;
  config.cache.block_size = o.block_size;
  config.cache.prefix_caching = o.prefix_caching;
  // The rules across keys a config file is held to (e.g. max_seqs <= max_batch_tokens).
  if (const std::vector<ConfigError> errors = ValidateConfig(config); !errors.empty()) {
    return InvalidArgument(errors.front().key + " " + errors.front().message);
  }
  SystemClock& clock = SystemClock::Instance();
  BMAD_ASSIGN_OR_RETURN(std::unique_ptr<worker::Replica> replica,
                        worker::Replica::Create(config, nullptr, clock));
  engine::Engine& engine = replica->engine();
  const int64_t vocab = replica->model().config().n_vocab;
  if (o.shared_prefix + prompt_len.max() + output_len.max() > engine.context_length()) {
    return OutOfRange("shared prefix + longest prompt + longest output exceed the context length " +
                      std::to_string(engine.context_length()));
  }

  // The whole workload, fixed by the seed: arrival times, prompts, output lengths.
  std::mt19937_64 rng(o.seed);
  std::exponential_distribution<double> gap(o.rate > 0 ? o.rate : 1.0);
  std::vector<int32_t> prefix;
  for (int64_t i = 0; i < o.shared_prefix; ++i) prefix.push_back(static_cast<int32_t>(3 + rng() % (vocab - 3)));
  std::vector<Planned> plan(static_cast<size_t>(o.requests));
  double t = 0;
  for (Planned& p : plan) {
    if (o.rate > 0) t += gap(rng);
    p.arrival_s = o.rate > 0 ? t : 0;
    p.prompt = prefix;
    const int64_t n = prompt_len.Sample(rng);
    for (int64_t i = 0; i < n; ++i) p.prompt.push_back(static_cast<int32_t>(3 + rng() % (vocab - 3)));
    p.output_len = output_len.Sample(rng);
  }
  // The first request comes at once: the Poisson process's first gap would be idle time
  // counted in the duration (vLLM's benchmark sends its first request at once too).
  const double first = plan.empty() ? 0 : plan.front().arrival_s;
  for (Planned& p : plan) p.arrival_s -= first;

  std::vector<double> itl;
  double waste_sum = 0, waste_max = 0;
  int64_t waste_samples = 0;
  const uint64_t preempt_start = engine.scheduler().stats().preemptions_total;
  const auto kv_start = engine.kv().GetStats();
  const engine::StepTiming timing_start = engine.step_timing();
  const auto start = std::chrono::steady_clock::now();
  auto now_s = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  size_t next = 0, done = 0;
  std::vector<engine::RequestOutput> outputs;
  while (done < plan.size()) {
    const double now = now_s();
    while (next < plan.size() && plan[next].arrival_s <= now) {
      engine::EngineRequest r;
      r.id = next + 1;
      r.prompt = plan[next].prompt;
      r.sampling = sampling;
      r.sampling.seed = o.seed * 1000003 + next;
      r.sampling.has_seed = true;
      r.sampling.max_tokens = static_cast<uint32_t>(plan[next].output_len);
      BMAD_RETURN_IF_ERROR(engine.Add(std::move(r)));
      ++next;
    }
    if (!engine.HasWork()) {
      if (next == plan.size()) {
        // Every request was added and none is left in the engine, yet some never finished.
        return Internal("the engine went idle with " +
                        std::to_string(plan.size() - done) + " of " + std::to_string(plan.size()) +
                        " requests unfinished");
      }
      if (next < plan.size()) {
        std::this_thread::sleep_for(std::chrono::duration<double>(
            std::max(0.0, std::min(0.05, plan[next].arrival_s - now))));
      }
      continue;
    }
    outputs.clear();
    BMAD_RETURN_IF_ERROR(engine.Step(&outputs));
    const double after = now_s();
    const auto kv = engine.kv().GetStats();
    if (kv.allocated_slots > 0) {
      const double w = double(kv.allocated_slots - kv.held_tokens) / double(kv.allocated_slots);
      waste_sum += w;
      waste_max = std::max(waste_max, w);
      ++waste_samples;
    }
    for (const engine::RequestOutput& out : outputs) {
      // A failed request makes every figure of the run meaningless (its latency would count
      // as a fast success, and it has no first token): the run fails, naming it.
      if (out.reason == proto::FinishReason::kError) {
        return Internal("request " + std::to_string(out.id) + " failed: " +
                        (out.error.empty() ? std::string("no message") : out.error));
      }
      Planned& p = plan[out.id - 1];
      for (size_t k = 0; k < out.token_ids.size(); ++k) {
        if (p.first_token_s < 0) {
          p.first_token_s = after;
        } else {
          itl.push_back(after - p.last_token_s);
        }
        p.last_token_s = after;
        ++p.tokens;
      }
      if (out.finished) {
        p.finish_s = after;
        ++done;
      }
    }
  }

  BenchServeResult r;
  r.requests = o.requests;
  r.duration_s = now_s();
  int64_t out_tokens = 0, in_tokens = 0;
  std::vector<double> ttft, e2e;
  for (const Planned& p : plan) {
    r.arrival_span_s = std::max(r.arrival_span_s, p.arrival_s);
    out_tokens += p.tokens;
    in_tokens += static_cast<int64_t>(p.prompt.size());
    ttft.push_back(p.first_token_s - p.arrival_s);
    e2e.push_back(p.finish_s - p.arrival_s);
  }
  r.requests_per_s = double(o.requests) / r.duration_s;
  r.output_tokens_per_s = double(out_tokens) / r.duration_s;
  r.total_tokens_per_s = double(out_tokens + in_tokens) / r.duration_s;
  r.ttft_s = LatencySummary::Of(ttft);
  r.itl_s = LatencySummary::Of(itl);
  r.e2e_s = LatencySummary::Of(e2e);
  r.kv_waste_mean = waste_samples ? waste_sum / double(waste_samples) : 0;
  r.kv_waste_max = waste_max;
  r.preemptions = engine.scheduler().stats().preemptions_total - preempt_start;
  const engine::StepTiming& timing_end = engine.step_timing();
  r.steps = timing_end.steps - timing_start.steps;
  r.overlapped_steps = timing_end.overlapped_steps - timing_start.overlapped_steps;
  r.device_sampled_steps = timing_end.device_sampled_steps - timing_start.device_sampled_steps;
  if (r.steps > 0) {
    r.execute_ms_per_step =
        double(timing_end.execute_nanos - timing_start.execute_nanos) / 1e6 / double(r.steps);
    r.host_ms_per_step =
        double(timing_end.host_nanos() - timing_start.host_nanos()) / 1e6 / double(r.steps);
    r.plan_ms_per_step =
        double(timing_end.plan_nanos - timing_start.plan_nanos) / 1e6 / double(r.steps);
  }
  const auto kv_end = engine.kv().GetStats();
  const double queried = double(kv_end.prefix_query_tokens - kv_start.prefix_query_tokens);
  r.prefix_hit_ratio = queried > 0 ? double(kv_end.prefix_hit_tokens - kv_start.prefix_hit_tokens) / queried : 0;
  return r;
}

namespace {

int RunBenchServeCommand(const std::vector<std::string>& args) {
  BenchServeOptions o;
  std::string scheduler = "continuous";
  int64_t seed = 1;
  bool no_prefix_caching = false;
  cli::Flags flags(
      "bmad bench serve --model FILE.gguf [--scheduler continuous|fcfs|static] [--rate R] "
      "[--requests N] [--prompt-len DIST] [--output-len DIST] [--shared-prefix TOKENS]");
  flags.AddString("model", &o.model_path, "GGUF model to serve in this process.");
  flags.AddString("scheduler", &scheduler, "continuous, fcfs or static (default continuous).");
  flags.AddDouble("rate", &o.rate, "Poisson arrival rate, requests/s (0: all at once).", 0.0, 1e6);
  flags.AddInt("requests", &o.requests, "Requests to send (default 64).", 1, 1'000'000);
  flags.AddString("prompt-len", &o.prompt_len, "Prompt tokens: N, A-B or A,B,C (default 32-512).");
  flags.AddString("output-len", &o.output_len, "Output tokens: N, A-B or A,B,C (default 32-128).");
  flags.AddInt("shared-prefix", &o.shared_prefix, "Tokens every prompt starts with (default 0).", 0,
                1 << 24);
  flags.AddInt("threads", &o.threads, "Compute threads (default: every core).", 0,
                kMaxComputeThreads);
  std::string backend = "cpu";
  flags.AddString("backend", &backend,
                  "Compute backend: cpu or cuda (default cpu; on cuda the KV cache takes the rest "
                  "of worker.gpu_memory_fraction's arena and --kv-bytes does not apply).");
  std::string overlap = "auto";
  flags.AddString("overlap", &overlap,
                  "Plan step n+1 while step n runs: auto (on cuda), on or off (default auto).");
  // The limits of the config keys these set (common/config/config_fields.h).
  flags.AddInt("max-batch-tokens", &o.max_batch_tokens, "Token budget per step (default 512).", 1,
                1 << 20);
  flags.AddInt("max-seqs", &o.max_seqs, "Sequences per step (default 64).", 1, 1 << 16);
  flags.AddSize("kv-bytes", &o.kv_bytes, "KV cache bytes, e.g. 256MiB (default 256 MiB).", 1 << 16, 1ll << 42);
  flags.AddInt("block-size", &o.block_size, "Tokens per KV block (default: cache.block_size's, 8).");
  flags.AddBool("no-prefix-caching", &no_prefix_caching, "Turn prefix reuse off.");
  flags.AddInt("seed", &seed, "Workload seed (default 1).", 0, INT64_MAX);
  double temperature = 0.0, top_p = 1.0, min_p = 0.0;
  int64_t top_k = 0;
  flags.AddDouble("temperature", &temperature,
                  "Every request's sampling temperature (default 0: greedy).");
  flags.AddInt("top-k", &top_k, "Every request's top-k (default 0: off).", 0, INT32_MAX);
  flags.AddDouble("top-p", &top_p, "Every request's top-p (default 1: off).");
  flags.AddDouble("min-p", &min_p, "Every request's min-p (default 0: off).");
  std::vector<std::string> positional;
  Status s = flags.Parse(args, &positional);
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (s.ok() && o.model_path.empty()) s = InvalidArgument("--model is required");
  if (s.ok()) s = LengthDistribution::Parse(o.prompt_len, "--prompt-len").status();
  if (s.ok()) s = LengthDistribution::Parse(o.output_len, "--output-len").status();
  if (s.ok() && o.rate > 0 && o.rate < kMinArrivalRate) {
    s = InvalidArgument("--rate must be 0 (all at once) or at least " + std::to_string(kMinArrivalRate) +
                        " requests/s, got " + std::to_string(o.rate));
  }
  if (s.ok() && (o.block_size < 1 || o.block_size > 1024)) {
    s = InvalidArgument("--block-size must be 1..1024, got " + std::to_string(o.block_size));
  }
  if (s.ok() && !EnumFromName(scheduler, &o.policy)) {
    s = InvalidArgument("--scheduler must be continuous, fcfs or static, got '" + scheduler + "'");
  }
  if (s.ok() && !EnumFromName(backend, &o.backend)) {
    s = InvalidArgument("--backend must be cpu or cuda, got '" + backend + "'");
  }
  if (s.ok() && !EnumFromName(overlap, &o.overlap)) {
    s = InvalidArgument("--overlap must be auto, on or off, got '" + overlap + "'");
  }
  // The sampling knobs as typed (before they narrow to the sampler's types), with the ranges
  // the sampler accepts.
  auto typed = [](double v) {  // the shortest text that reads back as v: what was typed
    char buf[64];
    const auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
    return std::string(buf, end);
  };
  if (s.ok() && !(std::isfinite(temperature) && temperature >= 0.0)) {
    s = InvalidArgument("--temperature must be a finite number >= 0, got " + typed(temperature));
  }
  if (s.ok() && !(top_p > 0.0 && top_p <= 1.0)) {
    s = InvalidArgument("--top-p must be in (0, 1], got " + typed(top_p));
  }
  if (s.ok() && !(min_p >= 0.0 && min_p <= 1.0)) {
    s = InvalidArgument("--min-p must be in [0, 1], got " + typed(min_p));
  }
  if (!s.ok()) {
    std::fprintf(stderr, "bmad bench serve: %s\n", s.message().c_str());
    return 2;
  }
  o.seed = static_cast<uint64_t>(seed);
  o.temperature = static_cast<float>(temperature);
  o.top_k = static_cast<int32_t>(top_k);
  o.top_p = static_cast<float>(top_p);
  o.min_p = static_cast<float>(min_p);
  o.prefix_caching = !no_prefix_caching;
  auto r = RunBenchServe(o);
  if (!r.ok()) {
    std::fprintf(stderr, "bmad bench serve: %s\n", r.status().message().c_str());
    return 1;
  }
  std::printf("scheduler %s, rate %.2f req/s, %lld requests in %.1f s\n", scheduler.c_str(), o.rate,
              static_cast<long long>(r->requests), r->duration_s);
  std::printf("throughput: %.2f req/s, %.1f output tok/s, %.1f total tok/s\n", r->requests_per_s,
              r->output_tokens_per_s, r->total_tokens_per_s);
  auto row = [](const char* name, const LatencySummary& s) {
    if (s.count == 0) return (void)std::printf("%s no samples\n", name);
    std::printf("%s p50 %.1f  p99 %.1f\n", name, s.p50 * 1000, s.p99 * 1000);
  };
  row("time to first token ms:", r->ttft_s);
  row("inter-token latency ms:", r->itl_s);  // none when every output is one token
  row("end-to-end latency ms: ", r->e2e_s);
  std::printf("KV waste: mean %.2f%%, max %.2f%%; preemptions %llu; prefix-cache hits %.1f%%\n",
              100 * r->kv_waste_mean, 100 * r->kv_waste_max,
              static_cast<unsigned long long>(r->preemptions), 100 * r->prefix_hit_ratio);
  std::printf("engine steps: %llu (%llu with the next planned while they ran, %llu sampled on the "
              "device); per step %.2f ms executing, %.3f ms in the host stages (%.1f%%), "
              "of which %.3f ms planning\n",
              static_cast<unsigned long long>(r->steps),
              static_cast<unsigned long long>(r->overlapped_steps),
              static_cast<unsigned long long>(r->device_sampled_steps), r->execute_ms_per_step,
              r->host_ms_per_step,
              100 * r->host_ms_per_step / std::max(1e-9, r->execute_ms_per_step + r->host_ms_per_step),
              r->plan_ms_per_step);
  std::printf("%s\n", r->Json(o).c_str());
  return 0;
}

}  // namespace

std::vector<cli::Command> BenchServeCommands() {
  return {{{"bench", "serve"},
           "Serve an open-loop Poisson load in this process; latency and throughput.",
           RunBenchServeCommand}};
}

}  // namespace bmad::tools
