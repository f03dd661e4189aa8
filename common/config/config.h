// Typed configuration: one struct per concern, defaults in-class, one ServerConfig aggregate.
//
// Nothing here knows about YAML: config_loader.cc is the only file that touches yaml-cpp, and
// config_fields.h is the single list of keys (name, default, range, documentation) that the
// loader, the printer and the documentation test all walk.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/log.h"

namespace bmad {

// The names model.chat_template takes (empty: the model's own). coordinator/http/chat_template.cc
// implements each; its test keeps the two lists the same.
inline constexpr std::array<std::string_view, 13> kChatTemplateNames = {
    "chatml", "llama2", "llama3", "llama3.1", "mistral", "mistral-v3", "mistral-legacy", "mistral-v7-tekken", "zephyr",
    "phi3", "gemma", "deepseek-r1", "plain"};

// The names model.reasoning_parser takes (empty: none), vLLM's --reasoning-parser names for the
// "<think>...</think>" block (coordinator/http/reasoning_split.h).
inline constexpr std::array<std::string_view, 2> kReasoningParserNames = {"deepseek_r1", "qwen3"};

// The names model.tool_call_parser takes (empty: none), vLLM's --tool-call-parser names for the
// tool call layouts bmad reads (coordinator/http/tool_call_split.h).
inline constexpr std::array<std::string_view, 2> kToolCallParserNames = {"hermes", "llama3_json"};

enum class RouterPolicy { kWeighted, kRoundRobin, kLeastLoaded };
enum class ReplicaPool { kNormal, kLongTail };
enum class Backend { kCpu, kCuda };
enum class SchedulerPolicy { kContinuous, kFcfs, kStatic };
// Whether a replica's engine plans step n+1 while step n runs (worker/engine/engine.h).
enum class StepOverlap {
  kAuto,  // where the backend computes asynchronously: cuda, a replica of one rank
  kOn,    // always (on the cpu it changes only the order of the host stages)
  kOff,
};

// Names of each enum's values as they appear in YAML; specialised below.
template <typename E>
struct EnumNames;

template <>
struct EnumNames<log::Level> {
  static constexpr std::array<std::pair<log::Level, std::string_view>, 5> kNames{{
      {log::Level::kDebug, "debug"},
      {log::Level::kInfo, "info"},
      {log::Level::kWarn, "warn"},
      {log::Level::kError, "error"},
      {log::Level::kOff, "off"},
  }};
};
template <>
struct EnumNames<RouterPolicy> {
  static constexpr std::array<std::pair<RouterPolicy, std::string_view>, 3> kNames{{
      {RouterPolicy::kWeighted, "weighted"},
      {RouterPolicy::kRoundRobin, "round_robin"},
      {RouterPolicy::kLeastLoaded, "least_loaded"},
  }};
};
template <>
struct EnumNames<ReplicaPool> {
  static constexpr std::array<std::pair<ReplicaPool, std::string_view>, 2> kNames{{
      {ReplicaPool::kNormal, "normal"},
      {ReplicaPool::kLongTail, "long_tail"},
  }};
};
template <>
struct EnumNames<Backend> {
  static constexpr std::array<std::pair<Backend, std::string_view>, 2> kNames{{
      {Backend::kCpu, "cpu"},
      {Backend::kCuda, "cuda"},
  }};
};
template <>
struct EnumNames<SchedulerPolicy> {
  static constexpr std::array<std::pair<SchedulerPolicy, std::string_view>, 3> kNames{{
      {SchedulerPolicy::kContinuous, "continuous"},
      {SchedulerPolicy::kFcfs, "fcfs"},
      {SchedulerPolicy::kStatic, "static"},
  }};
};

template <>
struct EnumNames<StepOverlap> {
  static constexpr std::array<std::pair<StepOverlap, std::string_view>, 3> kNames{{
      {StepOverlap::kAuto, "auto"},
      {StepOverlap::kOn, "on"},
      {StepOverlap::kOff, "off"},
  }};
};

template <typename E>
std::string_view EnumName(E value) {
  for (const auto& [v, name] : EnumNames<E>::kNames) {
    if (v == value) return name;
  }
  return "?";
}

template <typename E>
bool EnumFromName(std::string_view name, E* out) {
  for (const auto& [v, n] : EnumNames<E>::kNames) {
    if (n == name) {
      *out = v;
      return true;
    }
  }
  return false;
}

struct LogConfig {
  log::Level level = log::Level::kInfo;
};

struct ModelConfig {
  std::string path;               // GGUF file the workers load (and the coordinator's vocabulary)
  std::string name;               // served model id; empty: the file name without extension
  int64_t context_length = 0;     // 0: the model's own context length
  std::string chat_template;      // empty: the model's own when recognised, else the default
  std::string reasoning_parser;   // empty: chat answers are all content; else reasoning apart
  std::string tool_call_parser;   // empty: tool_choice "auto" is refused; else calls are read

  // The id clients see (in /v1/models and every response), the same on coordinator and worker.
  std::string ServedName() const {
    return !name.empty() ? name : std::filesystem::path(path).stem().string();
  }
};

struct CoordinatorConfig {
  std::string client_endpoint = "tcp://127.0.0.1:5555";  // ZeroMQ ROUTER for clients
  std::string worker_endpoint = "tcp://127.0.0.1:5556";  // ZeroMQ ROUTER for workers
  std::string http_host = "127.0.0.1";
  int64_t http_port = 8000;               // 0: pick a free port and log it
  int64_t http_max_connections = 4096;    // HTTP connections served at once (a thread each)
  int64_t http_keep_alive_timeout_ms = 5000;  // an idle kept-alive connection closes after this
  std::string http_cors_origin;           // CORS: "" none, "*" any origin, or one origin
  std::string api_keys_file;              // keys clients must present; "" lets every client in
  int64_t sse_keepalive_ms = 15000;       // a silent stream gets an SSE comment this often; 0: none
  int64_t liveness_timeout_ms = 2000;     // a replica silent this long is dead
  int64_t drain_timeout_ms = 10000;       // on SIGTERM: how long in-flight requests may finish
  int64_t queue_timeout_ms = 60000;       // a request no replica takes in this long fails
  int64_t max_queued_per_priority = 1024; // admission bound per priority class
  int64_t priority_classes = 3;           // class 0 is the most urgent
  int64_t max_message_bytes = 64 << 20;   // larger protocol messages are rejected

  // The class of a request that names none: 1, so that clients can ask for more urgency (0)
  // and for less; 0 when there is only one class.
  int32_t DefaultPriority() const { return priority_classes > 1 ? 1 : 0; }
};

struct RouterConfig {
  RouterPolicy policy = RouterPolicy::kWeighted;
  double weight_queue = 0.6;
  double weight_memory = 0.1;
  double weight_utilization = 0.3;
  bool long_tail = true;                 // route long prompts to the long-tail pool
  double long_tail_quantile = 0.8;       // "long" = above this quantile of recent prompt lengths
  int64_t long_tail_window = 512;        // how many recent prompt lengths the quantile uses
  int64_t long_tail_min_samples = 32;    // below this many samples nothing counts as long
  bool prefix_affinity = true;           // prefer the replica that caches the prompt's prefix
  double prefix_affinity_load_bound = 1.5;  // ...if its load is within this factor of the best
};

// The most compute threads a rank may ask for (worker.threads and every command's --threads).
inline constexpr int64_t kMaxComputeThreads = 1024;

struct WorkerConfig {
  std::string replica_id = "replica-0";
  ReplicaPool pool = ReplicaPool::kNormal;
  Backend backend = Backend::kCpu;
  int64_t threads = 0;                   // compute threads per rank; 0: all cores
  int64_t heartbeat_ms = 250;
  int64_t arena_bytes = 0;               // 0: cpu sizes it from the model and the cache, cuda
                                         // from gpu_memory_fraction
  double gpu_memory_fraction = 0.9;      // share of free GPU memory the arena reserves
  int64_t drain_timeout_ms = 0;          // draining longer than this, the replica stops and the
                                         // coordinator moves what runs; 0: no bound
};

struct SchedulerConfig {
  SchedulerPolicy policy = SchedulerPolicy::kContinuous;
  int64_t max_batch_tokens = 512;        // tokens computed per step, prefill chunks included
  int64_t max_seqs = 64;                 // sequences per step
  int64_t max_wait_ms = 200;             // a request waiting longer goes first
  double priority_decay = 1.0;           // aging: priority gained per second of waiting
  int64_t default_slo_ms = 5000;         // deadline for requests that carry none
  int64_t max_waiting = 4096;            // requests queued on a worker before it refuses more
  StepOverlap overlap_steps = StepOverlap::kAuto;
  // Prompt positions a step computes log-probabilities for (a request's prompt logprobs: echo
  // with logprobs, prompt_logprobs); such a prompt is computed in chunks of at most this many
  // tokens. 0: prompt logprobs are refused.
  int64_t max_prompt_logprob_tokens = 64;

  // The most rows of logits one step computes: a sampling row per sequence, and the prompt
  // positions above. Sizes the logits buffers.
  int64_t max_logit_rows() const { return max_seqs + max_prompt_logprob_tokens; }
};

struct CacheConfig {
  int64_t block_size = 8;                // tokens per KV block (docs/benchmarks.md: 8 against 16)
  int64_t num_blocks = 0;                // 0: derived from kv_bytes
  int64_t kv_bytes = 256ll << 20;        // KV cache size when num_blocks is 0
  bool prefix_caching = true;
};

struct ParallelConfig {
  int64_t tp = 1;                        // tensor-parallel ranks per replica
  int64_t pp = 1;                        // pipeline stages per replica
  std::vector<int64_t> stage_layers;     // layers per stage; empty: balanced
  int64_t micro_batches = 0;             // 0: pp micro-batches in flight
  int64_t step_timeout_ms = 30000;       // a step longer than this is a hang
};

struct MetricsConfig {
  std::string host = "127.0.0.1";
  int64_t coordinator_port = 9400;       // the coordinator's /metrics; 0: pick a free port
  int64_t worker_port = 9500;            // replica i serves on worker_port + i; 0: pick free
};

struct ClusterConfig {
  int64_t normal_replicas = 1;           // replicas the launcher starts in the normal pool
  int64_t long_tail_replicas = 0;        // ...and in the long-tail pool
  std::string hostfile;                  // mpirun hostfile; empty: all on this host
};

struct ServerConfig {
  LogConfig log;
  ModelConfig model;
  CoordinatorConfig coordinator;
  RouterConfig router;
  WorkerConfig worker;
  SchedulerConfig scheduler;
  CacheConfig cache;
  ParallelConfig parallel;
  MetricsConfig metrics;
  ClusterConfig cluster;
};

}  // namespace bmad
