#include "tests/support/local_greedy.h"

#include <gtest/gtest.h>

#include "worker/tools/local_generate.h"

namespace bmad::testing {

namespace {

std::string Generate(const std::string& model, const std::string& prompt, const proto::SamplingParams& sampling) {
  tools::LocalGenerateOptions o;
  o.model_path = model;
  o.prompt = prompt;
  o.sampling = sampling;
  o.threads = 1;
  std::string text;
  const auto stats = tools::LocalGenerate(o, [&](std::string_view t) { text += t; });
  EXPECT_TRUE(stats.ok()) << stats.status().ToString();
  return text;
}

}  // namespace

std::string LocalGreedyText(const std::string& model, const std::string& prompt,
                            uint32_t max_tokens, bool ignore_eos) {
  proto::SamplingParams sampling;
  sampling.temperature = 0;
  sampling.max_tokens = max_tokens;
  sampling.ignore_eos = ignore_eos;
  return Generate(model, prompt, sampling);
}

std::string LocalGreedyJson(const std::string& model, const std::string& prompt, uint32_t max_tokens,
                            const std::string& schema) {
  proto::SamplingParams sampling;
  sampling.temperature = 0;
  sampling.max_tokens = max_tokens;
  sampling.response_format = schema.empty() ? proto::ResponseFormat::kJsonObject : proto::ResponseFormat::kJsonSchema;
  sampling.json_schema = schema;
  return Generate(model, prompt, sampling);
}

}  // namespace bmad::testing
