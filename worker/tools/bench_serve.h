// `bmad bench serve`: the serving engine in this process under an open-loop Poisson load, as a
// replica would see it: requests arrive at their scheduled times (the first at once) whatever the engine is doing,
// and latency counts from the scheduled arrival. Prints throughput, time to first token,
// inter-token latency, end-to-end latency, KV waste and prefix-cache hits; the last line is one
// JSON object.
#pragma once

#include <string>
#include <vector>

#include "common/cli/command.h"
#include "common/config/config.h"
#include "common/status.h"
#include "worker/tools/latency_summary.h"

namespace bmad::tools {

struct BenchServeOptions {
  std::string model_path;
  SchedulerPolicy policy = SchedulerPolicy::kContinuous;
  double rate = 1.0;                 // requests per second (Poisson); <= 0: all at time 0
  int64_t requests = 64;
  std::string prompt_len = "32-512";
  std::string output_len = "32-128";
  int64_t shared_prefix = 0;         // tokens every prompt starts with
  int64_t threads = 0;
  Backend backend = Backend::kCpu;
  StepOverlap overlap = StepOverlap::kAuto;
  int64_t max_batch_tokens = 512;
  int64_t max_seqs = 64;
  int64_t kv_bytes = 256ll << 20;
  int64_t block_size = CacheConfig{}.block_size;
  bool prefix_caching = true;
  uint64_t seed = 1;
  // How every request samples (greedy by default). Each request gets its own seed, derived
  // from `seed` and its index, so a run draws the same tokens every time.
  float temperature = 0.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
};

struct BenchServeResult {
  int64_t requests = 0;
  double duration_s = 0;
  // When the last request arrived (0 with every request at once): (requests - 1) / this is the
  // arrival rate the run actually offered, which a finite Poisson draw puts off the nominal one.
  double arrival_span_s = 0;
  double requests_per_s = 0;
  double output_tokens_per_s = 0;
  double total_tokens_per_s = 0;
  LatencySummary ttft_s, itl_s, e2e_s;
  double kv_waste_mean = 0, kv_waste_max = 0;
  uint64_t preemptions = 0;
  double prefix_hit_ratio = 0;
  // Engine steps, and their time split: the forward pass, and the host stages around it.
  // With overlap, execute is the time the host waited for the device (launch included), and
  // overlapped_steps the steps whose successor was planned while they ran.
  uint64_t steps = 0;
  uint64_t overlapped_steps = 0;
  uint64_t device_sampled_steps = 0;  // tokens drawn on the device (cuda)
  double execute_ms_per_step = 0, host_ms_per_step = 0, plan_ms_per_step = 0;
  std::string Json(const BenchServeOptions& o) const;
};

Result<BenchServeResult> RunBenchServe(const BenchServeOptions& options);

std::vector<cli::Command> BenchServeCommands();

}  // namespace bmad::tools
