// The sampling flags of every command that generates text (`bmad generate` in this process and
// through a coordinator): registered once, read back as the protocol's SamplingParams.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/cli/flags.h"
#include "common/proto/messages.h"

namespace bmad::cli {

struct SamplingFlags {
  int64_t max_tokens = 128;
  double temperature = 0.0;  // greedy unless asked otherwise
  int64_t top_k = 0;
  double top_p = 1.0;
  double min_p = 0.0;
  double repetition_penalty = 1.0;
  double presence_penalty = 0.0;
  double frequency_penalty = 0.0;
  int64_t seed = -1;  // negative: none given
  std::vector<std::string> stops;
  bool ignore_eos = false;
  int64_t min_tokens = 0;
  std::vector<std::string> logit_bias;  // "ID=BIAS" each
  bool json = false;                     // response_format json_object
  std::string json_schema_file;          // response_format json_schema: the schema's file
  std::string regex;                     // response_format regex (vLLM's guided_regex)

  // --max-tokens, --temperature, --top-k, --top-p, --min-p, the three penalties, --seed,
  // --stop (repeatable), --ignore-eos, --min-tokens, --logit-bias ID=BIAS (repeatable), --json,
  // --json-schema FILE and --regex PATTERN, writing into this struct (which must outlive Parse).
  void AddTo(Flags& flags);
  // The values as given; range checks (the schema's too) are the caller's (or the sampler's)
  // business. An error for a --logit-bias that is not ID=BIAS, a --json-schema file that cannot
  // be read, and more than one of --json, --json-schema and --regex.
  Result<proto::SamplingParams> Params() const;
};

}  // namespace bmad::cli
