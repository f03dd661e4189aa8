#include "worker/engine/engine_metrics.h"

namespace bmad::engine {
namespace {

metrics::Labels L(const std::string& replica) { return {{"replica", replica}}; }
metrics::Labels L(const std::string& replica, const char* reason) {
  return {{"replica", replica}, {"reason", reason}};
}

}  // namespace

EngineMetrics::EngineMetrics(metrics::Registry& r, const std::string& id, int64_t block_size,
                             int64_t num_blocks)
    : requests_running(r.GetGauge("bmad_worker_requests_running", "Requests being computed.", L(id))),
      requests_waiting(r.GetGauge("bmad_worker_requests_waiting", "Requests queued on the replica.", L(id))),
      preemptions(r.GetCounter("bmad_worker_preemptions_total",
                               "Sequences preempted for lack of KV blocks (recomputed later).", L(id))),
      shared_prefix_waits(r.GetCounter("bmad_worker_shared_prefix_waits_total",
                                       "Admissions put off a step to reuse prompt blocks another "
                                       "running request was computing.",
                                       L(id))),
      prompt_tokens(r.GetCounter("bmad_worker_prompt_tokens_total", "Prompt tokens of admitted requests.", L(id))),
      generation_tokens(r.GetCounter("bmad_worker_generation_tokens_total", "Tokens generated.", L(id))),
      prefix_query_tokens(r.GetCounter("bmad_worker_prefix_cache_queries_total",
                                       "Prompt tokens looked up in the prefix cache.", L(id))),
      prefix_hit_tokens(r.GetCounter("bmad_worker_prefix_cache_hits_total",
                                     "Prompt tokens whose KV was reused from the prefix cache.", L(id))),
      kv_evictions(r.GetCounter("bmad_worker_kv_evictions_total",
                                "Cached KV blocks evicted to make room.", L(id))),
      batch_sequences(r.GetHistogram("bmad_worker_batch_size_sequences", "Sequences per engine step.",
                                     metrics::TokenCountBuckets(), L(id))),
      step_tokens(r.GetHistogram("bmad_worker_step_tokens", "Tokens computed per engine step.",
                                 metrics::TokenCountBuckets(), L(id))),
      step_seconds(r.GetHistogram("bmad_worker_step_seconds", "Duration of one engine step.",
                                  metrics::StepSecondsBuckets(), L(id))),
      time_to_first_token(r.GetHistogram("bmad_worker_time_to_first_token_seconds",
                                         "From arrival on the replica to the first token.",
                                         metrics::LatencySecondsBuckets(), L(id))),
      inter_token_latency(r.GetHistogram("bmad_worker_inter_token_latency_seconds",
                                         "Between consecutive tokens of a request.",
                                         metrics::StepSecondsBuckets(), L(id))),
      e2e_latency(r.GetHistogram("bmad_worker_e2e_request_latency_seconds",
                                 "From arrival on the replica to the last token.",
                                 metrics::LatencySecondsBuckets(), L(id))),
      queue_wait(r.GetHistogram("bmad_worker_queue_wait_seconds",
                                "From arrival to the first admission into a batch.",
                                metrics::LatencySecondsBuckets(), L(id))),
      prompt_tokens_per_request(r.GetHistogram("bmad_worker_request_prompt_tokens",
                                               "Prompt length of finished requests.",
                                               metrics::TokenCountBuckets(), L(id))),
      generation_tokens_per_request(r.GetHistogram("bmad_worker_request_generation_tokens",
                                                   "Generated length of finished requests.",
                                                   metrics::TokenCountBuckets(), L(id))),
      kv_usage(r.GetGauge("bmad_worker_kv_usage_ratio", "KV blocks in use, 0..1.", L(id))),
      kv_free_blocks(r.GetGauge("bmad_worker_kv_free_blocks", "KV blocks that can be allocated now.", L(id))),
      kv_waste(r.GetGauge("bmad_worker_kv_waste_ratio",
                          "Allocated KV slots not holding a token, as a share of allocated slots.", L(id))),
      system_allocations(r.GetGauge("bmad_worker_system_allocations",
                                    "Allocations from the OS/malloc by the engine's memory "
                                    "(arena, kernel scratch, workspace) since start; flat after warm-up.",
                                    L(id))),
      vllm_waiting(r.GetCompatibilityGauge("vllm:num_requests_waiting",
                                           "Requests waiting (vLLM name, for llm-d).", L(id))),
      vllm_running(r.GetCompatibilityGauge("vllm:num_requests_running",
                                           "Requests running (vLLM name, for llm-d).", L(id))),
      vllm_kv_usage(r.GetCompatibilityGauge("vllm:kv_cache_usage_perc",
                                            "KV-cache usage 0..1 (vLLM name, for llm-d).", L(id))),
      vllm_gpu_cache_usage(r.GetCompatibilityGauge("vllm:gpu_cache_usage_perc",
                                                   "KV-cache usage 0..1 (older vLLM name).", L(id))),
      finished_stop_(r.GetCounter("bmad_worker_requests_finished_total", "Requests finished, by reason.", L(id, "stop"))),
      finished_length_(r.GetCounter("bmad_worker_requests_finished_total", "Requests finished, by reason.", L(id, "length"))),
      finished_cancelled_(r.GetCounter("bmad_worker_requests_finished_total", "Requests finished, by reason.", L(id, "cancelled"))),
      finished_error_(r.GetCounter("bmad_worker_requests_finished_total", "Requests finished, by reason.", L(id, "error"))) {
  r.GetCompatibilityGauge("vllm:cache_config_info", "KV cache configuration (vLLM name, for llm-d).",
                          {{"replica", id},
                           {"block_size", std::to_string(block_size)},
                           {"num_gpu_blocks", std::to_string(num_blocks)}})
      .Set(1);
}

metrics::Counter& EngineMetrics::Finished(proto::FinishReason reason) {
  switch (reason) {
    case proto::FinishReason::kStop: return finished_stop_;
    case proto::FinishReason::kLength: return finished_length_;
    case proto::FinishReason::kCancelled: return finished_cancelled_;
    default: return finished_error_;
  }
}

}  // namespace bmad::engine
