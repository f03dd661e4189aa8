// A reasoning parser (model.reasoning_parser) on the chat endpoint: a replica's chunks, cut
// anywhere, reach the client as "reasoning" and "content", whole and streamed. An in-process
// coordinator on 127.0.0.1 with a fake replica, so the answer's text is the test's own.
#include <gtest/gtest.h>

#include <httplib.h>

#include <chrono>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/coordinator/server/chat_relay_fixture.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"
#include "tests/worker/tokenizer/vocabulary_fixtures.h"

namespace bmad::coord {
namespace {

using namespace std::chrono_literals;
using ReplyJson = nlohmann::json;

// The fixture under a format whose generation prompt opens the block (DeepSeek-R1's).
class ReasoningRelayTest : public ChatRelayTest {
 protected:
  void Configure(ServerConfig& c) override {
    c.model.chat_template = chat_template_;
    c.model.reasoning_parser = reasoning_parser_;
  }

  // ChatML (no block in its generation prompt) under the qwen3 parser, which reads the prompt.
  void ServeChatMLUnderQwen3() {
    chat_template_ = "chatml";
    reasoning_parser_ = "qwen3";
  }

  static ReplyJson Chat(bool stream) {
    return {{"messages", {{{"role", "user"}, {"content", "What is 2+2?"}}}}, {"max_tokens", 16}, {"stream", stream}};
  }

  std::string chat_template_ = "deepseek-r1";
  std::string reasoning_parser_ = "deepseek_r1";
};

// The pieces of the answer "Let me think.</think>\n\nIt is 4.", the closing marker cut in two.
const std::vector<std::string> kThoughtThenAnswer = {"Let me th", "ink.</th", "ink>\n\nIt", " is 4."};

// A stream's deltas: every "reasoning" joined, every "content" joined, and whether each delta
// with reasoning had "reasoning_content" alike.
struct ReasoningDeltas {
  std::string reasoning, content;
  bool alike = true;
  int events = 0;
};

ReasoningDeltas ReadReasoningDeltas(const std::string& body) {
  ReasoningDeltas s;
  size_t at = 0;
  while ((at = body.find("data: {", at)) != std::string::npos) {
    const size_t end = body.find("\n\n", at);
    const ReplyJson chunk = ReplyJson::parse(body.substr(at + 6, end - at - 6));
    at = end;
    ++s.events;
    if (chunk["choices"].empty()) continue;
    const ReplyJson& delta = chunk["choices"][0]["delta"];
    if (delta.contains("reasoning")) {
      s.reasoning += delta["reasoning"].get<std::string>();
      s.alike = s.alike && delta["reasoning_content"] == delta["reasoning"];
    }
    if (delta.contains("content")) s.content += delta["content"].get<std::string>();
  }
  return s;
}

TEST_F(ReasoningRelayTest, WholeAnswerHasItsReasoningApart) {
  const ReplyJson response = ReplyJson::parse(Answered(Chat(false), kThoughtThenAnswer));
  const ReplyJson& message = response["choices"][0]["message"];
  EXPECT_EQ(message["reasoning"], "Let me think.");
  EXPECT_EQ(message["reasoning_content"], "Let me think.");
  EXPECT_EQ(message["content"], "\n\nIt is 4.");
  EXPECT_EQ(response["usage"]["completion_tokens"], 4);
}

TEST_F(ReasoningRelayTest, StreamedDeltasCarryReasoningThenContent) {
  const std::string body = Answered(Chat(true), kThoughtThenAnswer);
  const ReasoningDeltas s = ReadReasoningDeltas(body);
  EXPECT_EQ(s.reasoning, "Let me think.");
  EXPECT_EQ(s.content, "\n\nIt is 4.");
  EXPECT_TRUE(s.alike);
  EXPECT_EQ(body.find("</th"), std::string::npos) << "a marker's part reached the client: " << body;
  EXPECT_NE(body.find("data: [DONE]"), std::string::npos);
}

TEST_F(ReasoningRelayTest, AnAnswerCutWhileThinkingIsAllReasoning) {
  const ReplyJson whole = ReplyJson::parse(Answered(Chat(false), {"Hmm, ", "four </thi"}));
  EXPECT_EQ(whole["choices"][0]["message"]["reasoning"], "Hmm, four </thi");
  EXPECT_EQ(whole["choices"][0]["message"]["content"], "");
  const ReasoningDeltas s = ReadReasoningDeltas(Answered(Chat(true), {"Hmm, ", "four </thi"}));
  EXPECT_EQ(s.reasoning, "Hmm, four </thi");  // the held-back end comes with the finish
  EXPECT_EQ(s.content, "");
}

TEST_F(ReasoningRelayTest, IncludeReasoningFalseLeavesItOut) {
  ReplyJson body = Chat(false);
  body["include_reasoning"] = false;
  const ReplyJson response = ReplyJson::parse(Answered(body, kThoughtThenAnswer));
  const ReplyJson& message = response["choices"][0]["message"];
  EXPECT_TRUE(message["reasoning"].is_null());
  EXPECT_TRUE(message["reasoning_content"].is_null());
  EXPECT_EQ(message["content"], "\n\nIt is 4.");

  body["stream"] = true;
  const std::string streamed = Answered(body, kThoughtThenAnswer);
  const ReasoningDeltas s = ReadReasoningDeltas(streamed);
  EXPECT_EQ(s.reasoning, "");
  EXPECT_EQ(s.content, "\n\nIt is 4.");
  EXPECT_EQ(streamed.find("Let me"), std::string::npos) << streamed;
}

TEST_F(ReasoningRelayTest, AConstrainedAnswerIsAllContent) {
  // JSON from the first token: no block to split off, whatever its text.
  ReplyJson body = Chat(false);
  body["response_format"] = {{"type", "json_object"}};
  const ReplyJson response = ReplyJson::parse(Answered(body, {"{\"a\": \"</think>\"", "}"}));
  const ReplyJson& message = response["choices"][0]["message"];
  EXPECT_EQ(message["content"], "{\"a\": \"</think>\"}");
  EXPECT_TRUE(message["reasoning"].is_null());  // under a parser every message has the keys
}

TEST_F(ReasoningRelayTest, ChatEchoStaysContent) {
  // continue_final_message with echo: the prefill is content; what the model adds is read as
  // the answer (the prefill left no block open).
  ReplyJson body = {{"messages",
                {{{"role", "user"}, {"content", "Q"}}, {{"role", "assistant"}, {"content", "Sure: "}}}},
               {"continue_final_message", true},
               {"echo", true},
               {"max_tokens", 8}};
  const ReplyJson response = ReplyJson::parse(Answered(body, {"<think>x</think>", "4"}));
  EXPECT_EQ(response["choices"][0]["message"]["content"], "Sure: 4");
  EXPECT_EQ(response["choices"][0]["message"]["reasoning"], "x");
}

// A vocabulary with the block's markers as tokens (stories260K's, "<think>" and "</think>" at
// 495 and 496, user-defined as in Qwen3's and R1's GGUFs): a constrained answer may reason
// first, the replica told where its format starts.
constexpr uint32_t kThinkOpenId = 495;
constexpr uint32_t kThinkCloseId = 496;

// Such a model, with `chat_template` as its own when not empty.
std::string ThinkVocabularyModel(const std::string& chat_template = "") {
  // The file name is the served model's id, which the fake replicas register as.
  const std::string file = bmad::testing::MakeTempDir("think-vocabulary") + "/stories260K.gguf";
  auto base = tokenizer::testing::OpenSharedModel(tokenizer::testing::kStoriesFile);
  EXPECT_TRUE(base.ok()) << base.status().ToString();
  const Status written = tokenizer::testing::WriteRewrittenModel(
      **base,
      {{kThinkOpenId, "<think>", tokenizer::TokenType::kUserDefined},
       {kThinkCloseId, "</think>", tokenizer::TokenType::kUserDefined}},
      file, [&](gguf::GgufWriter& w) {
        if (!chat_template.empty()) w.SetString("tokenizer.chat_template", chat_template);
      });
  EXPECT_TRUE(written.ok()) << written.ToString();
  return file;
}

class ReasoningGateRelayTest : public ReasoningRelayTest {
 protected:
  void Configure(ServerConfig& c) override {
    ReasoningRelayTest::Configure(c);
    c.model.path = ThinkVocabularyModel();
  }
};

TEST_F(ReasoningGateRelayTest, AConstrainedAnswerReasonsFirstThenIsFormatted) {
  ReplyJson body = Chat(false);
  body["response_format"] = {{"type", "json_object"}};
  // R1's generation prompt opened the block: the format waits for its end, from the start.
  const ReplyJson response = ReplyJson::parse(Answered(body, {"Two and two.", "</think>", "{\"a\": 4}"}));
  ASSERT_TRUE(last_assign_.has_value());
  EXPECT_EQ(last_assign_->sampling.reasoning_end_token, static_cast<int32_t>(kThinkCloseId));
  EXPECT_EQ(last_assign_->sampling.reasoning_start_token, -1);
  const ReplyJson& message = response["choices"][0]["message"];
  EXPECT_EQ(message["reasoning"], "Two and two.");
  EXPECT_EQ(message["content"], "{\"a\": 4}");

  // Streamed alike.
  body["stream"] = true;
  const ReasoningDeltas s = ReadReasoningDeltas(Answered(body, {"Two", " and two.</think>", "{}"}));
  EXPECT_EQ(s.reasoning, "Two and two.");
  EXPECT_EQ(s.content, "{}");
}

TEST_F(ReasoningGateRelayTest, AnUnconstrainedAnswerHasNoGate) {
  const ReplyJson response = ReplyJson::parse(Answered(Chat(false), {"r</think>c"}));
  ASSERT_TRUE(last_assign_.has_value());
  EXPECT_EQ(last_assign_->sampling.reasoning_end_token, -1);
  EXPECT_EQ(response["choices"][0]["message"]["reasoning"], "r");
}

TEST_F(ReasoningGateRelayTest, AStopTokenThatEndsTheBlockIsRefused) {
  // JSON after the block, but the block's end would end the output: no format could begin.
  ReplyJson body = Chat(false);
  body["response_format"] = {{"type", "json_object"}};
  body["stop_token_ids"] = {kThinkCloseId};
  httplib::Client http("127.0.0.1", server_->http_port());
  auto res = http.Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400) << res->body;
  EXPECT_NE(res->body.find("'stop_token_ids' holds the token that ends the model's reasoning (496)"),
            std::string::npos)
      << res->body;
}

class ReasoningGateChatMLRelayTest : public ReasoningGateRelayTest {
 protected:
  ReasoningGateChatMLRelayTest() { ServeChatMLUnderQwen3(); }
};

TEST_F(ReasoningGateChatMLRelayTest, TheFirstTokenMayOpenTheBlock) {
  ReplyJson body = Chat(false);
  body["response_format"] = {{"type", "json_object"}};
  const ReplyJson thought = ReplyJson::parse(Answered(body, {"<think>", "hm", "</think>", "{}"}));
  ASSERT_TRUE(last_assign_.has_value());
  EXPECT_EQ(last_assign_->sampling.reasoning_end_token, static_cast<int32_t>(kThinkCloseId));
  EXPECT_EQ(last_assign_->sampling.reasoning_start_token, static_cast<int32_t>(kThinkOpenId));
  EXPECT_EQ(thought["choices"][0]["message"]["reasoning"], "hm");
  EXPECT_EQ(thought["choices"][0]["message"]["content"], "{}");
  // The replica let the format start at once: all content.
  const ReplyJson direct = ReplyJson::parse(Answered(body, {"{}"}));
  EXPECT_TRUE(direct["choices"][0]["message"]["reasoning"].is_null());
  EXPECT_EQ(direct["choices"][0]["message"]["content"], "{}");
}

// ChatML without a block in the generation prompt (Qwen3's hybrid models): the answer opens
// one itself, or is all content.
class ReasoningRelayChatMLTest : public ReasoningRelayTest {
 protected:
  ReasoningRelayChatMLTest() { ServeChatMLUnderQwen3(); }
};

TEST_F(ReasoningRelayChatMLTest, AnAnswerThatOpensTheBlockItself) {
  const ReplyJson response = ReplyJson::parse(Answered(Chat(false), {"<thi", "nk>\nr\n</think>\n\n", "c"}));
  EXPECT_EQ(response["choices"][0]["message"]["reasoning"], "\nr\n");
  EXPECT_EQ(response["choices"][0]["message"]["content"], "\n\nc");
}

TEST_F(ReasoningRelayChatMLTest, AnAnswerWithoutABlockIsContentWithNullReasoning) {
  const ReplyJson response = ReplyJson::parse(Answered(Chat(false), {"Just ", "four."}));
  EXPECT_TRUE(response["choices"][0]["message"]["reasoning"].is_null());
  EXPECT_TRUE(response["choices"][0]["message"]["reasoning_content"].is_null());
  EXPECT_EQ(response["choices"][0]["message"]["content"], "Just four.");
  const ReasoningDeltas s = ReadReasoningDeltas(Answered(Chat(true), {"Just ", "four."}));
  EXPECT_EQ(s.reasoning, "");
  EXPECT_EQ(s.content, "Just four.");
}

// vLLM's deepseek_r1 parser takes every answer to start inside the block, whatever the template.
class ReasoningRelayR1OnChatMLTest : public ReasoningRelayTest {
 protected:
  ReasoningRelayR1OnChatMLTest() { chat_template_ = "chatml"; }
};

TEST_F(ReasoningRelayR1OnChatMLTest, TextBeforeTheBlocksEndIsReasoning) {
  const ReplyJson response = ReplyJson::parse(Answered(Chat(false), {"abc</think>", "xyz"}));
  EXPECT_EQ(response["choices"][0]["message"]["reasoning"], "abc");
  EXPECT_EQ(response["choices"][0]["message"]["content"], "xyz");
}

// A Qwen3 hybrid template (its switch, enable_thinking) under deepseek_r1: every answer starts in
// the block, unless the request turned thinking off, whose prompt then holds an empty one.
constexpr const char* kHybridTemplate =
    "{%- set ns = namespace(last_query_index=messages|length - 1) %}{{- '<|im_start|>' }}"
    "{%- if '</think>' in content %}{%- endif %}{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}";

class ReasoningGateHybridRelayTest : public ReasoningRelayTest {
 protected:
  void Configure(ServerConfig& c) override {
    ReasoningRelayTest::Configure(c);
    c.model.chat_template = "";  // the model's own
    c.model.path = ThinkVocabularyModel(kHybridTemplate);
  }
};

TEST_F(ReasoningGateHybridRelayTest, ThinkingTurnedOffLeavesNoBlockToWaitFor) {
  ReplyJson body = Chat(false);
  body["response_format"] = {{"type", "json_object"}};
  const ReplyJson thought = ReplyJson::parse(Answered(body, {"r", "</think>", "{}"}));
  ASSERT_TRUE(last_assign_.has_value());
  EXPECT_EQ(last_assign_->sampling.reasoning_end_token, static_cast<int32_t>(kThinkCloseId));
  EXPECT_EQ(last_assign_->sampling.reasoning_start_token, -1);  // deepseek_r1: open from the start
  EXPECT_EQ(thought["choices"][0]["message"]["reasoning"], "r");

  body["chat_template_kwargs"] = {{"enable_thinking", false}};
  const ReplyJson direct = ReplyJson::parse(Answered(body, {"{}"}));
  ASSERT_TRUE(last_assign_.has_value());
  EXPECT_EQ(last_assign_->sampling.reasoning_end_token, -1);  // the format holds from the start
  EXPECT_EQ(last_assign_->sampling.reasoning_start_token, -1);
  EXPECT_TRUE(direct["choices"][0]["message"]["reasoning"].is_null());
  EXPECT_EQ(direct["choices"][0]["message"]["content"], "{}");
  // Free text with thinking off: content, unless the model opens a block after all.
  body.erase("response_format");
  const ReplyJson plain = ReplyJson::parse(Answered(body, {"Hi."}));
  EXPECT_EQ(plain["choices"][0]["message"]["content"], "Hi.");
}

}  // namespace
}  // namespace bmad::coord
