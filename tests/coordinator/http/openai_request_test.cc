#include "coordinator/http/openai_request.h"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "coordinator/http/openai_response.h"
#include "tests/coordinator/http/parse_request.h"

namespace bmad::http {
namespace {

using testing::Chat;
using testing::Completion;
using ::testing::ElementsAre;
using testing::ExpectRejected;
using ::testing::HasSubstr;
using testing::Ok;
using testing::Rejection;
using testing::TestLimits;

// ---- what is accepted ----

TEST(ParseCompletionRequest, CompletionDefaultsAreOpenAIs) {
  const CompletionRequest r = Ok(Completion(R"({"model": "llama", "prompt": "Hello"})"));
  EXPECT_FALSE(r.chat);
  EXPECT_EQ(r.model, "llama");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_FALSE(r.prompts[0].is_tokens);
  EXPECT_EQ(r.prompts[0].text, "Hello");
  EXPECT_TRUE(r.prompts[0].tokens.empty());
  EXPECT_EQ(r.max_tokens, 16u);
  EXPECT_EQ(r.sampling.max_tokens, 16u);
  EXPECT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_EQ(r.sampling.top_p, 1.0f);
  EXPECT_EQ(r.sampling.top_k, 0);
  EXPECT_FALSE(r.sampling.has_seed);
  EXPECT_FALSE(r.sampling.logprobs);
  EXPECT_FALSE(r.sampling.ignore_eos);
  EXPECT_TRUE(r.sampling.stop_strings.empty());
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.include_usage);
  EXPECT_FALSE(r.priority.has_value());
  EXPECT_EQ(r.slo_ms, 0u);
  EXPECT_EQ(r.top_logprobs, 0u);
  EXPECT_EQ(r.n, 1u);
}

TEST(ParseCompletionRequest, CompletionReadsEveryField) {
  const CompletionRequest r = Ok(Completion(R"({
      "model": "m", "prompt": "Once", "max_tokens": 100, "temperature": 0.5, "top_p": 0.9,
      "top_k": 40, "min_p": 0.05, "repetition_penalty": 1.1, "presence_penalty": -0.5,
      "frequency_penalty": 1.5, "seed": 42, "stop": ["\n\n", "END"], "stop_token_ids": [2, 7],
      "logprobs": 3, "ignore_eos": true, "stream": true, "stream_options": {"include_usage": true},
      "n": 1, "best_of": 1, "echo": false, "user": "alice", "priority": 0, "slo_ms": 1500})"));
  EXPECT_EQ(r.max_tokens, 100u);
  EXPECT_EQ(r.n, 1u);
  EXPECT_EQ(r.sampling.max_tokens, 100u);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.05f);
  EXPECT_FLOAT_EQ(r.sampling.repetition_penalty, 1.1f);
  EXPECT_FLOAT_EQ(r.sampling.presence_penalty, -0.5f);
  EXPECT_FLOAT_EQ(r.sampling.frequency_penalty, 1.5f);
  EXPECT_TRUE(r.sampling.has_seed);
  EXPECT_EQ(r.sampling.seed, 42u);
  EXPECT_THAT(r.sampling.stop_strings, ElementsAre("\n\n", "END"));
  EXPECT_THAT(r.sampling.stop_token_ids, ElementsAre(2u, 7u));
  EXPECT_TRUE(r.sampling.logprobs);
  EXPECT_EQ(r.top_logprobs, 3u);
  EXPECT_EQ(r.sampling.top_logprobs, 3u);  // what the worker computes
  EXPECT_TRUE(r.sampling.ignore_eos);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.priority, 0);
  EXPECT_EQ(r.slo_ms, 1500u);
}

TEST(ParseCompletionRequest, ChatReadsMessagesAndLeavesMaxTokensToTheCoordinator) {
  const CompletionRequest r = Ok(Chat(R"({
      "model": "m",
      "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "developer", "content": "Really."},
        {"role": "user", "content": [{"type": "text", "text": "Hi"},
                                     {"type": "text", "text": "there"}], "name": "bob"},
        {"role": "assistant", "content": null, "tool_calls": []},
        {"role": "assistant", "tool_calls": null},
        {"role": "user", "content": ""}]})"));
  EXPECT_TRUE(r.chat);
  ASSERT_EQ(r.messages.size(), 6u);
  EXPECT_EQ(r.messages[0], (ChatMessage{ChatRole::kSystem, "Be brief."}));
  EXPECT_EQ(r.messages[1], (ChatMessage{ChatRole::kSystem, "Really."}));
  EXPECT_EQ(r.messages[2], (ChatMessage{ChatRole::kUser, "Hi\nthere"}));
  EXPECT_EQ(r.messages[3], (ChatMessage{ChatRole::kAssistant, ""}));
  EXPECT_EQ(r.messages[4], (ChatMessage{ChatRole::kAssistant, ""}));
  EXPECT_EQ(r.messages[5], (ChatMessage{ChatRole::kUser, ""}));
  EXPECT_TRUE(r.add_generation_prompt);
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_EQ(r.sampling.max_tokens, 0u);  // the coordinator must fill in the room left
}

TEST(ParseCompletionRequest, ChatMaxTokensLogprobsAndExtensions) {
  const std::string messages = R"("messages": [{"role": "user", "content": "Hi"}])";
  EXPECT_EQ(Ok(Chat("{" + messages + R"(, "max_tokens": 50})")).max_tokens, 50u);
  EXPECT_EQ(Ok(Chat("{" + messages + R"(, "max_completion_tokens": 60})")).max_tokens, 60u);
  const CompletionRequest both =
      Ok(Chat("{" + messages + R"(, "max_tokens": 50, "max_completion_tokens": 70})"));
  EXPECT_EQ(both.max_tokens, 70u);
  EXPECT_EQ(both.sampling.max_tokens, 70u);

  const CompletionRequest logprobs =
      Ok(Chat("{" + messages + R"(, "logprobs": true, "top_logprobs": 5})"));
  EXPECT_TRUE(logprobs.sampling.logprobs);
  EXPECT_EQ(logprobs.top_logprobs, 5u);
  EXPECT_EQ(logprobs.sampling.top_logprobs, 5u);
  EXPECT_TRUE(Ok(Chat("{" + messages + R"(, "logprobs": true})")).sampling.logprobs);
  EXPECT_FALSE(
      Ok(Chat("{" + messages + R"(, "logprobs": false, "top_logprobs": 0})")).sampling.logprobs);

  EXPECT_FALSE(
      Ok(Chat("{" + messages + R"(, "add_generation_prompt": false})")).add_generation_prompt);
  EXPECT_EQ(Ok(Chat("{" + messages + R"(, "n": 128})")).n, 128u);
  EXPECT_EQ(Ok(Completion(R"({"prompt": "x", "n": 3, "best_of": 3})")).n, 3u);
  // Completion-only fields mean nothing to chat and are ignored there; not echo, which vLLM's
  // chat takes too (the reply starts with the final message when it is the assistant's), nor
  // best_of, which vLLM's chat takes too (choices ranked and dropped), held to n as for
  // completions.
  EXPECT_TRUE(Chat("{" + messages + R"(, "echo": false, "suffix": "x"})").ok());
  EXPECT_TRUE(Ok(Chat("{" + messages + R"(, "echo": true})")).echo);
  EXPECT_EQ(Ok(Chat("{" + messages + R"(, "n": 3, "best_of": 3})")).n, 3u);
  const Status best_of = Chat("{" + messages + R"(, "best_of": 3})").status();
  EXPECT_NE(best_of.message().find("'best_of' must equal 'n' (1), got 3"), std::string::npos) << best_of.message();
  // Refused extensions pass when empty, as when null: clients that always send them.
  EXPECT_TRUE(Chat("{" + messages +
                   R"(, "chat_template_kwargs": {}, "logits_processors": [], "guided_choice": [], "chat_template": "",
                        "modalities": ["text"], "audio": null, "reasoning_effort": null})")
                  .ok());
  // What would change the output is refused, naming the field.
  for (const char* field : {R"("audio": {"voice": "alloy"})",
                            R"("modalities": ["text", "audio"])", R"("reasoning_effort": "low")",
                            R"("web_search_options": {"search_context_size": "low"})",
                            R"("guided_whitespace_pattern": " ")", R"("prediction": {"type": "content"})"}) {
    Result<CompletionRequest> r = Chat("{" + messages + ", " + field + "}");
    ASSERT_FALSE(r.ok()) << field;
    const std::string name = std::string(field).substr(1, std::string(field).find('"', 1) - 1);
    EXPECT_NE(r.status().message().find("'" + name + "'"), std::string::npos) << r.status().message();
  }
}

TEST(ParseCompletionRequest, PromptForms) {
  const CompletionRequest tokens = Ok(Completion(R"({"prompt": [1, 2, 3.0, 4294]})"));
  ASSERT_EQ(tokens.prompts.size(), 1u);
  EXPECT_TRUE(tokens.prompts[0].is_tokens);
  EXPECT_THAT(tokens.prompts[0].tokens, ElementsAre(1u, 2u, 3u, 4294u));
  EXPECT_TRUE(tokens.prompts[0].text.empty());

  const CompletionRequest one_string = Ok(Completion(R"({"prompt": ["Hello"]})"));
  ASSERT_EQ(one_string.prompts.size(), 1u);
  EXPECT_FALSE(one_string.prompts[0].is_tokens);
  EXPECT_EQ(one_string.prompts[0].text, "Hello");

  const CompletionRequest one_list = Ok(Completion(R"({"prompt": [[5, 6]]})"));
  ASSERT_EQ(one_list.prompts.size(), 1u);
  EXPECT_TRUE(one_list.prompts[0].is_tokens);
  EXPECT_THAT(one_list.prompts[0].tokens, ElementsAre(5u, 6u));

  // A batch: every prompt, in order.
  const CompletionRequest texts = Ok(Completion(R"({"prompt": ["Hello", "Once"]})"));
  ASSERT_EQ(texts.prompts.size(), 2u);
  EXPECT_EQ(texts.prompts[0].text, "Hello");
  EXPECT_EQ(texts.prompts[1].text, "Once");
  const CompletionRequest lists = Ok(Completion(R"({"prompt": [[1], [2, 3], [4]]})"));
  ASSERT_EQ(lists.prompts.size(), 3u);
  EXPECT_THAT(lists.prompts[1].tokens, ElementsAre(2u, 3u));
  EXPECT_TRUE(lists.prompts[2].is_tokens);

  std::string many = R"({"prompt": [)";
  for (int i = 0; i < 1025; ++i) many += i == 0 ? "\"a\"" : ", \"a\"";
  many += "]}";
  EXPECT_NE(Completion(many).status().message().find("'prompt' holds 1025 prompts; at most 1024"),
            std::string::npos)
      << Completion(many).status().ToString();

  // JSON escapes arrive decoded; the text is UTF-8.
  EXPECT_EQ(Ok(Completion(R"({"prompt": "caf\u00e9 \ud83d\ude00\n"})")).prompts[0].text,
            "caf\xC3\xA9 \xF0\x9F\x98\x80\n");
}

TEST(ParseCompletionRequest, NullMeansNotSetAndUnknownFieldsAreIgnored) {
  const CompletionRequest r = Ok(Completion(R"({
      "model": null, "prompt": "x", "max_tokens": null, "temperature": null, "top_p": null,
      "stop": null, "seed": null, "logprobs": null, "n": null, "stream": null,
      "stream_options": null, "logit_bias": null, "suffix": null, "priority": null,
      "user": null, "metadata": {"a": [1, {"b": null}]}, "tool_choice": "none",
      "some_future_field": {"type": "object"}, "logit_bias_extra": 1})"));
  EXPECT_EQ(r.model, "");
  EXPECT_EQ(r.max_tokens, 16u);
  EXPECT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_FALSE(r.sampling.has_seed);
  EXPECT_FALSE(r.stream);
  // Neutral values of the unsupported parameters pass.
  EXPECT_TRUE(Completion(R"({"prompt": "x", "logit_bias": {}, "suffix": "", "tools": [],
                              "response_format": {"type": "text"}})")
                  .ok());
  // An empty stream_options asks for nothing: clients that always send one are served unstreamed
  // too (vLLM refuses only a non-empty one there).
  const CompletionRequest unstreamed = Ok(Completion(R"({"prompt": "x", "stream_options": {}})"));
  EXPECT_FALSE(unstreamed.stream);
  EXPECT_FALSE(unstreamed.include_usage);
}

TEST(ParseCompletionRequest, ResponseFormat) {
  EXPECT_EQ(Ok(Completion(R"({"prompt": "x"})")).sampling.response_format, proto::ResponseFormat::kText);
  EXPECT_EQ(Ok(Completion(R"({"prompt": "x", "response_format": null})")).sampling.response_format,
            proto::ResponseFormat::kText);
  EXPECT_EQ(Ok(Completion(R"({"prompt": "x", "response_format": {"type": "text"}})")).sampling.response_format,
            proto::ResponseFormat::kText);
  EXPECT_EQ(Ok(Completion(R"({"prompt": "x", "response_format": {"type": "json_object"}})"))
                .sampling.response_format,
            proto::ResponseFormat::kJsonObject);
  EXPECT_EQ(Ok(Chat(R"({"messages": [{"role": "user", "content": "hi"}],
                        "response_format": {"type": "json_object"}})"))
                .sampling.response_format,
            proto::ResponseFormat::kJsonObject);
  EXPECT_TRUE(Ok(Completion(R"({"prompt": "x"})")).sampling.json_schema.empty());
}

// A schema of 40 nested objects (optional nesting: the output stops at 32) arrives: the body's
// depth bound was 64, which refused it as "nested deeper than 64 levels" (found in review).
TEST(ParseCompletionRequest, ADeeplyNestedJsonSchemaIsNotRefusedAsADeepBody) {
  std::string schema = R"({"type":"integer"})";
  for (int i = 0; i < 40; ++i) schema = R"({"type":"object","properties":{"n":)" + schema + "}}";
  const CompletionRequest r = Ok(Chat(R"({"messages": [{"role": "user", "content": "hi"}],
      "response_format": {"type": "json_schema", "json_schema": {"name": "deep", "schema": )" + schema + "}}}"));
  EXPECT_EQ(r.sampling.json_schema, schema);
}

TEST(ParseCompletionRequest, JsonSchemaKeepsThePropertiesInTheOrderSent) {
  const CompletionRequest r = Ok(Chat(R"({"messages": [{"role": "user", "content": "hi"}],
      "response_format": {"type": "json_schema", "json_schema": {"name": "person", "strict": true,
        "description": "who", "schema": {"type": "object", "properties": {"zeta": {"type": "string"},
        "alpha": {"enum": [1, "b"]}}, "required": ["zeta"]}}}})"));
  EXPECT_EQ(r.sampling.response_format, proto::ResponseFormat::kJsonSchema);
  EXPECT_EQ(r.sampling.json_schema,
            R"({"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"enum":[1,"b"]}},"required":["zeta"]})");
  // vLLM's guided_json: the schema, or its text as it came.
  const CompletionRequest guided = Ok(Completion(R"({"prompt": "x", "guided_json": {"type": "string"}})"));
  EXPECT_EQ(guided.sampling.response_format, proto::ResponseFormat::kJsonSchema);
  EXPECT_EQ(guided.sampling.json_schema, R"({"type":"string"})");
  EXPECT_EQ(Ok(Completion(R"({"prompt": "x", "guided_json": "{\"enum\": [1]}"})")).sampling.json_schema,
            R"({"enum": [1]})");
  EXPECT_EQ(Ok(Completion(R"({"prompt": "x", "guided_json": {}, "response_format": {"type": "text"}})"))
                .sampling.response_format,
            proto::ResponseFormat::kJsonSchema);
}

TEST(ParseCompletionRequest, NumberEdgeCases) {
  EXPECT_EQ(Ok(Completion(R"({"prompt": "x", "top_k": -1})")).sampling.top_k, 0);  // vLLM's "off"
  EXPECT_EQ(Ok(Completion(R"({"prompt": "x", "max_tokens": 4096})")).max_tokens, 4096u);
  EXPECT_EQ(Ok(Completion(R"({"prompt": "x", "max_tokens": 5.0})")).max_tokens, 5u);
  EXPECT_EQ(Ok(Completion(R"({"prompt": "x", "temperature": 0})")).sampling.temperature, 0.0f);
  EXPECT_EQ(Ok(Completion(R"({"prompt": "x", "temperature": 2})")).sampling.temperature, 2.0f);
  EXPECT_EQ(Ok(Completion(R"({"prompt": "x", "top_p": 1e-9})")).sampling.top_p, 1e-9f);
  EXPECT_EQ(Ok(Chat(R"({"messages": [{"role": "user", "content": "x"}], "user": "alice"})")).messages.size(), 1u);
  const CompletionRequest negative_seed = Ok(Completion(R"({"prompt": "x", "seed": -1})"));
  EXPECT_TRUE(negative_seed.sampling.has_seed);
  EXPECT_EQ(negative_seed.sampling.seed, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(Ok(Completion(R"({"prompt": "x", "stop": "###"})")).sampling.stop_strings,
            std::vector<std::string>{"###"});
  EXPECT_EQ(Ok(Completion(R"({"prompt": "x", "priority": 2, "slo_ms": 0})")).priority, 2);

  RequestLimits unbounded = TestLimits();
  unbounded.max_model_len = 0;  // not checked here
  EXPECT_EQ(Ok(Completion(R"({"prompt": "x", "max_tokens": 4000000000})", unbounded)).max_tokens,
            4000000000u);
}

TEST(ParseCompletionRequest, PriorityClassesComeFromTheLimits) {
  RequestLimits one_class = TestLimits();
  one_class.priority_classes = 1;
  EXPECT_EQ(Ok(Completion(R"({"prompt": "x", "priority": 0})", one_class)).priority, 0);
  ExpectRejected({{R"({"prompt": "x", "priority": 1})", false, {"'priority'", "[0, 0]"}}},
                 one_class);
}

TEST(ParseCompletionRequest, ChatMessagesFeedTheChatTemplate) {
  const CompletionRequest r = Ok(Chat(R"({"messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hi"}]}]})"));
  const Result<std::string> prompt =
      ApplyChatTemplate(ChatTemplate::kChatML, r.messages, r.add_generation_prompt);
  ASSERT_TRUE(prompt.ok());
  EXPECT_EQ(*prompt,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
}

// ---- what is rejected, and how it is worded ----

TEST(ParseCompletionRequest, RejectsWrongTypesAndRangesNamingTheParameter) {
  const std::string p = R"("prompt": "x", )";
  ExpectRejected({
      {"{" + p + R"("max_tokens": "16"})",
       false,
       {"'max_tokens' must be a positive integer", "got \"16\""}},
      {"{" + p + R"("max_tokens": -5})",
       false,
       {"'max_tokens' must be a positive integer, got -5"}},
      {"{" + p + R"("max_tokens": 0})", false, {"'max_tokens'", "got 0"}},
      {"{" + p + R"("max_tokens": 1.5})", false, {"'max_tokens'", "got 1.5"}},
      {"{" + p + R"("max_tokens": true})", false, {"'max_tokens'", "got true"}},
      {"{" + p + R"("max_tokens": 5000})",
       false,
       {"'max_tokens' is 5000", "context length of 4096"},
       StatusCode::kOutOfRange},
      {"{" + p + R"("max_tokens": 1e300})", false, {"'max_tokens'"}},
      {"{" + p + R"("temperature": 3})",
       false,
       {"'temperature' must be a number in [0, 2], got 3"}},
      {"{" + p + R"("temperature": -0.1})", false, {"'temperature'", "-0.1"}},
      {"{" + p + R"("temperature": "1"})", false, {"'temperature'", "got \"1\""}},
      {"{" + p + R"("temperature": 1e999})", false, {"body is not valid JSON", "overflow"}},
      {"{" + p + R"("top_p": 1e-50})", false, {"'top_p'", "got 1e-50, which a 32-bit float reads as 0"}},
      {"{" + p + R"("user": 42})", false, {"'user' must be a string, got 42"}},
      {"{" + p + R"("top_p": 0})", false, {"'top_p' must be a number in (0, 1], got 0"}},
      {"{" + p + R"("top_p": 1.5})", false, {"'top_p'", "1.5"}},
      {"{" + p + R"("top_k": -2})", false, {"'top_k'", "-2"}},
      {"{" + p + R"("top_k": 2.5})", false, {"'top_k'"}},
      {"{" + p + R"("min_p": 2})", false, {"'min_p'", "[0, 1]"}},
      {"{" + p + R"("repetition_penalty": 0})",
       false,
       {"'repetition_penalty' must be a number > 0"}},
      {"{" + p + R"("repetition_penalty": -1})", false, {"'repetition_penalty'"}},
      {"{" + p + R"("presence_penalty": 3})", false, {"'presence_penalty'", "[-2, 2]"}},
      {"{" + p + R"("frequency_penalty": -2.5})", false, {"'frequency_penalty'", "-2.5"}},
      {"{" + p + R"("seed": 1.5})", false, {"'seed'", "integer"}},
      {"{" + p + R"("seed": "42"})", false, {"'seed'"}},
      {"{" + p + R"("seed": 18446744073709551615})", false, {"'seed'"}},
      {"{" + p + R"("ignore_eos": "no"})", false, {"'ignore_eos' must be a boolean"}},
      {"{" + p + R"("n": 129})", false, {"'n' must be an integer in [1, 128], got 129"}},
      {"{" + p + R"("n": 0})", false, {"'n' must be an integer in [1, 128], got 0"}},
      {"{" + p + R"("n": 1.5})", false, {"'n' must be an integer in [1, 128]"}},
      {"{" + p + R"("echo": true, "logprobs": 0, "stream": true})", false,
       {"'echo' with 'logprobs' is not available with 'stream'"}},
      {"{" + p + R"("max_tokens": 0})", false, {"'max_tokens' must be a positive integer, got 0", "only with 'echo'"}},
      {"{" + p + R"("echo": "yes"})", false, {"'echo' must be a boolean"}},
      {"{" + p + R"("best_of": 2})", false, {"'best_of' must equal 'n' (1), got 2"}},
      {"{" + p + R"("n": 2, "best_of": 3})", false, {"'best_of' must equal 'n' (2), got 3", "none are ranked"}},
      {"{" + p + R"("best_of": 0})", false, {"'best_of' must be an integer in [1, 128], got 0"}},
      {"{" + p + R"("logprobs": 21})", false, {"'logprobs' must be an integer in [0, 20], got 21"}},
      {"{" + p + R"("logprobs": -1})", false, {"'logprobs'"}},
      {"{" + p + R"("logprobs": true})", false, {"'logprobs'", "got true"}},
      {"{" + p + R"("stream": "true"})", false, {"'stream' must be a boolean"}},
      {"{" + p + R"("stream_options": {"include_usage": true}})",
       false,
       {"'stream_options' is only allowed when 'stream' is true"}},
      {"{" + p + R"("stream": true, "stream_options": 5})",
       false,
       {"'stream_options' must be an object"}},
      {"{" + p + R"("stream": true, "stream_options": {"include_usage": "yes"}})",
       false,
       {"'stream_options.include_usage' must be a boolean"}},
      {"{" + p + R"("stop": 5})", false, {"'stop' must be a string or an array of strings, got 5"}},
      {"{" + p + R"("stop": ["a", 1]})", false, {"'stop[1]' must be a string, got 1"}},
      {"{" + p + R"("stop": ""})", false, {"'stop' must not be empty"}},
      {"{" + p + R"("stop": ["a", ""]})", false, {"'stop[1]' must not be empty"}},
      {"{" + p + R"("stop": ["1","2","3","4","5","6","7","8","9"]})",
       false,
       {"'stop' holds 9 strings; at most 8"}},
      {"{" + p + R"("stop": ")" + std::string(129, 'a') + R"("})",
       false,
       {"'stop' is 129 bytes; at most 128"}},
      {"{" + p + R"("stop_token_ids": [1, -1]})",
       false,
       {"'stop_token_ids[1]' must be a token id"}},
      {"{" + p + R"("stop_token_ids": 3})", false, {"'stop_token_ids' must be an array"}},
      {"{" + p + R"("priority": 3})", false, {"'priority' must be an integer in [0, 2]", "got 3"}},
      {"{" + p + R"("priority": -1})", false, {"'priority'"}},
      {"{" + p + R"("priority": "high"})", false, {"'priority'", "\"high\""}},
      {"{" + p + R"("slo_ms": -1})", false, {"'slo_ms'", "got -1"}},
      {"{" + p + R"("model": 5})", false, {"'model' must be a string, got 5"}},
      {"{" + p + R"("logit_bias": [[50256, -100]]})", false, {"'logit_bias' must be an object"}},
      {"{" + p + R"("logit_bias": {"a": 1}})", false, {"'logit_bias' keys must be token ids", "\"a\""}},
      {"{" + p + R"("logit_bias": {"-1": 1}})", false, {"'logit_bias' keys must be token ids"}},
      {"{" + p + R"("logit_bias": {"9999999999": 1}})", false, {"'logit_bias' key \"9999999999\" is not a token id: the largest is 2147483646"}},
      {"{" + p + R"("logit_bias": {"99999999999999999999999": 1}})", false, {"is not a token id: the largest is"}},
      {"{" + p + R"("logit_bias": {"": 1}})", false, {"'logit_bias' keys must be token ids"}},
      {"{" + p + R"("logit_bias": {"5": 101}})", false, {"'logit_bias.5' must be a number in [-100, 100]", "got 101"}},
      {"{" + p + R"("logit_bias": {"5": "high"}})", false, {"'logit_bias.5' must be a number"}},
      {"{" + p + R"("logit_bias": {"5": 1, "05": 2}})", false, {"'logit_bias' for token 5 is given twice"}},
      {"{" + p + R"("min_tokens": -1})", false, {"'min_tokens' must be an integer in [0, 4294967295]", "got -1"}},
      {"{" + p + R"("min_tokens": 5000000000})", false, {"'min_tokens' must be an integer in [0, 4294967295]"}},
      {"{" + p + R"("min_tokens": 1.5})", false, {"'min_tokens'"}},
      {"{" + p + R"("max_tokens": 4, "min_tokens": 5})", false, {"'min_tokens' (5) must be at most 'max_tokens' (4)"}},
      {"{" + p + R"("suffix": "end"})", false, {"'suffix' is not supported"}},
      {"{" + p + R"("response_format": {"type": "json_schema", "json_schema": {"name": "x"}}})",
       false,
       {"'response_format.json_schema.schema' is required"}},
      {"{" + p + R"("response_format": {"type": "json_schema"}})",
       false,
       {"'response_format.json_schema' must be an object holding the schema under \"schema\""}},
      {"{" + p + R"("response_format": {"type": "json_schema", "json_schema": {"schema": "{}"}}})",
       false,
       {"'response_format.json_schema.schema' must be an object or a boolean (a JSON Schema), got \"{}\""}},
      {"{" + p + R"("response_format": {"type": "json_schema", "json_schema": {"name": 3, "schema": {}}}})",
       false,
       {"'response_format.json_schema.name' must be a string, got 3"}},
      {"{" + p + R"("response_format": {"type": "json_schema", "json_schema": {"strict": "yes", "schema": {}}}})",
       false,
       {"'response_format.json_schema.strict' must be a boolean"}},
      {"{" + p + R"("response_format": {"type": "json_schema", "json_schema": {"schema":
           {"type": "object", "properties": {"age": {"type": "integer", "multipleOf": 2}}}}}})",
       false,
       {"'response_format.json_schema.schema' at /properties/age: keyword 'multipleOf' is not supported"}},
      {"{" + p + R"("response_format": {"type": "json_schema", "json_schema": {"schema": {}}}, "ignore_eos": true})",
       false,
       {"'ignore_eos' cannot be used with response_format \"json_schema\""}},
      {"{" + p + R"("response_format": {"type": "grammar"}})",
       false,
       {"'response_format' of type \"grammar\" is not supported", "\"json_schema\" are"}},
      {"{" + p + R"("guided_json": 5})", false, {"'guided_json' must be a JSON Schema (an object, or its JSON text), got 5"}},
      {"{" + p + R"("guided_json": "{\"type\": \"strin\"}"})",
       false,
       {"'guided_json' at the root: 'type' \"strin\" is not a JSON Schema type"}},
      {"{" + p + R"("guided_json": {}, "response_format": {"type": "json_object"}})",
       false,
       {"'guided_json' cannot be used with a 'response_format' other than \"text\""}},
      {"{" + p + R"("response_format": {}})", false, {"'response_format.type' is required"}},
      {"{" + p + R"("response_format": {"type": "json_object"}, "min_tokens": 2})",
       false,
       {"'min_tokens' cannot be used with response_format \"json_object\""}},
      {"{" + p + R"("response_format": {"type": "json_object"}, "ignore_eos": true})",
       false,
       {"'ignore_eos' cannot be used with response_format \"json_object\""}},
      {"{" + p + R"("response_format": "json"})", false, {"'response_format' must be an object"}},
      {"{" + p + R"("tools": [{"type": "function"}]})", false, {"'tools' is a chat completions parameter"}},
      // Chat's parameters are not taken here (they were ignored: 16 tokens, no logprobs).
      {"{" + p + R"("max_completion_tokens": 3})", false,
       {"'max_completion_tokens' is a chat completions parameter; /v1/completions takes 'max_tokens'"}},
      {"{" + p + R"("logprobs": 1, "top_logprobs": 2})", false,
       {"'top_logprobs' is a chat completions parameter; /v1/completions takes 'logprobs'"}},
  });
  // Their values that ask for nothing pass.
  EXPECT_TRUE(Completion(R"({"prompt": "x", "max_completion_tokens": null, "top_logprobs": 0})").ok());
}

TEST(ParseCompletionRequest, RejectsBadPrompts) {
  ExpectRejected({
      {R"({"model": "m"})", false, {"'prompt' is required"}},
      {R"({"prompt": []})", false, {"'prompt' must not be empty"}},
      {R"({"prompt": [[]]})", false, {"'prompt[0]' must not be empty"}},
      {R"({"prompt": 5})", false, {"'prompt' must be a string or an array of token ids, got 5"}},
      {R"({"prompt": {"text": "x"}})", false, {"'prompt'", "an object"}},
      {R"({"prompt": [[1], []]})", false, {"'prompt[1]' must not be empty"}},
      {R"({"prompt": [1, "a"]})", false, {"'prompt[1]' must be a token id", "got \"a\""}},
      {R"({"prompt": ["a", 1]})", false, {"'prompt[1]' must be a string", "got 1"}},
      {R"({"prompt": [[1], 2]})", false, {"'prompt[1]' must be an array of token ids"}},
      {R"({"prompt": [1, 2.5]})", false, {"'prompt[1]' must be a token id", "got 2.5"}},
      {R"({"prompt": [1, -3]})", false, {"'prompt[1]'", "got -3"}},
      {R"({"prompt": [1, true]})", false, {"'prompt[1]'", "got true"}},
      {R"({"prompt": [null]})", false, {"'prompt[0]'", "got null"}},
      {R"({"prompt": [1099511627776]})", false, {"'prompt[0]' must be a token id"}},
      {R"({"prompt": [[1, "x"]]})", false, {"'prompt[0][1]' must be a token id"}},
  });
  RequestLimits small = TestLimits();
  small.max_model_len = 3;
  small.max_prompt_bytes = 5;
  ExpectRejected(
      {
          {R"({"prompt": [1, 2, 3, 4]})",
           false,
           {"'prompt' holds 4 tokens", "context length of 3"},
           StatusCode::kOutOfRange},
          {R"({"prompt": [[1, 2, 3, 4]]})",
           false,
           {"'prompt[0]' holds 4 tokens"},
           StatusCode::kOutOfRange},
          {R"({"prompt": "123456"})", false, {"'prompt' is 6 bytes; at most 5"}},
          {R"({"prompt": ["123", "456"]})", false, {"'prompt' holds 6 bytes of text in all; at most 5"}},
          {R"({"prompt": [[1], [1, 2, 3, 4]]})",
           false,
           {"'prompt[1]' holds 4 tokens"},
           StatusCode::kOutOfRange},
          {R"({"messages": [{"role": "user", "content": "123"},
                            {"role": "user", "content": "456"}]})",
           true,
           {"'messages'", "more than 5 bytes"}},
      },
      small);
  EXPECT_TRUE(Completion(R"({"prompt": [1, 2, 3]})", small).ok());
  EXPECT_TRUE(Completion(R"({"prompt": "12345"})", small).ok());
}

TEST(ParseCompletionRequest, RejectsBadMessages) {
  ExpectRejected({
      {R"({"model": "m"})", true, {"'messages' is required"}},
      {R"({"messages": "hi"})", true, {"'messages' must be a non-empty array, got \"hi\""}},
      {R"({"messages": {"role": "user"}})", true, {"'messages' must be a non-empty array"}},
      {R"({"messages": []})", true, {"'messages' must be a non-empty array, got []"}},
      {R"({"messages": [5]})", true, {"'messages[0]' must be an object", "got 5"}},
      {R"({"messages": [{"content": "hi"}]})", true, {"'messages[0].role' is required"}},
      {R"({"messages": [{"role": "user"}]})", true, {"'messages[0].content' is required"}},
      {R"({"messages": [{"role": "system", "content": null}]})",
       true,
       {"'messages[0].content' is required"}},
      {R"({"messages": [{"role": "user", "content": "a"}, {"role": "bot", "content": "b"}]})",
       true,
       {"'messages[1].role' must be one of 'system', 'developer', 'user', 'assistant'",
        "got \"bot\""}},
      {R"({"messages": [{"role": 1, "content": "b"}]})", true, {"'messages[0].role'", "got 1"}},
      {R"({"messages": [{"role": "function", "content": "42", "name": "f"}]})",
       true,
       {"'messages[0].role' 'function' (OpenAI's deprecated function calling) is not supported"}},
      {R"({"messages": [{"role": "assistant", "content": "x", "function_call": {"name": "f"}}]})",
       true,
       {"'messages[0].function_call' (OpenAI's deprecated function calling) is not supported"}},
      {R"({"messages": [{"role": "user", "content": 5}]})",
       true,
       {"'messages[0].content' must be a string or an array of content parts, got 5"}},
      {R"({"messages": [{"role": "user", "content": [5]}]})",
       true,
       {"'messages[0].content[0]' must be an object"}},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url",
           "image_url": {"url": "http://x"}}]}]})",
       true,
       {"'messages[0].content[0].type' must be \"text\"", "got \"image_url\""}},
      {R"({"messages": [{"role": "user", "content": [{"text": "a"}]}]})",
       true,
       {"'messages[0].content[0].type' is required"}},
      {R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})",
       true,
       {"'messages[0].content[0].text' is required"}},
      {R"({"messages": [{"role": "user", "content": [{"type": "text", "text": 7}]}]})",
       true,
       {"'messages[0].content[0].text' must be a string, got 7"}},
      {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": 1})",
       true,
       {"'logprobs' must be a boolean, got 1"}},
      {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true,
           "top_logprobs": 21})",
       true,
       {"'top_logprobs' must be an integer in [0, 20]"}},
      {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})",
       true,
       {"'top_logprobs' needs 'logprobs' set to true"}},
      {R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": -1})",
       true,
       {"'max_completion_tokens' must be a positive integer, got -1"}},
      {R"({"messages": [{"role": "user", "content": "x"}], "add_generation_prompt": 1})",
       true,
       {"'add_generation_prompt' must be a boolean"}},
      {R"({"messages": [{"role": "user", "content": "x"}], "n": 0})", true, {"'n' must be an integer in [1, 128], got 0"}},
      {R"({"messages": [{"role": "user", "content": "x"}], "functions": [{"name": "f"}]})",
       true,
       {"'functions' (OpenAI's deprecated function calling) is not supported; send 'tools'"}},
      // Extensions that would change the output are refused, not ignored.
      {R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"})",
       true,
       {"'tool_choice' \"required\" needs 'tools', and the request gives none"}},
      {R"({"messages": [{"role": "assistant", "content": "x"}], "continue_final_message": true,
           "add_generation_prompt": true})",
       true,
       {"'continue_final_message' and 'add_generation_prompt' cannot both be true"}},
      {R"({"messages": [{"role": "user", "content": "x"}], "continue_final_message": 1})",
       true,
       {"'continue_final_message' must be a boolean"}},
      {R"({"messages": [{"role": "user", "content": "x"}], "chat_template": "{{x}}"})",
       true,
       {"'chat_template' is not supported"}},
      {R"({"prompt": "x", "use_beam_search": true})", false, {"'use_beam_search' is not supported"}},
      {R"({"prompt": "x", "include_stop_str_in_output": 1})",
       false,
       {"'include_stop_str_in_output' must be a boolean, got 1"}},
      {R"({"prompt": "x", "guided_choice": ["a", 2]})", false, {"'guided_choice[1]' must be a string"}},
      {R"({"prompt": "x", "guided_choice": "a"})", false, {"'guided_choice' must be an array of strings"}},
      {R"({"prompt": "x", "guided_regex": "a**"})", false, {"'guided_regex': the pattern repeats a repeat"}},
      {R"({"prompt": "x", "guided_regex": "a", "guided_choice": ["a"]})", false, {"'guided_choice' cannot be used with 'guided_regex': give one constraint"}},
      {R"({"prompt": "x", "guided_regex": "a", "guided_json": {}})", false, {"'guided_json' cannot be used with 'guided_regex'"}},
      {R"({"prompt": "x", "guided_choice": ["a"], "response_format": {"type": "json_object"}})",
       false,
       {"'guided_choice' cannot be used with a 'response_format' other than \"text\""}},
      {R"({"prompt": "x", "guided_regex": "a", "min_tokens": 2})", false, {"'min_tokens' cannot be used with response_format \"regex\""}},
      {R"({"prompt": "x", "prompt_logprobs": 1, "stream": true})", false,
       {"'prompt_logprobs' is not available with 'stream'"}},
      {R"({"prompt": "x", "prompt_logprobs": 21})", false, {"'prompt_logprobs' must be an integer in [0, 20]"}},
      // vLLM's fields that would change the output, or its form, are refused by name too.
      {R"({"prompt": "x", "allowed_token_ids": [300, -1]})", false, {"'allowed_token_ids[1]' must be a token id"}},
      {R"({"prompt": "x", "allowed_token_ids": 3})", false, {"'allowed_token_ids' must be an array of token ids"}},
      {R"({"prompt": "x", "bad_words": " a"})", false, {"'bad_words' must be an array of strings"}},
      {R"({"prompt": "x", "bad_words": ["a", 1]})", false, {"'bad_words[1]' must be a string"}},
      {R"({"prompt": "x", "bad_words": ["a", " \n"]})", false, {"'bad_words[1]' must hold more than whitespace"}},
      {R"({"prompt": "x", "skip_special_tokens": false})", false, {"'skip_special_tokens' is not supported"}},
      {R"({"prompt": "x", "spaces_between_special_tokens": false})",
       false,
       {"'spaces_between_special_tokens' is not supported"}},
      {R"({"prompt": "x", "return_tokens_as_token_ids": "yes"})",
       false,
       {"'return_tokens_as_token_ids' must be a boolean"}},
      {R"({"prompt": "x", "logits_processors": ["f"]})", false, {"'logits_processors' is not supported"}},
      {R"({"prompt": "x", "stream": true, "stream_options": {"continuous_usage_stats": 1}})",
       false,
       {"'stream_options.continuous_usage_stats' must be a boolean"}},
      {R"({"prompt": "x", "add_special_tokens": 1})", false, {"'add_special_tokens' must be a boolean"}},
      {R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"enable_thinking": false,
           "tools": []}})",
       true,
       {"'chat_template_kwargs.tools' is not supported", "only 'enable_thinking'"}},
      {R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"enable_thinking": "no"}})",
       true,
       {"'chat_template_kwargs.enable_thinking' must be a boolean"}},
      {R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": [true]})",
       true,
       {"'chat_template_kwargs' must be an object"}},
      {R"({"messages": [{"role": "user", "content": "x"}], "bad_words": [""]})", true, {"'bad_words[0]'"}},
      {R"({"messages": [{"role": "user", "content": "x"}], "documents": [{"text": "d"}]})",
       true,
       {"'documents' is not supported"}},
  });
}

TEST(ParseCompletionRequest, AnEmptyTextPromptIsTheBosAloneAndAddSpecialTokensIsRead) {
  // As in vLLM: "" becomes the BOS token (the coordinator refuses it without one).
  EXPECT_EQ(Ok(Completion(R"({"prompt": ""})")).prompts.at(0).text, "");
  EXPECT_EQ(Ok(Completion(R"({"prompt": ["a", ""]})")).prompts.size(), 2u);
  EXPECT_TRUE(Ok(Completion(R"({"prompt": "x"})")).add_special_tokens);
  EXPECT_FALSE(Ok(Completion(R"({"prompt": "x", "add_special_tokens": false})")).add_special_tokens);
}

TEST(ParseCompletionRequest, LogitBiasAndMinTokensReachTheSamplingParams) {
  const CompletionRequest r = Ok(Completion(
      R"({"prompt": "x", "max_tokens": 8, "min_tokens": 8,
          "logit_bias": {"50256": -100, "7": 2.5, "9": null, "0000000000011": 100, "0": 1}})"));
  EXPECT_EQ(r.sampling.min_tokens, 8u);
  std::vector<proto::LogitBias> bias = r.sampling.logit_bias;
  std::sort(bias.begin(), bias.end(), [](const auto& a, const auto& b) { return a.token_id < b.token_id; });
  EXPECT_EQ(bias, (std::vector<proto::LogitBias>{{0, 1.0f}, {7, 2.5f}, {11, 100.0f}, {50256, -100.0f}}));
  // Chat without max_tokens: the coordinator fills in the room left, and checks min_tokens then.
  const CompletionRequest chat = Ok(Chat(R"({"messages": [{"role": "user", "content": "x"}], "min_tokens": 40})"));
  EXPECT_EQ(chat.sampling.min_tokens, 40u);
}

TEST(ParseCompletionRequest, IncludeStopStrInOutputReachesTheSampler) {
  EXPECT_FALSE(Ok(Completion(R"({"prompt": "x", "stop": "."})")).sampling.include_stop_str_in_output);
  EXPECT_TRUE(Ok(Completion(R"({"prompt": "x", "stop": ".", "include_stop_str_in_output": true})"))
                  .sampling.include_stop_str_in_output);
  EXPECT_TRUE(Ok(Chat(R"({"messages": [{"role": "user", "content": "x"}], "include_stop_str_in_output": true})"))
                  .sampling.include_stop_str_in_output);
}

TEST(ParseCompletionRequest, TheOffValuesOfUnsupportedExtensionsPass) {
  for (const char* body :
       {R"({"prompt": "x", "min_tokens": 0, "use_beam_search": false, "tool_choice": "none",
            "include_stop_str_in_output": false, "guided_json": null, "prompt_logprobs": null})",
        R"({"prompt": "x", "tool_choice": null, "continue_final_message": false})",
        R"({"prompt": "x", "allowed_token_ids": null, "bad_words": [], "truncate_prompt_tokens": null,
            "skip_special_tokens": true, "spaces_between_special_tokens": true,
            "return_tokens_as_token_ids": false, "logits_processors": null, "echo": false,
            "stream": true, "stream_options": {"continuous_usage_stats": false}})"}) {
    EXPECT_TRUE(ParseCompletionRequest(body, false, {}).ok())
        << body << ": " << ParseCompletionRequest(body, false, {}).status().ToString();
  }
}

TEST(ParseCompletionRequest, RejectsBodiesThatAreNotAJsonObject) {
  ExpectRejected({
      {"", false, {"body is empty"}},
      {" \n ", true, {"body is empty"}},
      {"{", false, {"body is not valid JSON", "parse error"}},
      {R"({"prompt": })", false, {"body is not valid JSON"}},
      {"not json", false, {"body is not valid JSON"}},
      {R"({"prompt": "x"} trailing)", false, {"body is not valid JSON"}},
      {R"({"prompt": "x",})", false, {"body is not valid JSON"}},
      {R"({/* comment */ "prompt": "x"})", false, {"body is not valid JSON"}},
      {"{\"prompt\": \"\xFF\xFE\"}", false, {"body is not valid JSON"}},  // not UTF-8
      {R"({"prompt": "\ud800"})", false, {"body is not valid JSON"}},     // lone surrogate
      {R"({"prompt": "a)" + std::string(10000, 'b'), false, {"body is not valid JSON"}},
      {"[1, 2]", false, {"body must be a JSON object, got an array"}},
      {R"("prompt")", false, {"body must be a JSON object, got \"prompt\""}},
      {"null", true, {"body must be a JSON object, got null"}},
      {std::string(100000, '['), false, {"nests arrays and objects deeper than 275"}},
      {R"({"prompt": "x", "a": )" + std::string(275, '[') + std::string(275, ']') + "}",
       false,
       {"deeper than 275"}},
  });
  // A JSON schema may nest as deep as the schema compiler takes (272 levels of schema text):
  // the body around it does not refuse it first.
  EXPECT_TRUE(Completion(R"({"prompt": "x", "a": )" + std::string(274, '[') + std::string(274, ']') + "}").ok());
  // Brackets inside strings are text, not nesting.
  EXPECT_TRUE(Completion(R"({"prompt": ")" + std::string(1000, '[') + R"(\"{{"})").ok());
  // A parse error quotes the bad token; the message stays short however long the token is.
  const Result<CompletionRequest> long_token =
      Completion(R"({"prompt": "a)" + std::string(10000, 'b'));
  ASSERT_FALSE(long_token.ok());
  EXPECT_LT(long_token.status().message().size(), 400u);
}

TEST(ParseCompletionRequest, RejectsOversizedBodiesBeforeParsing) {
  RequestLimits limits = TestLimits();
  limits.max_body_bytes = 64;
  const std::string body = R"({"prompt": ")" + std::string(60, 'x') + R"("})";
  ExpectRejected({{body, false, {"body is 74 bytes; at most 64 are allowed"}}}, limits);
  // The size check comes first: even garbage gets the size error, not a parse error.
  ExpectRejected({{std::string(65, '{'), false, {"at most 64"}}}, limits);
  EXPECT_TRUE(Completion(R"({"prompt": "x"})", limits).ok());
}

TEST(ParseCompletionRequest, ErrorsCarryTheirParameterIntoOpenAIsErrorObject) {
  const Result<CompletionRequest> result = Completion(R"({"prompt": "x", "max_tokens": -5})");
  ASSERT_FALSE(result.ok());
  const std::string json = ErrorJson(result.status());
  EXPECT_THAT(json, HasSubstr(R"("param":"max_tokens")"));
  EXPECT_THAT(json, HasSubstr(R"("type":"invalid_request_error")"));
  EXPECT_EQ(HttpStatusFor(result.status().code()), 400);
}

}  // namespace
}  // namespace bmad::http
