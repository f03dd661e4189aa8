#include "common/cli/sampling_flags.h"

#include <cerrno>
#include <cstdint>
#include <cstdlib>

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
  flags.AddInt("min-tokens", &min_tokens,
               "Generate at least this many tokens before any end or stop (default 0).", 0, UINT32_MAX);
  flags.AddList("logit-bias", &logit_bias,
                "ID=BIAS: add BIAS (-100 to 100) to token ID's logit (repeatable).");
}

namespace {

// "ID=BIAS", both whole: a decimal token id and a number.
Result<proto::LogitBias> ParseLogitBias(const std::string& entry) {
  const auto bad = [&] {
    return InvalidArgument("--logit-bias wants ID=BIAS (a token id and a number), got '" + entry + "'");
  };
  const size_t eq = entry.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == entry.size()) return bad();
  const std::string id_text = entry.substr(0, eq), bias_text = entry.substr(eq + 1);
  if (id_text.find_first_not_of("0123456789") != std::string::npos || id_text.size() > 10) return bad();
  const unsigned long long id = std::strtoull(id_text.c_str(), nullptr, 10);
  if (id > UINT32_MAX) return bad();
  char* end = nullptr;
  errno = 0;
  const double bias = std::strtod(bias_text.c_str(), &end);
  if (errno != 0 || end != bias_text.c_str() + bias_text.size()) return bad();
  return proto::LogitBias{static_cast<uint32_t>(id), static_cast<float>(bias)};
}

}  // namespace


Result<proto::SamplingParams> SamplingFlags::Params() const {
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
  p.min_tokens = static_cast<uint32_t>(min_tokens);
  for (const std::string& entry : logit_bias) {
    BMAD_ASSIGN_OR_RETURN(proto::LogitBias parsed, ParseLogitBias(entry));
    p.logit_bias.push_back(parsed);
  }
  if (seed >= 0) {
    p.seed = static_cast<uint64_t>(seed);
    p.has_seed = true;
  }
  return p;
}

}  // namespace bmad::cli
