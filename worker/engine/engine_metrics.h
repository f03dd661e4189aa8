// The worker's Prometheus metrics, created once per replica; the engine keeps the references
// and updates them with one atomic operation each.
#pragma once

#include <string>

#include "common/metrics/registry.h"
#include "common/proto/messages.h"

namespace bmad::engine {

struct EngineMetrics {
  EngineMetrics(metrics::Registry& registry, const std::string& replica_id, int64_t block_size,
                int64_t num_blocks);

  metrics::Counter& Finished(proto::FinishReason reason);

  metrics::Gauge& requests_running;
  metrics::Gauge& requests_waiting;
  metrics::Counter& preemptions;
  metrics::Counter& shared_prefix_waits;
  metrics::Counter& prompt_tokens;
  metrics::Counter& generation_tokens;
  metrics::Counter& prefix_query_tokens;
  metrics::Counter& prefix_hit_tokens;
  metrics::Counter& kv_evictions;
  metrics::Histogram& batch_sequences;
  metrics::Histogram& step_tokens;
  metrics::Histogram& step_seconds;
  metrics::Histogram& time_to_first_token;
  metrics::Histogram& inter_token_latency;
  metrics::Histogram& e2e_latency;
  metrics::Histogram& queue_wait;
  metrics::Histogram& prompt_tokens_per_request;
  metrics::Histogram& generation_tokens_per_request;
  metrics::Gauge& kv_usage;
  metrics::Gauge& kv_free_blocks;
  metrics::Gauge& kv_waste;
  metrics::Gauge& system_allocations;
  // The names llm-d's inference scheduler (gateway-api-inference-extension) reads from vLLM.
  metrics::Gauge& vllm_waiting;
  metrics::Gauge& vllm_running;
  metrics::Gauge& vllm_kv_usage;
  metrics::Gauge& vllm_gpu_cache_usage;

 private:
  metrics::Counter& finished_stop_;
  metrics::Counter& finished_length_;
  metrics::Counter& finished_cancelled_;
  metrics::Counter& finished_error_;
};

}  // namespace bmad::engine
