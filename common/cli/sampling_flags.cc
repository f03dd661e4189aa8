#include "common/cli/sampling_flags.h"

#include <cstdint>

namespace bmad::cli {

void SamplingFlags::AddTo(Flags& flags) {
  flags.AddInt("max-tokens", &max_tokens, "Most tokens to generate (default 128).");
  flags.AddDouble("temperature", &temperature, "0 (the default) is greedy.");
  flags.AddInt("top-k", &top_k, "Keep the k most likely tokens (0: off).", 0, INT32_MAX);
  flags.AddDouble("top-p", &top_p, "Nucleus sampling mass (1: off).");
  flags.AddDouble("min-p", &min_p, "Drop tokens below min-p times the top probability.");
  flags.AddDouble("repetition-penalty", &repetition_penalty, "Penalty for repeated tokens (1: off).");
  flags.AddDouble("presence-penalty", &presence_penalty, "OpenAI presence penalty (0: off).");
  flags.AddDouble("frequency-penalty", &frequency_penalty, "OpenAI frequency penalty (0: off).");
  flags.AddInt("seed", &seed, "Seed for sampling (same seed, same output; default or -1: random).", -1,
               INT64_MAX);
  flags.AddList("stop", &stops, "Stop when this text is generated (repeatable).");
  flags.AddBool("ignore-eos", &ignore_eos, "Keep generating past the end-of-text token.");
}

proto::SamplingParams SamplingFlags::Params() const {
  proto::SamplingParams p;
  p.max_tokens = static_cast<uint32_t>(max_tokens);
  p.temperature = static_cast<float>(temperature);
  p.top_k = static_cast<int32_t>(top_k);
  p.top_p = static_cast<float>(top_p);
  p.min_p = static_cast<float>(min_p);
  p.repetition_penalty = static_cast<float>(repetition_penalty);
  p.presence_penalty = static_cast<float>(presence_penalty);
  p.frequency_penalty = static_cast<float>(frequency_penalty);
  p.stop_strings = stops;
  p.ignore_eos = ignore_eos;
  if (seed >= 0) {
    p.seed = static_cast<uint64_t>(seed);
    p.has_seed = true;
  }
  return p;
}

}  // namespace bmad::cli
