// The request fields that shape the prompt or what the answer repeats of it, end to end on a
// local cluster (bmad-coordinator and a bmad-worker replica under mpirun, 127.0.0.1,
// stories260K, whose GGUF has no chat template: ChatML): completions' and chat's echo, vLLM's
// continue_final_message and chat_template_kwargs; a reasoning parser's split of the answer.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/cluster_http.h"
#include "tests/support/local_cluster.h"
#include "tests/support/paths.h"
#include "tests/support/sse_completion.h"
#include "tests/worker/tokenizer/vocabulary_fixtures.h"

namespace bmad::testing {
namespace {

using json = nlohmann::json;

TEST(OpenAiPromptOptionsTest, CompletionsEchoStartsEachChoiceWithItsPrompt) {
  LocalCluster cluster({StoriesModelPath(), 1, 0});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  const int port = cluster.http_port();
  const std::string prompt = "Once upon a time";
  const std::string completion = Answer(port, Completion(prompt, 8, false)).text;
  ASSERT_FALSE(completion.empty());

  // Whole and streamed, n = 2: every choice's text is the prompt's, then the same completion.
  json echoed = Completion(prompt, 8, false);
  echoed["echo"] = true;
  echoed["n"] = 2;
  const json whole = ParsedOk(Post(port, "/v1/completions", echoed.dump()));
  ASSERT_EQ(whole["choices"].size(), 2u) << whole;
  for (const json& choice : whole["choices"]) EXPECT_EQ(choice["text"], prompt + completion) << whole;
  // Echo bills nothing more: the prompt once, the 8 generated tokens per choice.
  json plain = Completion(prompt, 8, false);
  plain["n"] = 2;
  EXPECT_EQ(whole["usage"], ParsedOk(Post(port, "/v1/completions", plain.dump()))["usage"]);
  echoed["stream"] = true;
  const StreamResult streamed = Stream(port, echoed);
  EXPECT_TRUE(streamed.done) << streamed.error;
  ASSERT_EQ(streamed.texts.size(), 2u);
  for (const auto& [index, text] : streamed.texts) EXPECT_EQ(text, prompt + completion) << index;

  // Token ids echo as the text they decode to (the BOS has none); a batch echoes each prompt.
  const json tokens = ParsedOk(Post(port, "/tokenize", json({{"prompt", prompt}}).dump()))["tokens"];
  json by_ids = {{"prompt", tokens}, {"max_tokens", 8}, {"temperature", 0}, {"echo", true}};
  EXPECT_EQ(ParsedOk(Post(port, "/v1/completions", by_ids.dump()))["choices"][0]["text"], prompt + completion);
  json batch = {{"prompt", {prompt, "The cat"}}, {"max_tokens", 4}, {"temperature", 0}, {"echo", true}};
  const json answered = ParsedOk(Post(port, "/v1/completions", batch.dump()));
  ASSERT_EQ(answered["choices"].size(), 2u) << answered;
  EXPECT_TRUE(answered["choices"][0]["text"].get<std::string>().starts_with(prompt + ",")) << answered;
  EXPECT_TRUE(answered["choices"][1]["text"].get<std::string>().starts_with("The cat")) << answered;

  // With logprobs the echoed prompt's own come in the whole response, not in a stream (as
  // vLLM; openai_prompt_logprobs_test.cc checks them).
  echoed["logprobs"] = 1;
  const HttpResult refused = Post(port, "/v1/completions", echoed.dump());
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_EQ(json::parse(refused.body)["error"]["param"], "echo") << refused.body;
}

TEST(OpenAiPromptOptionsTest, ContinueFinalMessageLeavesTheAnswerOpenAndEchoRepeatsIt) {
  LocalCluster cluster({StoriesModelPath(), 1, 0});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  const int port = cluster.http_port();
  const json messages = {{{"role", "user"}, {"content", "Tell me a story."}},
                         {{"role", "assistant"}, {"content", "Once upon a time"}}};
  json chat = {{"messages", messages}, {"continue_final_message", true}, {"max_tokens", 8}, {"temperature", 0}};
  // The prompt is the conversation cut right after the answer so far (ChatML, no <|im_end|>).
  const std::string open_text =
      "<|im_start|>user\nTell me a story.<|im_end|>\n<|im_start|>assistant\nOnce upon a time";
  const json counted = ParsedOk(Post(port, "/tokenize", chat.dump()));
  EXPECT_EQ(counted["tokens"], ParsedOk(Post(port, "/tokenize", json({{"prompt", open_text}}).dump()))["tokens"]);
  // The model continues that text: the same tokens as a completion of it.
  const std::string continuation = Answer(port, Completion(open_text, 8, false)).text;
  const json answer = ParsedOk(Post(port, "/v1/chat/completions", chat.dump()));
  EXPECT_EQ(answer["choices"][0]["message"]["content"], continuation) << answer;
  // With echo (vLLM's rule for chat) the reply starts with the final message's content.
  chat["echo"] = true;
  const json echoed = ParsedOk(Post(port, "/v1/chat/completions", chat.dump()));
  EXPECT_EQ(echoed["choices"][0]["message"]["content"], "Once upon a time" + continuation) << echoed;
  chat["stream"] = true;
  const StreamResult streamed = StreamCompletion(port, "/v1/chat/completions", chat);
  EXPECT_TRUE(streamed.done) << streamed.error;
  EXPECT_EQ(streamed.text, "Once upon a time" + continuation);
  // Asking for a new turn as well is a contradiction; continuing a user message is not what
  // the field is for.
  chat["stream"] = false;
  chat["add_generation_prompt"] = true;
  HttpResult r = Post(port, "/v1/chat/completions", chat.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("cannot both be true"), std::string::npos) << r.body;
  chat.erase("add_generation_prompt");
  chat["messages"] = {messages[0]};
  r = Post(port, "/v1/chat/completions", chat.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("has role 'user'"), std::string::npos) << r.body;
}

// model.reasoning_parser: the real model writes no think block, so its answer is content, as
// without the parser; a prefill that leaves "<think>" open makes the continuation reasoning.
TEST(OpenAiPromptOptionsTest, ReasoningParserSplitsTheThinkBlockOff) {
  LocalCluster cluster({StoriesModelPath(), 1, 0, {"model.reasoning_parser=qwen3"}});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  const int port = cluster.http_port();
  const json question = {{{"role", "user"}, {"content", "Tell me a story."}}};
  const std::string turn = "<|im_start|>user\nTell me a story.<|im_end|>\n<|im_start|>assistant\n";
  const std::string answer = Answer(port, Completion(turn, 8, false)).text;
  ASSERT_FALSE(answer.empty());
  json chat = {{"messages", question}, {"max_tokens", 8}, {"temperature", 0}};
  const json plain = ParsedOk(Post(port, "/v1/chat/completions", chat.dump()));
  EXPECT_EQ(plain["choices"][0]["message"]["content"], answer) << plain;
  EXPECT_TRUE(plain["choices"][0]["message"]["reasoning"].is_null()) << plain;
  EXPECT_TRUE(plain["choices"][0]["message"]["reasoning_content"].is_null()) << plain;

  // The prefill opens the block: what the model adds is reasoning, whole and streamed.
  const json prefilled = {question[0], {{"role", "assistant"}, {"content", "<think>\nOnce upon a time"}}};
  const std::string continuation = Answer(port, Completion(turn + "<think>\nOnce upon a time", 8, false)).text;
  ASSERT_FALSE(continuation.empty());
  chat = {{"messages", prefilled}, {"continue_final_message", true}, {"max_tokens", 8}, {"temperature", 0}};
  const json thinking = ParsedOk(Post(port, "/v1/chat/completions", chat.dump()));
  EXPECT_EQ(thinking["choices"][0]["message"]["reasoning"], continuation) << thinking;
  EXPECT_EQ(thinking["choices"][0]["message"]["content"], "") << thinking;
  chat["stream"] = true;
  const StreamResult streamed = StreamCompletion(port, "/v1/chat/completions", chat);
  EXPECT_TRUE(streamed.done) << streamed.error;
  ASSERT_EQ(streamed.reasonings.count(0), 1u);
  EXPECT_EQ(streamed.reasonings.at(0), continuation);
  EXPECT_TRUE(streamed.reasoning_content_alike);
  EXPECT_EQ(streamed.text, "");
  // include_reasoning false: the reasoning is left out (null, as when there is none).
  chat["stream"] = false;
  chat["include_reasoning"] = false;
  const json without = ParsedOk(Post(port, "/v1/chat/completions", chat.dump()));
  EXPECT_TRUE(without["choices"][0]["message"]["reasoning"].is_null()) << without;
  EXPECT_EQ(without["choices"][0]["message"]["content"], "") << without;
}

// A constrained answer of a reasoning model reasons first: stories260K with "<think>" and
// "</think>" as tokens 495 and 496 (user-defined, as in R1's GGUFs), under R1's format, whose
// generation prompt opens the block. Until the block's end the replica applies no format, so
// the output is the free one; a logit_bias that makes "</think>" the model's first choice closes
// the block at once, and what follows is the JSON object.
TEST(OpenAiPromptOptionsTest, AConstrainedAnswerReasonsFirstUnderAReasoningParser) {
  const std::string model = MakeTempDir("think-model") + "/stories260K.gguf";
  {
    auto base = tokenizer::testing::OpenSharedModel(tokenizer::testing::kStoriesFile);
    ASSERT_TRUE(base.ok()) << base.status().ToString();
    const Status written = tokenizer::testing::WriteRewrittenModel(
        **base, {{495, "<think>", tokenizer::TokenType::kUserDefined}, {496, "</think>", tokenizer::TokenType::kUserDefined}},
        model);
    ASSERT_TRUE(written.ok()) << written.ToString();
  }
  LocalCluster cluster({model, 1, 0, {"model.reasoning_parser=deepseek_r1", "model.chat_template=deepseek-r1"}});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  const int port = cluster.http_port();
  const json question = {{{"role", "user"}, {"content", "Tell me a story."}}};
  json chat = {{"messages", question}, {"max_tokens", 12}, {"temperature", 0}};
  const json free_answer = ParsedOk(Post(port, "/v1/chat/completions", chat.dump()));
  const std::string thought = free_answer["choices"][0]["message"]["reasoning"].get<std::string>();
  ASSERT_FALSE(thought.empty()) << free_answer;
  ASSERT_EQ(thought.find("</think>"), std::string::npos) << "the case needs a block left open: " << free_answer;

  // The same answer under JSON mode: the block never closes, so no format applied.
  chat["response_format"] = {{"type", "json_object"}};
  const json gated = ParsedOk(Post(port, "/v1/chat/completions", chat.dump()));
  EXPECT_EQ(gated["choices"][0]["message"]["reasoning"], thought) << gated;
  EXPECT_EQ(gated["choices"][0]["message"]["content"], "") << gated;
  EXPECT_EQ(gated["choices"][0]["finish_reason"], "length") << gated;

  // "</think>" first: the block closes, and the rest is formatted.
  chat["logit_bias"] = {{"496", 100}};
  chat["max_tokens"] = 24;
  const json formatted = ParsedOk(Post(port, "/v1/chat/completions", chat.dump()));
  EXPECT_TRUE(formatted["choices"][0]["message"]["reasoning"].is_null()) << formatted;
  const std::string content = formatted["choices"][0]["message"]["content"].get<std::string>();
  EXPECT_TRUE(content.starts_with("{")) << formatted;
  chat["stream"] = true;
  const StreamResult streamed = StreamCompletion(port, "/v1/chat/completions", chat);
  EXPECT_TRUE(streamed.done) << streamed.error;
  EXPECT_EQ(streamed.text, content);
  EXPECT_TRUE(streamed.reasonings.empty());
}

TEST(OpenAiPromptOptionsTest, ChatTemplateKwargsTakeEnableThinkingOnly) {
  LocalCluster cluster({StoriesModelPath(), 1, 0});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  const int port = cluster.http_port();
  const json messages = {{{"role", "user"}, {"content", "Hi"}}};
  // This model's template has no thinking switch: the prompt is unchanged, as a Jinja template
  // that never reads the variable leaves it.
  json off = {{"messages", messages}, {"chat_template_kwargs", {{"enable_thinking", false}}}};
  EXPECT_EQ(ParsedOk(Post(port, "/tokenize", off.dump()))["tokens"],
            ParsedOk(Post(port, "/tokenize", json({{"messages", messages}}).dump()))["tokens"]);
  off["max_tokens"] = 2;
  EXPECT_EQ(Post(port, "/v1/chat/completions", off.dump()).status, 200);
  // Any other variable is refused by name: a built-in template cannot read it.
  json other = {{"messages", messages}, {"chat_template_kwargs", {{"tools", json::array()}}}};
  const HttpResult r = Post(port, "/v1/chat/completions", other.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["param"], "chat_template_kwargs.tools") << r.body;
}

// vLLM's cache_salt: a prompt finds in the prefix cache only what requests with its own salt
// left there (usage.prompt_tokens_details.cached_tokens says how much), on one replica.
TEST(OpenAiPromptOptionsTest, CacheSaltKeepsEachSaltsPrefixCacheApart) {
  LocalCluster cluster({StoriesModelPath(), 1, 0});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  const int port = cluster.http_port();
  std::vector<int> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(10 + i);  // two full blocks of 16 and 8 tokens
  const auto cached = [&](const json& salt) {
    json body = {{"prompt", prompt}, {"max_tokens", 1}, {"temperature", 0}};
    if (!salt.is_null()) body["cache_salt"] = salt;
    const json answer = ParsedOk(Post(port, "/v1/completions", body.dump()));
    return answer["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
  };
  EXPECT_EQ(cached("tenant-a"), 0);
  EXPECT_EQ(cached("tenant-a"), 32);  // its own blocks
  EXPECT_EQ(cached("tenant-b"), 0);   // the same prompt under another salt
  EXPECT_EQ(cached(nullptr), 0);      // or none
  EXPECT_EQ(cached(nullptr), 32);
  EXPECT_EQ(cached("tenant-b"), 32);
  const HttpResult empty = Post(port, "/v1/completions", json({{"prompt", "x"}, {"cache_salt", ""}}).dump());
  EXPECT_EQ(empty.status, 400) << empty.body;
}

// vLLM's return_token_ids: the prompt's ids as the model saw them (as /tokenize counts them) and
// the ids generated, whole and streamed, on both endpoints.
TEST(OpenAiPromptOptionsTest, ReturnTokenIdsGivesThePromptsAndTheGeneratedIds) {
  LocalCluster cluster({StoriesModelPath(), 1, 0});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  const int port = cluster.http_port();
  const std::string prompt = "Once upon a time";
  const json tokenized = ParsedOk(Post(port, "/tokenize", json({{"prompt", prompt}}).dump()))["tokens"];
  // The reference: the generated ids as logprobs name them.
  json body = Completion(prompt, 8, false);
  body["logprobs"] = 0;
  body["return_tokens_as_token_ids"] = true;
  body["return_token_ids"] = true;
  const json whole = ParsedOk(Post(port, "/v1/completions", body.dump()));
  const json& choice = whole["choices"][0];
  std::vector<int64_t> generated;
  for (const json& t : choice["logprobs"]["tokens"]) generated.push_back(std::stoll(t.get<std::string>().substr(9)));
  ASSERT_EQ(generated.size(), 8u) << whole;
  EXPECT_EQ(choice["token_ids"], json(generated)) << whole;
  EXPECT_EQ(choice["prompt_token_ids"], tokenized) << whole;

  // Streamed: the same ids over the chunks, the prompt's once, in the first.
  body["stream"] = true;
  const SseCompletion streamed = StreamCompletion(port, "/v1/completions", body);
  EXPECT_TRUE(streamed.done) << streamed.error;
  EXPECT_EQ(streamed.token_ids.at(0), generated);
  ASSERT_EQ(streamed.prompt_token_ids.at(0).size(), 1u);
  EXPECT_EQ(streamed.prompt_token_ids.at(0)[0], tokenized);

  // Chat: the prompt's at the top (the template's text tokenized), the choices' in each.
  const json messages = {{{"role", "user"}, {"content", "Tell me a story."}}};
  json chat = {{"messages", messages}, {"max_tokens", 6}, {"temperature", 0}, {"return_token_ids", true}, {"n", 2}};
  const json chat_whole = ParsedOk(Post(port, "/v1/chat/completions", chat.dump()));
  const json chat_prompt = ParsedOk(Post(port, "/tokenize", json({{"messages", messages}}).dump()))["tokens"];
  EXPECT_EQ(chat_whole["prompt_token_ids"], chat_prompt) << chat_whole;
  ASSERT_EQ(chat_whole["choices"].size(), 2u);
  for (const json& c : chat_whole["choices"]) {
    EXPECT_EQ(c["token_ids"].size(), chat_whole["usage"]["completion_tokens"].get<size_t>() / 2) << chat_whole;
    EXPECT_EQ(c["token_ids"], chat_whole["choices"][0]["token_ids"]);  // greedy: the same
  }
  chat["stream"] = true;
  const SseCompletion chat_streamed = StreamCompletion(port, "/v1/chat/completions", chat);
  EXPECT_TRUE(chat_streamed.done) << chat_streamed.error;
  for (int64_t i : {0, 1}) {
    EXPECT_EQ(json(chat_streamed.token_ids.at(i)), chat_whole["choices"][0]["token_ids"]) << i;
    ASSERT_EQ(chat_streamed.prompt_token_ids.at(i).size(), 1u) << i;  // in its role chunk only
    EXPECT_EQ(chat_streamed.prompt_token_ids.at(i)[0], chat_prompt);
  }
}

}  // namespace
}  // namespace bmad::testing
