// vLLM's request extensions that change the prompt, the output or the stream's usage:
// truncate_prompt_tokens, stream_options.continuous_usage_stats, allowed_token_ids and
// bad_words, guided_regex and guided_choice.
#include "coordinator/http/openai_request.h"

#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/coordinator/http/parse_request.h"

namespace bmad::http {
namespace {

using ::testing::ElementsAre;
using testing::ExpectRejected;
using testing::Ok;
using testing::TestLimits;

// vLLM's truncate_prompt_tokens: -1 or 1 .. the context length; a token-id prompt longer than
// the context is then accepted (the coordinator cuts it), on both endpoints.
TEST(ParseCompletionRequest, TruncatePromptTokens) {
  RequestLimits small = TestLimits();
  small.max_model_len = 3;
  const CompletionRequest cut = Ok(ParseCompletionRequest(
      R"({"prompt": [1, 2, 3, 4, 5], "max_tokens": 1, "truncate_prompt_tokens": 2})", false, small));
  EXPECT_EQ(cut.truncate_prompt_tokens, 2);
  ASSERT_EQ(cut.prompts.size(), 1u);
  EXPECT_EQ(cut.prompts[0].tokens.size(), 5u);
  auto keep = [&](const std::string& body, bool chat) {
    return Ok(ParseCompletionRequest(body, chat, small)).truncate_prompt_tokens;
  };
  EXPECT_EQ(keep(R"({"prompt": [[1, 2, 3, 4]], "max_tokens": 1, "truncate_prompt_tokens": -1})", false), -1);
  EXPECT_EQ(keep(R"({"messages": [{"role": "user", "content": "x"}], "truncate_prompt_tokens": 3})", true), 3);
  EXPECT_FALSE(keep(R"({"prompt": "x", "truncate_prompt_tokens": null})", false));
  ExpectRejected({{R"({"prompt": "x", "truncate_prompt_tokens": 4})",
                   false,
                   {"'truncate_prompt_tokens' is 4", "context length of 3"},
                   StatusCode::kOutOfRange},
                  {R"({"prompt": "x", "truncate_prompt_tokens": 0})", false, {"'truncate_prompt_tokens'", "got 0"}},
                  {R"({"prompt": "x", "truncate_prompt_tokens": -2})", false, {"'truncate_prompt_tokens' must be -1"}},
                  {R"({"prompt": "x", "truncate_prompt_tokens": "2"})", false, {"'truncate_prompt_tokens' must be"}}},
                 small);
}

// vLLM's continuous_usage_stats takes effect only together with include_usage.
TEST(ParseCompletionRequest, ContinuousUsageNeedsIncludeUsage) {
  for (const auto& [options, want] : std::vector<std::pair<std::string, bool>>{
           {R"({"include_usage": true, "continuous_usage_stats": true})", true},
           {R"({"continuous_usage_stats": true})", false},
           {R"({"include_usage": true, "continuous_usage_stats": false})", false},
           {R"({"include_usage": true})", false}}) {
    const auto r = ParseCompletionRequest(R"({"prompt": "x", "stream": true, "stream_options": )" + options + "}",
                                          false, {});
    ASSERT_TRUE(r.ok()) << options << ": " << r.status().ToString();
    EXPECT_EQ(r->continuous_usage, want) << options;
  }
}

// vLLM's allowed_token_ids go to the sampler as they are; bad_words stay words here (the
// coordinator tokenizes them), within their limits.
TEST(ParseCompletionRequest, AllowedTokenIdsAndBadWords) {
  const CompletionRequest r = Ok(ParseCompletionRequest(
      R"({"messages": [{"role": "user", "content": "x"}], "allowed_token_ids": [5, 3, 5], "bad_words": [" dog", "cat"]})",
      true, TestLimits()));
  EXPECT_THAT(r.sampling.allowed_token_ids, ElementsAre(5u, 3u, 5u));
  EXPECT_THAT(r.bad_words, ElementsAre(" dog", "cat"));
  EXPECT_TRUE(r.sampling.bad_words.empty());
  std::string many = R"({"prompt": "x", "bad_words": [)";
  for (size_t i = 0; i <= kMaxBadWords; ++i) many += std::string(i ? "," : "") + "\"w\"";
  ExpectRejected({{many + "]}", false, {"'bad_words' holds 65 words", "at most 64"}},
                  {R"({"prompt": "x", "bad_words": [")" + std::string(kMaxBadWordBytes + 1, 'a') + "\"]}",
                   false,
                   {"'bad_words[0]' is 129 bytes"}}});
}

// vLLM's guided_regex goes to the replicas as it is; guided_choice as the alternation of its
// choices, escaped to stand for themselves.
TEST(ParseCompletionRequest, GuidedRegexAndChoiceBecomeARegex) {
  const CompletionRequest regex = Ok(ParseCompletionRequest(R"({"prompt": "x", "guided_regex": "\\d+"})", false, TestLimits()));
  EXPECT_EQ(regex.sampling.response_format, proto::ResponseFormat::kRegex);
  EXPECT_EQ(regex.sampling.regex, "\\d+");
  const CompletionRequest choice = Ok(ParseCompletionRequest(
      R"js({"messages": [{"role": "user", "content": "x"}], "guided_choice": ["yes", "no (1.5)", "caf\u00e9"]})js", true,
      TestLimits()));
  EXPECT_EQ(choice.sampling.response_format, proto::ResponseFormat::kRegex);
  EXPECT_EQ(choice.sampling.regex, "yes|no\\ \\(1\\.5\\)|caf\xC3\xA9");
  // Empty values ask for nothing.
  const CompletionRequest neutral =
      Ok(ParseCompletionRequest(R"({"prompt": "x", "guided_regex": "", "guided_choice": []})", false, TestLimits()));
  EXPECT_EQ(neutral.sampling.response_format, proto::ResponseFormat::kText);
}

}  // namespace
}  // namespace bmad::http
