// Properties of ParseCompletionRequest over thousands of generated and mutated bodies.
#include "coordinator/http/openai_request.h"

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "coordinator/http/openai_response.h"
#include "tests/coordinator/http/parse_request.h"
#include "worker/sampling/sampling_params_validation.h"

namespace bmad::http {
namespace {

using testing::Completion;
using testing::TestLimits;

// Whatever the parser accepts, the workers' admission check accepts too: the HTTP layer may
// only refuse earlier, never let through what a worker would refuse later.
TEST(ParseCompletionRequest, EverythingAcceptedPassesTheWorkersValidation) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> fields = {
      {"temperature", {"0", "0.7", "2", "2.0000001", "-0", "1e-40", "3", "null"}},
      {"top_p", {"1", "0.5", "1e-45", "1e-50", "0", "1.0000001", "null"}},
      {"top_k", {"-1", "0", "50", "2147483647", "2147483648", "-2"}},
      {"min_p", {"0", "1", "0.5", "1.0000001", "-1e-50"}},
      {"repetition_penalty", {"1", "1e-50", "1e-30", "3.4e38", "3.5e38", "0"}},
      {"presence_penalty", {"-2", "2", "2.0000001", "-1e-50"}},
      {"frequency_penalty", {"-2", "2", "-2.0000001"}},
      {"max_tokens", {"1", "4096", "4097", "0"}},
      {"stop", {"\"a\"", "[\"a\",\"b\"]", "[]", "[\"\"]"}},
      {"stop_token_ids", {"[0]", "[2147483646]", "[2147483647]", "[]"}},
      {"seed", {"0", "-9223372036854775808", "9223372036854775807"}},
  };
  std::mt19937 rng(7);
  int accepted = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string body = R"({"prompt": "x")";
    for (const auto& [name, values] : fields) {
      if (rng() % 2 == 0) continue;
      body += ", \"" + name + "\": " + values[rng() % values.size()];
    }
    body += "}";
    const Result<CompletionRequest> result = Completion(body);
    if (!result.ok()) {
      // Out of range: a max_tokens past the context (OpenAI's context_length_exceeded).
      EXPECT_TRUE(result.status().code() == StatusCode::kInvalidArgument ||
                  result.status().code() == StatusCode::kOutOfRange)
          << body << ": " << result.status().ToString();
      continue;
    }
    ++accepted;
    EXPECT_TRUE(
        sampling::ValidateSamplingParams(result->sampling, std::numeric_limits<int32_t>::max())
            .ok())
        << body;
  }
  EXPECT_GT(accepted, 100);
}

// Hostile bytes never crash the parser (the sanitizer build checks memory and UB on the way).
TEST(ParseCompletionRequest, SurvivesMutatedBodies) {
  const std::vector<std::string> seeds = {
      R"({"model":"m","prompt":[1,2,3],"max_tokens":5,"stop":["a"],"logprobs":2,)"
      R"("stream":true,"stream_options":{"include_usage":true}})",
      R"({"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],)"
      R"("temperature":0.2,"top_logprobs":1,"logprobs":true})",
  };
  const std::string alphabet = "{}[]\",:0123456789.eE-+truefalsnl\\u\x80\xC3\xFF \t";
  std::mt19937 rng(11);
  for (int i = 0; i < 4000; ++i) {
    std::string body = seeds[i % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % body.size();
      switch (rng() % 3) {
        case 0: body[at] = alphabet[rng() % alphabet.size()]; break;
        case 1: body.erase(at, 1 + rng() % 3); break;
        default: body.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
      }
      if (body.empty()) body.push_back('{');
    }
    for (const bool chat : {false, true}) {
      const Result<CompletionRequest> result = ParseCompletionRequest(body, chat, TestLimits());
      if (!result.ok()) {
        EXPECT_NE(result.status().code(), StatusCode::kInternal) << body;
        EXPECT_FALSE(result.status().message().empty());
        EXPECT_FALSE(ErrorJson(result.status()).empty());
      }
    }
  }
}

}  // namespace
}  // namespace bmad::http
