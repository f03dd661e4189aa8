// The one list of configuration keys. Each visitor (YAML loader, printer, key lister) walks it,
// so a key's name, default, allowed range and documentation live in exactly one place.
//
// A visitor provides:
//   void Section(std::string_view name, std::string_view doc, Body body)  // body() visits fields
//   void Field(std::string_view key, T& value, std::string_view doc, Limits<T> limits)
// for T in {bool, int64_t, double, std::string, std::vector<int64_t>, enums with EnumNames}.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string_view>

#include "common/config/config.h"

namespace bmad {

// Inclusive numeric bounds; for strings `non_empty`, an endpoint's form, a length, or a list of
// the values allowed besides the empty one.
template <typename T>
struct Limits {
  T min = std::numeric_limits<T>::lowest();
  T max = std::numeric_limits<T>::max();
};
template <>
struct Limits<std::string> {
  bool non_empty = false;
  bool endpoint = false;  // must be a ZeroMQ tcp:// or ipc:// endpoint
  size_t max_bytes = 0;   // 0: any length
  std::span<const std::string_view> one_of = {};  // empty: any text
};
template <>
struct Limits<bool> {};
template <>
struct Limits<std::vector<int64_t>> {
  int64_t min = 1;
  int64_t max = std::numeric_limits<int64_t>::max();
};

inline constexpr int64_t kMaxPort = 65535;

template <typename Visitor>
void VisitConfig(ServerConfig& c, Visitor& v) {
  using I = Limits<int64_t>;
  using D = Limits<double>;
  using S = Limits<std::string>;

  v.Section("log", "Process logging.", [&] {
    v.Field("level", c.log.level, "Lowest level written: debug, info, warn, error or off.",
            Limits<log::Level>{});
  });

  v.Section("model", "The model every replica serves.", [&] {
    v.Field("path", c.model.path, "GGUF file the workers load; the coordinator reads its vocabulary.",
            S{});
    v.Field("name", c.model.name,
            "Model id clients name in requests; empty means the file name without its extension.",
            S{});
    v.Field("context_length", c.model.context_length,
            "Longest sequence (prompt + output) in tokens; 0 means the model's own, and more is "
            "refused at start. Never more than the replica's KV cache holds.",
            I{0, 1 << 24});
    v.Field("chat_template", c.model.chat_template,
            "Chat template name, with that format's reference text (llama3.1: dated 26 Jul 2024); "
            "empty means the model's own when recognised, its date and default system prompt "
            "included, else chatml.",
            S{.one_of = kChatTemplateNames});
    v.Field("reasoning_parser", c.model.reasoning_parser,
            "Chat answers of reasoning models: empty leaves their reasoning block (`<think>` to "
            "`</think>`) in the content; deepseek_r1 or qwen3 (vLLM's names) return it apart, as "
            "each message's `reasoning` and `reasoning_content`. deepseek_r1 takes every answer "
            "to start inside the block; qwen3 only where the chat template's generation prompt "
            "opened it, else the answer may open it. An output constraint (JSON, regex, choice) "
            "then applies after the block.",
            S{.one_of = kReasoningParserNames});
    v.Field("tool_call_parser", c.model.tool_call_parser,
            "Chat tool calling with tool_choice \"auto\" (the default when a request gives tools), "
            "vLLM's names: hermes reads the model's `<tool_call>{...}</tool_call>` blocks into the "
            "answer's `tool_calls`, as Qwen2.5, Qwen3 and QwQ write them (chat template chatml with "
            "Qwen's tool layout); llama3_json reads an answer of JSON calls, as Llama 3.1 to 3.3 write "
            "them (chat template llama3.1 with Meta's tool layout). Empty refuses \"auto\"; "
            "tool_choice \"none\", \"required\" and a named function need no parser.",
            S{.one_of = kToolCallParserNames});
  });

  v.Section("coordinator", "The coordinator process: front doors and replica registry.", [&] {
    v.Field("client_endpoint", c.coordinator.client_endpoint,
            "ZeroMQ ROUTER endpoint clients connect to (Cap'n Proto protocol).", S{true, true});
    v.Field("worker_endpoint", c.coordinator.worker_endpoint,
            "ZeroMQ ROUTER endpoint worker replicas connect to.", S{true, true});
    v.Field("http_host", c.coordinator.http_host, "Address the OpenAI-compatible HTTP API binds.",
            S{true, false});
    v.Field("http_port", c.coordinator.http_port,
            "Port of the HTTP API (also serves /metrics); 0 picks a free port.", I{0, kMaxPort});
    v.Field("http_cors_origin", c.coordinator.http_cors_origin,
            "Browser pages allowed to call the HTTP API (CORS): empty for none (no CORS headers), "
            "\"*\" for any origin (vLLM's default), or one origin such as https://chat.example.com.",
            S{});
    v.Field("api_keys_file", c.coordinator.api_keys_file,
            "File of API keys, one per line ('#' starts a comment line): requests must then "
            "present one, as 'Authorization: Bearer KEY' on the HTTP API's /v1 routes, /tokenize "
            "and /detokenize, and as Submit.api_key on the client socket (bmad generate "
            "--api-key), or get 401 / UNAUTHENTICATED; /health, /ready, /metrics, /version, /ping, CORS preflights "
            "and the socket's status queries and cancels need none. Read again within two seconds "
            "of a change, so keys rotate without a restart (replace the file by a rename). Empty: no "
            "key is asked for (vLLM's default).",
            S{});
    v.Field("http_max_connections", c.coordinator.http_max_connections,
            "HTTP connections served at once, each on a thread of its own (a streaming request "
            "holds its connection to the end); more wait until one closes. Keep it above the "
            "requests admitted (max_queued_per_priority per class) so that those past the "
            "admission bound get 429 rather than wait unseen.",
            I{16, 65536});
    v.Field("http_keep_alive_timeout_ms", c.coordinator.http_keep_alive_timeout_ms,
            "An HTTP connection kept alive between requests closes after this long idle (whole "
            "seconds, rounded up; uvicorn's and so vLLM's default is 5 s too). Behind a load "
            "balancer that reuses idle connections, set it above the balancer's idle timeout (AWS "
            "ALB: 60 s), or a request it sends just as the coordinator closes fails with a 502. An "
            "idle connection holds its thread meanwhile (see http_max_connections).",
            I{1000, 3'600'000});
    v.Field("sse_keepalive_ms", c.coordinator.sse_keepalive_ms,
            "While a streamed response has nothing to send (its request queued, or a long prompt "
            "in prefill), an SSE comment line (': keep-alive') is written this often, so that a "
            "proxy or load balancer with an idle timeout keeps the connection, and a client that "
            "has gone is noticed by the failed write; 0 sends none. A stream's headers wait for "
            "its first event up to this long (not at all at 0), so that a request failing before "
            "then (the coordinator stopping, a replica's refusal, a queue_timeout_ms shorter than "
            "this) gets that failure's HTTP status, not an error event in a 200 stream.",
            I{0, 3'600'000});
    v.Field("liveness_timeout_ms", c.coordinator.liveness_timeout_ms,
            "A replica with no heartbeat for this long is declared dead and its requests move; a "
            "worker that hears nothing from the coordinator for this long answers /ready with 503. "
            "At least twice worker.heartbeat_ms.",
            I{50, 3'600'000});
    v.Field("drain_timeout_ms", c.coordinator.drain_timeout_ms,
            "On SIGTERM the coordinator refuses new requests and waits this long for in-flight "
            "ones to finish before it exits; those still unfinished then fail as unavailable "
            "(match the pod's termination grace period). When all that is left is queued with no "
            "live replica taking work, they fail at once.",
            I{0, 3'600'000});
    v.Field("queue_timeout_ms", c.coordinator.queue_timeout_ms,
            "A request that no replica has taken this long after it was admitted (no replica "
            "live, or every live one full or draining) fails as unavailable; a migrated request "
            "gets this long again.",
            I{100, 86'400'000});
    v.Field("max_queued_per_priority", c.coordinator.max_queued_per_priority,
            "Requests admitted but not finished, per priority class; past it, 'overloaded'.",
            I{1, 1 << 24});
    v.Field("priority_classes", c.coordinator.priority_classes,
            "Number of priority classes; class 0 is the most urgent. A request that names none "
            "gets class 1 (0 when there is only one).",
            I{1, 16});
    v.Field("max_message_bytes", c.coordinator.max_message_bytes,
            "Largest protocol message accepted on any socket; one up to twice this is refused "
            "with an error naming the limit, a larger one is dropped unread with its connection. "
            "Must hold a replica's heartbeat (12 bytes per request it may hold, "
            "scheduler.max_seqs + scheduler.max_waiting, and 4096 more); a request whose message "
            "to its replica could exceed it is refused (HTTP 400).",
            I{1024, 1ll << 31});
  });

  v.Section("router", "How the coordinator picks a replica.", [&] {
    v.Field("policy", c.router.policy,
            "Balancing among candidate replicas: weighted, round_robin or least_loaded.",
            Limits<RouterPolicy>{});
    v.Field("weight_queue", c.router.weight_queue, "Weight of queue depth in a replica's load.",
            D{0.0, 1000.0});
    v.Field("weight_memory", c.router.weight_memory, "Weight of KV-cache usage in a replica's load.",
            D{0.0, 1000.0});
    v.Field("weight_utilization", c.router.weight_utilization,
            "Weight of compute utilization in a replica's load.", D{0.0, 1000.0});
    v.Field("long_tail", c.router.long_tail,
            "Send prompts longer than the rolling quantile to the long-tail pool when one is live.",
            Limits<bool>{});
    v.Field("long_tail_quantile", c.router.long_tail_quantile,
            "Quantile of recent prompt lengths above which a prompt is long-tail.", D{0.5, 0.999});
    v.Field("long_tail_window", c.router.long_tail_window,
            "How many recent prompt lengths the quantile is computed over.", I{8, 1 << 20});
    v.Field("long_tail_min_samples", c.router.long_tail_min_samples,
            "Prompts seen before any prompt can count as long-tail.", I{1, 1 << 20});
    v.Field("prefix_affinity", c.router.prefix_affinity,
            "Prefer the replica that already caches the prompt's leading blocks.", Limits<bool>{});
    v.Field("prefix_affinity_load_bound", c.router.prefix_affinity_load_bound,
            "Affinity holds only while that replica's load is at most this factor of the "
            "least-loaded candidate's (plus one request).",
            D{1.0, 100.0});
  });

  v.Section("worker", "Each worker replica.", [&] {
    // At most 200 bytes: it goes into the worker's ZeroMQ routing id (255 bytes at most) with
    // a 17-byte incarnation, and a multi-replica job appends "-<index>".
    v.Field("replica_id", c.worker.replica_id, "Replica name shown in status and metrics labels.",
            S{true, false, 200});
    v.Field("pool", c.worker.pool, "Pool this replica serves: normal or long_tail.",
            Limits<ReplicaPool>{});
    v.Field("backend", c.worker.backend, "Compute backend: cpu, or cuda (one GPU per rank, by local rank).", Limits<Backend>{});
    v.Field("threads", c.worker.threads, "Compute threads per rank; 0 uses every core.",
            I{0, kMaxComputeThreads});
    v.Field("heartbeat_ms", c.worker.heartbeat_ms,
            "Interval between heartbeats to the coordinator, sent during long steps too.",
            I{10, 600'000});
    v.Field("arena_bytes", c.worker.arena_bytes,
            "Arena for weights, KV blocks and workspace; 0: on cpu sized from the model and cache, "
            "on cuda gpu_memory_fraction of free GPU memory.",
            I{0, 1ll << 42});
    v.Field("gpu_memory_fraction", c.worker.gpu_memory_fraction,
            "cuda: share of free GPU memory the arena reserves at start-up (KV takes the rest).", D{0.05, 0.99});
    v.Field("drain_timeout_ms", c.worker.drain_timeout_ms,
            "A draining replica (SIGTERM, or the coordinator's drain) finishes its running requests "
            "for at most this long, then stops and tells the coordinator, which moves the rest to "
            "other replicas from the tokens already streamed. 0: no bound.",
            I{0, 86'400'000});
  });

  v.Section("scheduler", "Continuous batching on each replica.", [&] {
    v.Field("policy", c.scheduler.policy,
            "continuous (iteration-level, SLO-aware), fcfs (continuous, arrival order) or static "
            "(a batch runs to completion before the next).",
            Limits<SchedulerPolicy>{});
    v.Field("max_batch_tokens", c.scheduler.max_batch_tokens,
            "Tokens computed per step, prefill chunks included.", I{1, 1 << 20});
    v.Field("max_seqs", c.scheduler.max_seqs, "Sequences in one step.", I{1, 1 << 16});
    v.Field("max_wait_ms", c.scheduler.max_wait_ms,
            "A request waiting longer than this is admitted before any other.", I{1, 3'600'000});
    v.Field("priority_decay", c.scheduler.priority_decay,
            "Aging: priority a waiting request gains per second.", D{0.0, 1e6});
    v.Field("default_slo_ms", c.scheduler.default_slo_ms,
            "Deadline given to requests that carry none.", I{1, 86'400'000});
    v.Field("max_waiting", c.scheduler.max_waiting,
            "Requests waiting on a replica before it refuses new ones.", I{1, 1 << 24});
    v.Field("overlap_steps", c.scheduler.overlap_steps,
            "Plan step n+1 while step n runs: auto (on cuda, for a replica of one rank), on or "
            "off. The tokens are the same either way.",
            Limits<StepOverlap>{});
    v.Field("max_prompt_logprob_tokens", c.scheduler.max_prompt_logprob_tokens,
            "Prompt positions one step computes log-probabilities for (echo with logprobs, "
            "prompt_logprobs): such prompts are computed in chunks of at most this many tokens, and "
            "the logits buffers hold max_seqs + this many rows of the vocabulary. 0: prompt "
            "log-probabilities are refused.",
            I{0, 1 << 16});
  });

  v.Section("cache", "The paged KV cache.", [&] {
    v.Field("block_size", c.cache.block_size, "Tokens per KV block.", I{1, 1024});
    v.Field("num_blocks", c.cache.num_blocks, "KV blocks per replica; 0 derives it from kv_bytes (cpu) or the arena (cuda).",
            I{0, 1 << 28});
    v.Field("kv_bytes", c.cache.kv_bytes, "Memory for KV blocks when num_blocks is 0 (cpu only).",
            I{1 << 16, 1ll << 42});
    v.Field("prefix_caching", c.cache.prefix_caching,
            "Reuse cached blocks of identical prompt prefixes.", Limits<bool>{});
  });

  v.Section("parallel", "How one replica is split over MPI ranks.", [&] {
    v.Field("tp", c.parallel.tp, "Tensor-parallel ranks per replica.", I{1, 512});
    v.Field("pp", c.parallel.pp, "Pipeline stages per replica.", I{1, 512});
    v.Field("stage_layers", c.parallel.stage_layers,
            "Layers per pipeline stage (one entry per stage); empty balances by layer count.",
            Limits<std::vector<int64_t>>{1, 1 << 16});
    v.Field("micro_batches", c.parallel.micro_batches,
            "Micro-batches in flight through the pipeline; 0 means pp.", I{0, 64});
    v.Field("step_timeout_ms", c.parallel.step_timeout_ms,
            "A step or collective taking longer is a hang: the replica reports and exits (one "
            "rank: stops its heartbeats, so the coordinator moves its requests, and fails "
            "`/health` until the step ends, so a liveness probe restarts it).",
            I{100, 3'600'000});
  });

  v.Section("metrics", "Prometheus /metrics endpoints.", [&] {
    v.Field("host", c.metrics.host, "Address the /metrics endpoints bind.", S{true, false});
    v.Field("coordinator_port", c.metrics.coordinator_port,
            "Port of the coordinator's /metrics; 0 picks a free port.", I{0, kMaxPort});
    v.Field("worker_port", c.metrics.worker_port,
            "Port of the first replica's /metrics; replica i uses worker_port + i; 0 picks free "
            "ports.",
            I{0, kMaxPort});
  });

  v.Section("cluster", "What the launcher starts (deploy/).", [&] {
    v.Field("normal_replicas", c.cluster.normal_replicas, "Replicas in the normal pool.",
            I{0, 4096});
    v.Field("long_tail_replicas", c.cluster.long_tail_replicas, "Replicas in the long-tail pool.",
            I{0, 4096});
    v.Field("hostfile", c.cluster.hostfile,
            "mpirun hostfile for the workers; empty runs everything on this host.", S{});
  });
}

}  // namespace bmad
