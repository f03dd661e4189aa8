// `bmad bench http`: a load generator for any OpenAI-compatible server (bmad's HTTP front door,
// llama.cpp's llama-server, vLLM) using streaming requests, so that the numbers of different
// servers can be compared under the same workload.
//
// The workload is fixed by the seed: each request gets a prompt length and an output length from
// their distributions and, for the completions API, a prompt of random token ids (so every
// server sees the same number of prompt tokens whatever its tokenizer); the chat API gets a text
// of about that many words. Every request asks for exactly its output length (ignore_eos,
// greedy). Open loop: requests start at Poisson arrival times whatever the server is doing
// (the first at once, as vLLM's benchmark_serving sends it).
// Closed loop: `concurrency` requests are always in flight. Latencies count from the moment a
// request is sent (in the open loop that is its arrival time unless more than 4096 requests are
// already in flight). Every request has a timeout, so the run ends when every request has ended
// one way or the other.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "coordinator/client/openai_wire.h"
#include "worker/tools/latency_summary.h"

namespace bmad::client {

inline constexpr int64_t kMaxBenchHttpConcurrency = 4096;  // one thread per request in flight

struct BenchHttpOptions {
  std::string url;                          // "http://host:port" (a trailing /v1 is fine)
  std::string model;                        // empty: the first id from GET /v1/models
  OpenAiApi api = OpenAiApi::kCompletions;
  int64_t requests = 100;
  double rate = 0;                          // > 0: open loop, Poisson arrivals per second
  int64_t concurrency = 0;                  // > 0: closed loop, requests in flight
  std::string prompt_len = "128";           // tools::LengthDistribution syntax
  std::string output_len = "128";
  double timeout_s = 300;                   // per request, connect to last byte
  int64_t vocab_size = 0;                   // 0: prompt ids in 100..19999; else in
                                            // min(100, vocab/4)..vocab-1
  std::string api_key;                      // bearer token, when the server wants one
  uint64_t seed = 1;
  int64_t report_split_at = 0;              // > 0: also report latencies separately for
                                            // prompts shorter than this many tokens and for
                                            // the rest (as planned: the tokens sent)
  // > 0: this share of the requests (drawn apart from the workload, which stays the same) carry
  // `slo_ms: urgent_slo_ms` (bmad's deadline; other servers ignore it), and their latencies and
  // how many ended within it are reported apart from the others'.
  double urgent_share = 0;
  int64_t urgent_slo_ms = 0;
  // Open loop: requests in flight at most (a thread each); an arrival beyond it waits for one to
  // end, and is reported as held back (its latencies count from when it was sent).
  int64_t open_loop_max_in_flight = 4096;
};

// kInvalidArgument naming the flag for options that cannot run (exactly one of rate and
// concurrency, counts in range, distributions that parse, a URL that parses).
Status ValidateBenchHttpOptions(const BenchHttpOptions& options);

struct BenchProgress {
  int64_t finished = 0;  // ended, successfully or not
  int64_t failed = 0;
  int64_t total = 0;
  double elapsed_s = 0;
  bool last = false;     // the final call, after every request ended
};
using ProgressCallback = std::function<void(const BenchProgress& progress)>;

struct BenchHttpReport {
  std::string model;
  int64_t requests = 0;
  int64_t succeeded = 0;
  int64_t failed = 0;
  double duration_s = 0;             // first start to last end
  double requests_per_s = 0;         // successful requests
  double output_tokens_per_s = 0;    // tokens of successful requests
  int64_t output_tokens = 0;
  int64_t prompt_tokens = 0;         // as reported by the server's usage (0 when it reports none)
  int64_t usage_reports = 0;         // successful requests whose stream carried usage
  // Successful requests whose usage says fewer output tokens than asked for (a server that does
  // not honour ignore_eos stops at the end token): the token rates then compare unequal work.
  // Not counted without usage (events are no token count).
  int64_t short_outputs = 0;
  // Open loop: requests sent later than planned because open_loop_max_in_flight requests were
  // in flight (the client, not the server, was then the bottleneck: their latencies understate
  // what a request arriving then would have seen).
  int64_t held_back = 0;
  tools::LatencySummary ttft_s;      // start → first content-bearing event
  tools::LatencySummary itl_s;       // gaps between content-bearing events
  tools::LatencySummary tpot_s;      // per request: (e2e − ttft) / (tokens − 1)
  tools::LatencySummary e2e_s;
  std::vector<std::pair<std::string, int64_t>> errors;  // message → count, most frequent first

  // With options.report_split_at > 0: successful requests whose prompt was shorter than it
  // ("short") and the others ("long"), each with its own latencies.
  struct PromptClass {
    int64_t succeeded = 0;
    tools::LatencySummary ttft_s;
    tools::LatencySummary e2e_s;
  };
  PromptClass short_prompts;
  PromptClass long_prompts;
  // With options.urgent_share > 0: the requests that carried urgent_slo_ms and the others (all
  // sent, failed ones too), and how many urgent ones succeeded within it, end to end.
  PromptClass urgent;
  PromptClass relaxed;
  int64_t urgent_sent = 0;
  int64_t relaxed_sent = 0;
  int64_t urgent_within_slo = 0;

  // Human-readable lines (ends with a newline).
  std::string Text(const BenchHttpOptions& options) const;
  // One JSON object on one line (no newline).
  std::string Json(const BenchHttpOptions& options) const;
};

// Runs the benchmark. Errors: kInvalidArgument for bad options; the model lookup's Status when
// no --model is given and GET /v1/models fails. Failed requests are not errors of the run: they
// are counted in the report. `on_progress` (may be empty) is called from the calling thread
// about every `progress_interval_s` and once at the end.
Result<BenchHttpReport> RunBenchHttp(const BenchHttpOptions& options,
                                     const ProgressCallback& on_progress,
                                     double progress_interval_s = 1.0);

}  // namespace bmad::client
