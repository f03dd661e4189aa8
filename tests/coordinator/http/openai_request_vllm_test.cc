// vLLM's request extensions that change the prompt, the output or the stream's usage:
// truncate_prompt_tokens, stream_options.continuous_usage_stats, allowed_token_ids and
// bad_words, guided_regex and guided_choice, structured_outputs, echo, continue_final_message
// and chat_template_kwargs.
#include "coordinator/http/openai_request.h"

#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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

// vLLM's structured_outputs (the guided_* fields' replacement since its v0.12): each constraint
// becomes what its older name or response_format gives, and the schema's or pattern's errors
// name the field it came in.
TEST(ParseCompletionRequest, StructuredOutputsNameTheSameConstraints) {
  const CompletionRequest json = Ok(ParseCompletionRequest(
      R"({"prompt": "x", "structured_outputs": {"json": {"type": "integer"}, "disable_fallback": true}})", false,
      TestLimits()));
  EXPECT_EQ(json.sampling.response_format, proto::ResponseFormat::kJsonSchema);
  EXPECT_EQ(json.sampling.json_schema, R"({"type":"integer"})");
  const CompletionRequest text_schema = Ok(ParseCompletionRequest(
      R"({"prompt": "x", "structured_outputs": {"json": "{\"type\": \"boolean\"}"}})", false, TestLimits()));
  EXPECT_EQ(text_schema.sampling.json_schema, R"({"type": "boolean"})");
  const CompletionRequest regex = Ok(ParseCompletionRequest(
      R"({"messages": [{"role": "user", "content": "x"}], "structured_outputs": {"regex": "[0-9]{3}", "disable_any_whitespace": false}})",
      true, TestLimits()));
  EXPECT_EQ(regex.sampling.response_format, proto::ResponseFormat::kRegex);
  EXPECT_EQ(regex.sampling.regex, "[0-9]{3}");
  const CompletionRequest choice = Ok(ParseCompletionRequest(
      R"({"prompt": "x", "structured_outputs": {"choice": ["a.b", "c"], "whitespace_pattern": null}})", false,
      TestLimits()));
  EXPECT_EQ(choice.sampling.regex, "a\\.b|c");
  const CompletionRequest object = Ok(ParseCompletionRequest(
      R"({"prompt": "x", "structured_outputs": {"json_object": true}, "response_format": {"type": "text"}})", false,
      TestLimits()));
  EXPECT_EQ(object.sampling.response_format, proto::ResponseFormat::kJsonObject);
  // Empty values, and json_object false, ask for nothing.
  for (const std::string empty : {R"({})", R"({"regex": "", "choice": [], "json_object": false})", "null"}) {
    const CompletionRequest none =
        Ok(ParseCompletionRequest(R"({"prompt": "x", "structured_outputs": )" + empty + "}", false, TestLimits()));
    EXPECT_EQ(none.sampling.response_format, proto::ResponseFormat::kText) << empty;
  }
  // disable_any_whitespace: JSON without whitespace outside its strings, for a JSON constraint
  // from any field (a regex or a choice is its own text).
  const auto compact = [](const std::string& body) {
    return Ok(ParseCompletionRequest(body, false, TestLimits())).sampling.disable_any_whitespace;
  };
  EXPECT_TRUE(compact(R"({"prompt": "x", "structured_outputs": {"json": {}, "disable_any_whitespace": true}})"));
  EXPECT_TRUE(compact(R"({"prompt": "x", "structured_outputs": {"disable_any_whitespace": true},
                         "response_format": {"type": "json_object"}})"));
  EXPECT_FALSE(compact(R"({"prompt": "x", "structured_outputs": {"json": {}, "disable_any_whitespace": false}})"));
  EXPECT_FALSE(compact(R"({"prompt": "x", "structured_outputs": {"regex": "a b", "disable_any_whitespace": true}})"));
  EXPECT_FALSE(compact(R"({"prompt": "x", "response_format": {"type": "json_object"}})"));
  // disable_additional_properties: an object that declares properties never gets another key,
  // so the schema passes to the worker as sent, with the flag or without it.
  for (const char* flag : {"true", "false"}) {
    const std::string schema = R"({"type": "object", "properties": {"a": {"type": "integer"}}})";
    const CompletionRequest strict = Ok(ParseCompletionRequest(
        R"({"prompt": "x", "structured_outputs": {"json": )" + schema + R"(, "disable_additional_properties": )" +
            flag + "}}",
        false, TestLimits()));
    EXPECT_EQ(strict.sampling.response_format, proto::ResponseFormat::kJsonSchema) << flag;
    EXPECT_EQ(nlohmann::json::parse(strict.sampling.json_schema), nlohmann::json::parse(schema)) << flag;
  }
  ExpectRejected({
      {R"({"prompt": "x", "structured_outputs": {"regex": "a", "choice": ["a"]}})", false,
       {"'structured_outputs.choice' cannot be used with 'structured_outputs.regex': give one constraint"}},
      {R"({"prompt": "x", "guided_json": {}, "structured_outputs": {"json": {}}})", false,
       {"'structured_outputs.json' cannot be used with 'guided_json'"}},
      {R"({"prompt": "x", "structured_outputs": {"json_object": true}, "response_format": {"type": "json_object"}})",
       false, {"'structured_outputs.json_object' cannot be used with a 'response_format' other than \"text\""}},
      {R"({"prompt": "x", "structured_outputs": {"regex": "a**"}})", false,
       {"'structured_outputs.regex': the pattern repeats a repeat"}},
      {R"({"prompt": "x", "structured_outputs": {"json": {"type": "integer", "multipleOf": 3}}})", false,
       {"'structured_outputs.json'", "multipleOf"}},
      {R"({"prompt": "x", "structured_outputs": {"json": 5}})", false,
       {"'structured_outputs.json' must be a JSON Schema (an object, or its JSON text), got 5"}},
      {R"({"prompt": "x", "structured_outputs": {"choice": ["a", 1]}})", false,
       {"'structured_outputs.choice[1]' must be a string, got 1"}},
      {R"({"prompt": "x", "structured_outputs": {"regex": 7}})", false, {"'structured_outputs.regex' must be a string"}},
      {R"({"prompt": "x", "structured_outputs": {"json_object": "yes"}})", false,
       {"'structured_outputs.json_object' must be a boolean"}},
      {R"({"prompt": "x", "structured_outputs": "json"})", false, {"'structured_outputs' must be an object"}},
      {R"({"prompt": "x", "structured_outputs": {"grammar": "root ::= \"a\""}})", false,
       {"'structured_outputs.grammar' is not supported"}},
      {R"({"prompt": "x", "structured_outputs": {"structural_tag": "{}"}})", false,
       {"'structured_outputs.structural_tag' is not supported"}},
      {R"({"prompt": "x", "structured_outputs": {"json": {}, "whitespace_pattern": " ?"}})", false,
       {"'structured_outputs.whitespace_pattern' is not supported"}},
      {R"({"prompt": "x", "structured_outputs": {"json": {}, "disable_any_whitespace": 1}})", false,
       {"'structured_outputs.disable_any_whitespace' must be a boolean"}},
      {R"({"prompt": "x", "structured_outputs": {"json": {}, "disable_additional_properties": "yes"}})", false,
       {"'structured_outputs.disable_additional_properties' must be a boolean"}},
      {R"({"prompt": "x", "structured_outputs": {"json": {}, "disable_fallback": 1}})", false,
       {"'structured_outputs.disable_fallback' must be a boolean"}},
      {R"({"prompt": "x", "structured_outputs": {"regexp": "a"}})", false,
       {"'structured_outputs.regexp' is not a structured_outputs field"}},
      {R"({"prompt": "x", "structured_outputs": {"regex": "a"}, "min_tokens": 2})", false,
       {"'min_tokens' cannot be used with response_format \"regex\""}},
  });
}

// echo: completions' without logprobs (their prompt part is not computed); chat's always.
// continue_final_message: add_generation_prompt then defaults to false. chat_template_kwargs:
// enable_thinking only.
TEST(ParseCompletionRequest, EchoContinueFinalMessageAndChatTemplateKwargs) {
  const RequestLimits limits = TestLimits();
  auto completion = [&](const std::string& body) { return Ok(ParseCompletionRequest(body, false, limits)); };
  auto chat = [&](const std::string& body) { return Ok(ParseCompletionRequest(body, true, limits)); };
  EXPECT_TRUE(completion(R"({"prompt": "x", "echo": true})").echo);
  EXPECT_FALSE(completion(R"({"prompt": "x", "echo": null, "logprobs": 2})").echo);
  EXPECT_TRUE(chat(R"({"messages": [{"role": "user", "content": "x"}], "echo": true, "logprobs": true})").echo);

  const std::string answer = R"("messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}])";
  const CompletionRequest plain = chat("{" + answer + "}");
  EXPECT_TRUE(plain.add_generation_prompt);
  EXPECT_FALSE(plain.continue_final_message);
  EXPECT_FALSE(plain.enable_thinking.has_value());
  const CompletionRequest continuing = chat("{" + answer + R"(, "continue_final_message": true})");
  EXPECT_TRUE(continuing.continue_final_message);
  EXPECT_FALSE(continuing.add_generation_prompt);
  EXPECT_FALSE(chat("{" + answer + R"(, "continue_final_message": true, "add_generation_prompt": false})")
                   .add_generation_prompt);
  EXPECT_TRUE(chat("{" + answer + R"(, "continue_final_message": false, "add_generation_prompt": true})")
                  .add_generation_prompt);

  EXPECT_EQ(chat("{" + answer + R"(, "chat_template_kwargs": {"enable_thinking": false}})").enable_thinking, false);
  EXPECT_EQ(chat("{" + answer + R"(, "chat_template_kwargs": {"enable_thinking": true}})").enable_thinking, true);
  EXPECT_FALSE(chat("{" + answer + R"(, "chat_template_kwargs": {"enable_thinking": null}})").enable_thinking);
  EXPECT_FALSE(chat("{" + answer + R"(, "chat_template_kwargs": {}})").enable_thinking);

  // include_reasoning (vLLM's): true unless false.
  EXPECT_TRUE(plain.include_reasoning);
  EXPECT_FALSE(chat("{" + answer + R"(, "include_reasoning": false})").include_reasoning);
  EXPECT_TRUE(chat("{" + answer + R"(, "include_reasoning": null})").include_reasoning);
  const Result<CompletionRequest> bad =
      ParseCompletionRequest("{" + answer + R"(, "include_reasoning": "no"})", true, limits);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'include_reasoning' must be a boolean"), std::string::npos)
      << bad.status().message();
}

// The prompt's own log-probabilities: vLLM's prompt_logprobs, completions' echo with logprobs
// (and max_tokens 0 with echo, the prompt alone); the replicas are asked for the most
// alternatives either wants.
TEST(ParseCompletionRequest, PromptLogprobsAndEchoWithLogprobs) {
  const RequestLimits limits = TestLimits();
  auto completion = [&](const std::string& body) { return Ok(ParseCompletionRequest(body, false, limits)); };
  const CompletionRequest plain = completion(R"({"prompt": "x", "logprobs": 2})");
  EXPECT_EQ(plain.sampling.prompt_logprobs, -1);
  EXPECT_FALSE(plain.echo_logprobs);
  const CompletionRequest echoed = completion(R"({"prompt": "x", "echo": true, "logprobs": 2})");
  EXPECT_TRUE(echoed.echo_logprobs);
  EXPECT_EQ(echoed.sampling.prompt_logprobs, 2);
  EXPECT_EQ(echoed.vllm_prompt_logprobs, -1);
  const CompletionRequest both = completion(R"({"prompt": "x", "echo": true, "logprobs": 1, "prompt_logprobs": 3})");
  EXPECT_EQ(both.sampling.prompt_logprobs, 3);
  EXPECT_EQ(both.vllm_prompt_logprobs, 3);
  const CompletionRequest vllm = completion(R"({"prompt": "x", "prompt_logprobs": 0})");
  EXPECT_EQ(vllm.sampling.prompt_logprobs, 0);
  EXPECT_EQ(vllm.vllm_prompt_logprobs, 0);
  EXPECT_EQ(Ok(ParseCompletionRequest(R"({"messages": [{"role": "user", "content": "x"}], "prompt_logprobs": 1})",
                                      true, limits))
                .sampling.prompt_logprobs,
            1);
  // max_tokens 0 with echo: one token generated, left out of the response.
  const CompletionRequest only = completion(R"({"prompt": "x", "echo": true, "max_tokens": 0, "logprobs": 1})");
  EXPECT_TRUE(only.echo_only);
  EXPECT_EQ(only.sampling.max_tokens, 1u);
  EXPECT_FALSE(completion(R"({"prompt": "x", "echo": true})").echo_only);
}

// cache_salt: a non-empty string (as vLLM), at most 1024 bytes, on both endpoints; null is none.
TEST(ParseCompletionRequest, CacheSaltIsANonEmptyString) {
  const RequestLimits limits = TestLimits();
  EXPECT_EQ(Ok(ParseCompletionRequest(R"({"prompt": "x", "cache_salt": "tenant-a"})", false, limits)).sampling.cache_salt,
            "tenant-a");
  EXPECT_EQ(Ok(ParseCompletionRequest(R"({"messages": [{"role": "user", "content": "x"}], "cache_salt": "t"})", true,
                                      limits))
                .sampling.cache_salt,
            "t");
  EXPECT_EQ(Ok(ParseCompletionRequest(R"({"prompt": "x", "cache_salt": null})", false, limits)).sampling.cache_salt, "");
  EXPECT_EQ(Ok(ParseCompletionRequest(R"({"prompt": "x"})", false, limits)).sampling.cache_salt, "");
  ExpectRejected({
      {R"({"prompt": "x", "cache_salt": ""})", false, {"'cache_salt' must be a non-empty string when given"}},
      {R"({"prompt": "x", "cache_salt": 7})", false, {"'cache_salt' must be a string"}},
      {R"({"prompt": "x", "cache_salt": ")" + std::string(1025, 's') + R"("})", false,
       {"'cache_salt' holds 1025 bytes; at most 1024 are allowed"}},
  });
}

// return_token_ids: a boolean on both endpoints.
TEST(ParseCompletionRequest, ReturnTokenIdsIsABoolean) {
  const RequestLimits limits = TestLimits();
  EXPECT_TRUE(Ok(ParseCompletionRequest(R"({"prompt": "x", "return_token_ids": true})", false, limits)).return_token_ids);
  EXPECT_TRUE(Ok(ParseCompletionRequest(R"({"messages": [{"role": "user", "content": "x"}], "return_token_ids": true})",
                                        true, limits))
                  .return_token_ids);
  EXPECT_FALSE(Ok(ParseCompletionRequest(R"({"prompt": "x", "return_token_ids": null})", false, limits)).return_token_ids);
  ExpectRejected({{R"({"prompt": "x", "return_token_ids": "yes"})", false, {"'return_token_ids' must be a boolean"}}});
}

}  // namespace
}  // namespace bmad::http
