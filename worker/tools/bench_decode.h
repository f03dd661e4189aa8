// `bmad bench decode`: prefill and decode throughput of the engine in this process, batch by
// batch, measured the way llama.cpp's llama-batched-bench measures it (B distinct prompts of
// `prompt_len` tokens prefilled together, then `gen_len` decode steps of B sequences), so the
// two can be compared on the same GGUF file.
#pragma once

#include <string>
#include <vector>

#include "common/cli/command.h"
#include "common/config/config.h"
#include "common/status.h"

namespace bmad::tools {

struct BenchDecodeOptions {
  std::string model_path;
  std::vector<int64_t> batches = {1, 8, 32};
  int64_t prompt_len = 128;
  int64_t gen_len = 128;
  int64_t threads = 0;          // 0: every core
  int64_t prefill_chunk = 2048; // tokens per prefill step
  int64_t block_size = CacheConfig{}.block_size;
};

struct BenchDecodeResult {
  int64_t batch = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  double prefill_tokens_per_second = 0;
  double decode_tokens_per_second = 0;
};

// The checks that need no model: lengths and the prefill chunk in [1, 2^24], block size in
// [1, 1024], batch sizes in [1, 4096]. kInvalidArgument naming the flag.
Status ValidateBenchDecodeOptions(const BenchDecodeOptions& options);

// Runs every batch size, printing one line per result to stderr as it goes. Refuses, before
// allocating it, a batch whose KV cache would not fit in this machine's memory.
Result<std::vector<BenchDecodeResult>> RunBenchDecode(const BenchDecodeOptions& options,
                                                      std::string* model_summary);

std::vector<cli::Command> BenchDecodeCommands();

}  // namespace bmad::tools
