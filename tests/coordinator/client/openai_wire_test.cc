#include "coordinator/client/openai_wire.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace bmad::client {
namespace {

using nlohmann::json;

TEST(OpenAiWireTest, RequestBodiesAskForAStreamOfExactlyMaxTokens) {
  const json completions = json::parse(CompletionsRequestBody("m", {101, 202}, 7));
  EXPECT_EQ(completions["model"], "m");
  EXPECT_EQ(completions["prompt"], json::array({101, 202}));
  EXPECT_EQ(completions["max_tokens"], 7);
  EXPECT_EQ(completions["temperature"], 0);
  EXPECT_EQ(completions["ignore_eos"], true);
  EXPECT_EQ(completions["stream"], true);
  EXPECT_EQ(completions["stream_options"]["include_usage"], true);

  const json chat = json::parse(ChatRequestBody("m", "say \"hi\"", 3));
  EXPECT_EQ(chat["messages"][0]["role"], "user");
  EXPECT_EQ(chat["messages"][0]["content"], "say \"hi\"");
  EXPECT_EQ(chat["max_tokens"], 3);
  EXPECT_EQ(chat["stream"], true);
  EXPECT_EQ(ApiPath(OpenAiApi::kChat), "/v1/chat/completions");
  EXPECT_EQ(ApiPath(OpenAiApi::kCompletions), "/v1/completions");
}

TEST(OpenAiWireTest, ParsesCompletionAndChatChunks) {
  auto text = ParseStreamData(R"({"choices":[{"index":0,"text":"Hel","finish_reason":null}]})");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->content, "Hel");
  EXPECT_TRUE(text->finish_reason.empty());
  EXPECT_FALSE(text->has_usage);

  auto chat = ParseStreamData(R"({"choices":[{"delta":{"role":"assistant","content":"lo"}}]})");
  ASSERT_TRUE(chat.ok());
  EXPECT_EQ(chat->content, "lo");

  auto role_only = ParseStreamData(R"({"choices":[{"delta":{"role":"assistant"}}]})");
  ASSERT_TRUE(role_only.ok());
  EXPECT_TRUE(role_only->content.empty()) << "no content, no token";

  auto reasoning = ParseStreamData(R"({"choices":[{"delta":{"reasoning_content":"hmm"}}]})");
  EXPECT_EQ(reasoning->content, "hmm");

  auto last = ParseStreamData(
      R"({"choices":[{"text":"","finish_reason":"length"}],"usage":{"prompt_tokens":12,"completion_tokens":5}})");
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->finish_reason, "length");
  EXPECT_TRUE(last->has_usage);
  EXPECT_EQ(last->prompt_tokens, 12);
  EXPECT_EQ(last->completion_tokens, 5);

  auto usage_only = ParseStreamData(R"({"choices":[],"usage":{"completion_tokens":-3}})");
  ASSERT_TRUE(usage_only.ok());
  EXPECT_EQ(usage_only->completion_tokens, 0) << "negative counts are clamped";

  auto done = ParseStreamData(" [DONE] ");
  ASSERT_TRUE(done.ok());
  EXPECT_TRUE(done->done);
}

TEST(OpenAiWireTest, MalformedPayloadsAndErrorEvents) {
  for (const char* bad : {"{\"choices\":", "not json", "[1,2]", "42", ""}) {
    EXPECT_EQ(ParseStreamData(bad).status().code(), StatusCode::kDataLoss) << bad;
  }
  auto error = ParseStreamData(R"({"error":{"message":"out of memory","code":500}})");
  EXPECT_EQ(error.status().code(), StatusCode::kInternal);
  EXPECT_EQ(error.status().message(), "out of memory");
  EXPECT_EQ(ParseStreamData(R"({"object":"error","message":"bad"})").status().message(), "bad");
  // An "error" member that says there is none, as the OpenAI SDK reads it.
  for (const char* none : {R"({"choices":[{"text":"a"}],"error":null})", R"({"choices":[{"text":"a"}],"error":false})",
                           R"({"choices":[{"text":"a"}],"error":""})", R"({"choices":[{"text":"a"}],"error":{}})"}) {
    auto fine = ParseStreamData(none);
    ASSERT_TRUE(fine.ok()) << none << ": " << fine.status().ToString();
    EXPECT_EQ(fine->content, "a") << none;
  }
  // Wrong types are ignored, not trusted.
  auto odd = ParseStreamData(R"({"choices":[{"text":5,"delta":"x"}],"usage":"many"})");
  ASSERT_TRUE(odd.ok());
  EXPECT_TRUE(odd->content.empty());
  EXPECT_FALSE(odd->has_usage);
}

TEST(OpenAiWireTest, ModelListsAndErrorBodies) {
  EXPECT_EQ(FirstModelId(R"({"object":"list","data":[{"id":"llama"},{"id":"other"}]})").value(),
            "llama");
  EXPECT_EQ(FirstModelId(R"({"data":[]})").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(FirstModelId("<html>").status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(FirstModelId(R"({"data":[{"name":"x"}]})").status().code(), StatusCode::kDataLoss);

  EXPECT_EQ(ErrorBodyMessage(R"({"error":{"message":"rate limited","type":"x"}})"), "rate limited");
  EXPECT_EQ(ErrorBodyMessage(R"({"error":"plain"})"), "plain");
  EXPECT_EQ(ErrorBodyMessage(R"({"detail":"Not Found"})"), "Not Found");
  EXPECT_EQ(ErrorBodyMessage(R"({"code":500,"message":"slot failed"})"), "slot failed");
  EXPECT_EQ(ErrorBodyMessage("Service Unavailable\nmore"), "Service Unavailable");
  EXPECT_EQ(ErrorBodyMessage(""), "(empty body)");
  EXPECT_EQ(ErrorBodyMessage(std::string(1000, 'x')).size(), 203u);
}

}  // namespace
}  // namespace bmad::client
