#include "tests/support/local_greedy.h"

#include <gtest/gtest.h>

#include "worker/tools/local_generate.h"

namespace bmad::testing {

std::string LocalGreedyText(const std::string& model, const std::string& prompt,
                            uint32_t max_tokens, bool ignore_eos) {
  tools::LocalGenerateOptions o;
  o.model_path = model;
  o.prompt = prompt;
  o.sampling.temperature = 0;
  o.sampling.max_tokens = max_tokens;
  o.sampling.ignore_eos = ignore_eos;
  o.threads = 1;
  std::string text;
  const auto stats = tools::LocalGenerate(o, [&](std::string_view t) { text += t; });
  EXPECT_TRUE(stats.ok()) << stats.status().ToString();
  return text;
}

}  // namespace bmad::testing
