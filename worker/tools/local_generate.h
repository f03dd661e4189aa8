// `bmad generate --model FILE.gguf`: runs a model in this process and streams the continuation
// of a prompt as it is made.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "common/cli/command.h"
#include "common/config/config.h"
#include "common/proto/messages.h"
#include "common/status.h"

namespace bmad::tools {

struct LocalGenerateOptions {
  std::string model_path;
  std::string prompt;
  proto::SamplingParams sampling;  // validated against the model's vocabulary
  Backend backend = Backend::kCpu;
  int64_t threads = 0;             // 0: every core (cpu)
  int64_t prefill_chunk = 512;     // prompt tokens per step
};

struct LocalGenerateStats {
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  proto::FinishReason finish_reason = proto::FinishReason::kNone;
  std::vector<int32_t> generated_ids;
  std::vector<float> logprobs;  // when sampling.logprobs
  // The most tokens the context left room for, when that was fewer than max_tokens (else 0).
  int64_t context_limited_to = 0;
};

// Generates, calling `on_text` with each piece of text as soon as it is final.
Result<LocalGenerateStats> LocalGenerate(const LocalGenerateOptions& options,
                                         const std::function<void(std::string_view)>& on_text);


std::vector<cli::Command> LocalGenerateCommands();

}  // namespace bmad::tools
