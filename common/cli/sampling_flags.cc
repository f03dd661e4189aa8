#include "common/cli/sampling_flags.h"

#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>

#include "common/bounded_file.h"

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
  flags.AddBool("json", &json, "The output is one JSON object (OpenAI's response_format json_object).");
  flags.AddString("json-schema", &json_schema_file,
                  "FILE: the output is one JSON value the JSON Schema in FILE allows (OpenAI's "
                  "response_format json_schema).");
  flags.AddString("regex", &regex,
                  "PATTERN: the whole output matches this regular expression (vLLM's guided_regex).");
}

namespace {

// The flag's value as the protocol's float. A finite value the float cannot hold is refused as
// typed: 1e-50 would become 0 and be reported as "got 0", 1e50 would not convert at all.
Result<float> AsFloat(const char* flag, double value) {
  if (std::isfinite(value) && value != 0.0 &&
      (std::fabs(value) > FLT_MAX || static_cast<float>(value) == 0.0f)) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "--%s %g is beyond what a 32-bit float holds", flag, value);
    return InvalidArgument(buf);
  }
  return static_cast<float>(value);
}

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
  BMAD_ASSIGN_OR_RETURN(const float as_float, AsFloat("logit-bias", bias));
  return proto::LogitBias{static_cast<uint32_t>(id), as_float};
}

}  // namespace

Result<proto::SamplingParams> SamplingFlags::Params() const {
  proto::SamplingParams p;
  p.max_tokens = static_cast<uint32_t>(max_tokens);
  BMAD_ASSIGN_OR_RETURN(p.temperature, AsFloat("temperature", temperature));
  p.top_k = static_cast<int32_t>(top_k);
  BMAD_ASSIGN_OR_RETURN(p.top_p, AsFloat("top-p", top_p));
  BMAD_ASSIGN_OR_RETURN(p.min_p, AsFloat("min-p", min_p));
  BMAD_ASSIGN_OR_RETURN(p.repetition_penalty, AsFloat("repetition-penalty", repetition_penalty));
  BMAD_ASSIGN_OR_RETURN(p.presence_penalty, AsFloat("presence-penalty", presence_penalty));
  BMAD_ASSIGN_OR_RETURN(p.frequency_penalty, AsFloat("frequency-penalty", frequency_penalty));
  p.stop_strings = stops;
  p.ignore_eos = ignore_eos;
  p.min_tokens = static_cast<uint32_t>(min_tokens);
  if (json) p.response_format = proto::ResponseFormat::kJsonObject;
  if (!json_schema_file.empty()) {
    if (json) return InvalidArgument("--json and --json-schema cannot be used together");
    // Far above what a schema may be (the compiler then says so); a bound on what is read.
    constexpr size_t kMaxSchemaFileBytes = 1 << 20;
    Result<std::string> text = ReadFileUpTo(json_schema_file, kMaxSchemaFileBytes);
    if (!text.ok()) {
      return Status(text.status().code(), "--json-schema: " + json_schema_file + ": " + text.status().message());
    }
    p.response_format = proto::ResponseFormat::kJsonSchema;
    p.json_schema = std::move(*text);
  }
  if (!regex.empty()) {
    if (p.response_format != proto::ResponseFormat::kText) {
      return InvalidArgument("--regex cannot be used with --json or --json-schema");
    }
    p.response_format = proto::ResponseFormat::kRegex;
    p.regex = regex;
  }
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
