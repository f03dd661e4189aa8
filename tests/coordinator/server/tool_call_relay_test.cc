// Tool calling on the chat endpoint: the request's tools reach the prompt, and a replica's
// chunks, cut anywhere, reach the client as "tool_calls" beside the content, whole and streamed,
// in each tool_choice's format. An in-process coordinator on 127.0.0.1 with a fake replica, so
// the answer's text is the test's own.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/coordinator/server/chat_relay_fixture.h"
#include "tests/support/paths.h"
#include "worker/model/gguf/gguf_file.h"
#include "worker/model/tokenizer/tokenizer.h"

namespace bmad::coord {
namespace {

class ToolCallRelayTest : public ChatRelayTest {
 protected:
  void Configure(ServerConfig& c) override {
    // The Llama-2 vocabulary (stories260K's 512 tokens spell the tools' text byte by byte, past
    // its 512-token context).
    c.model.path = testing::SharedModelsDir() + "/llama-2-tiny-random.gguf";
    c.model.tool_call_parser = tool_call_parser_;
    replica_model_ = "llama-2-tiny-random";
  }

  // A question with two tools; `extra` adds fields.
  static ReplyJson ToolsBody(bool stream, const ReplyJson& extra = ReplyJson::object()) {
    ReplyJson body = {
        {"messages", {{{"role", "user"}, {"content", "Weather in Oslo?"}}}},
        {"max_tokens", 64},
        {"stream", stream},
        {"tools",
         {{{"type", "function"},
           {"function",
            {{"name", "get_weather"},
             {"parameters",
              {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}, {"required", {"city"}}}}}}},
          {{"type", "function"}, {"function", {{"name", "get_time"}}}}}}};
    body.update(extra);
    return body;
  }

  // The prompt the replica was sent, as text.
  std::string PromptText() {
    auto file = gguf::GgufFile::Open(testing::SharedModelsDir() + "/llama-2-tiny-random.gguf");
    EXPECT_TRUE(file.ok());
    auto tok = tokenizer::LoadTokenizer(**file);
    EXPECT_TRUE(tok.ok());
    if (!last_assign_ || !tok.ok()) return "";
    const std::vector<int32_t> ids(last_assign_->prompt_tokens.begin(), last_assign_->prompt_tokens.end());
    return tok->Decode(ids);
  }

  std::string tool_call_parser_ = "hermes";
};

// An answer with a sentence and a call, the markers cut across chunks.
const std::vector<std::string> kSentenceThenCall = {
    "I will check.\n<tool_ca", "ll>\n{\"name\": \"get_weather\", \"argu",
    "ments\": {\"city\":\"Oslo\"}}\n</tool_call>"};

// A stream's deltas: the content joined, and each call's pieces joined by index.
struct StreamedCalls {
  std::string content;
  std::vector<ReplyJson> calls;  // {"id", "type", "function": {"name", "arguments"}}
  std::string finish_reason;
};

StreamedCalls ReadStreamedCalls(const std::string& body) {
  StreamedCalls s;
  size_t at = 0;
  while ((at = body.find("data: {", at)) != std::string::npos) {
    const size_t end = body.find("\n\n", at);
    const nlohmann::json chunk = nlohmann::json::parse(body.substr(at + 6, end - at - 6));
    at = end;
    if (chunk["choices"].empty()) continue;
    const nlohmann::json& choice = chunk["choices"][0];
    if (choice["finish_reason"].is_string()) s.finish_reason = choice["finish_reason"];
    const nlohmann::json& delta = choice["delta"];
    if (delta.contains("content") && delta["content"].is_string()) s.content += delta["content"].get<std::string>();
    for (const nlohmann::json& piece : delta.value("tool_calls", nlohmann::json::array())) {
      const size_t index = piece["index"];
      if (index == s.calls.size()) {
        EXPECT_TRUE(piece.contains("id")) << "a call's first piece carries its id";
        s.calls.push_back(piece);
        s.calls.back().erase("index");
      } else {
        EXPECT_FALSE(piece.contains("id"));
        s.calls.at(index)["function"]["arguments"] =
            s.calls.at(index)["function"]["arguments"].get<std::string>() + piece["function"]["arguments"].get<std::string>();
      }
    }
  }
  return s;
}

TEST_F(ToolCallRelayTest, TheToolsReachThePrompt) {
  const nlohmann::json response = nlohmann::json::parse(Answered(ToolsBody(false), {"Sunny."}));
  const std::string prompt = PromptText();
  EXPECT_NE(prompt.find("# Tools\n\nYou may call one or more functions"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find(R"({"type": "function", "function": {"name": "get_time", "description": null, "parameters": null}})"),
            std::string::npos)
      << prompt;
  // No call in the answer: content as it is, no tool_calls, finish "stop".
  EXPECT_EQ(response["choices"][0]["message"]["content"], "Sunny.");
  EXPECT_FALSE(response["choices"][0]["message"].contains("tool_calls"));
  EXPECT_EQ(response["choices"][0]["finish_reason"], "stop");
}

TEST_F(ToolCallRelayTest, WholeAnswerHasItsCallsApart) {
  const nlohmann::json response = nlohmann::json::parse(Answered(ToolsBody(false), kSentenceThenCall));
  const nlohmann::json& choice = response["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"]["content"], "I will check.");
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  const nlohmann::json& call = choice["message"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["id"].get<std::string>().substr(0, 5), "call_");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(call["function"]["arguments"], "{\"city\": \"Oslo\"}");
}

TEST_F(ToolCallRelayTest, StreamedDeltasCarryTheContentThenTheCall) {
  const StreamedCalls s = ReadStreamedCalls(Answered(ToolsBody(true), kSentenceThenCall));
  EXPECT_EQ(s.content, "I will check.");
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(s.calls[0]["function"]["arguments"], "{\"city\": \"Oslo\"}");
  EXPECT_EQ(s.finish_reason, "tool_calls");
}

TEST_F(ToolCallRelayTest, NoneLeavesTheBlocksInTheContent) {
  const nlohmann::json response =
      nlohmann::json::parse(Answered(ToolsBody(false, {{"tool_choice", "none"}}), kSentenceThenCall));
  const nlohmann::json& choice = response["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "stop");
  EXPECT_FALSE(choice["message"].contains("tool_calls"));
  EXPECT_EQ(choice["message"]["content"],
            "I will check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Oslo\"}}\n</tool_call>");
}

TEST_F(ToolCallRelayTest, NamedFunctionIsHeldToItsParametersAndStreamsThem) {
  const ReplyJson named = {{"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}};
  const StreamedCalls s = ReadStreamedCalls(Answered(ToolsBody(true, named), {"{\"city\"", ": \"Oslo\"", "}"}));
  ASSERT_TRUE(last_assign_.has_value());
  EXPECT_EQ(last_assign_->sampling.response_format, proto::ResponseFormat::kJsonSchema);
  EXPECT_EQ(nlohmann::json::parse(last_assign_->sampling.json_schema)["required"], nlohmann::json::array({"city"}));
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(s.calls[0]["function"]["arguments"], "{\"city\": \"Oslo\"}");
  EXPECT_EQ(s.content, "");
  EXPECT_EQ(s.finish_reason, "stop");  // a forced function finishes as "stop", as OpenAI's
}

TEST_F(ToolCallRelayTest, RequiredListBecomesCalls) {
  const nlohmann::json response = nlohmann::json::parse(Answered(
      ToolsBody(false, {{"tool_choice", "required"}}),
      {"[{\"name\": \"get_time\", \"arguments\": {}}, ", "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"X\"}}]"}));
  ASSERT_TRUE(last_assign_.has_value());
  EXPECT_EQ(last_assign_->sampling.response_format, proto::ResponseFormat::kJsonSchema);
  const nlohmann::json& choice = response["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_TRUE(choice["message"]["content"].is_null());
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 2u);
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["name"], "get_time");
  EXPECT_EQ(choice["message"]["tool_calls"][1]["function"]["arguments"], "{\"city\": \"X\"}");
}

// Llama 3.1's layout under the llama3_json parser: the tools in the first user message, an
// answer of JSON calls.
class ToolCallLlamaRelayTest : public ToolCallRelayTest {
 protected:
  void Configure(ServerConfig& c) override {
    tool_call_parser_ = "llama3_json";
    ToolCallRelayTest::Configure(c);
    c.model.chat_template = "llama3.1";
  }
};

TEST_F(ToolCallLlamaRelayTest, AnswerOfJsonCallsIsCalls) {
  const std::vector<std::string> pieces = {"{\"name\": \"get_we", "ather\", \"parameters\": {\"city\": ", "\"Oslo\"}}"};
  const nlohmann::json response = nlohmann::json::parse(Answered(ToolsBody(false), pieces));
  const std::string prompt = PromptText();
  EXPECT_NE(prompt.find("Environment: ipython\nCutting Knowledge Date"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("Given the following functions, please respond with a JSON"), std::string::npos) << prompt;
  const nlohmann::json& choice = response["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_TRUE(choice["message"]["content"].is_null());
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["arguments"], "{\"city\": \"Oslo\"}");
  const StreamedCalls s = ReadStreamedCalls(Answered(ToolsBody(true), pieces));
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0]["function"]["arguments"], "{\"city\": \"Oslo\"}");
  EXPECT_EQ(s.content, "");
  EXPECT_EQ(s.finish_reason, "tool_calls");
  // Prose is content, as it comes.
  const StreamedCalls prose = ReadStreamedCalls(Answered(ToolsBody(true), {"It is ", "sunny."}));
  EXPECT_EQ(prose.content, "It is sunny.");
  EXPECT_TRUE(prose.calls.empty());
  EXPECT_EQ(prose.finish_reason, "stop");
}

// Without a parser, "auto" (the default with tools) is refused; the other choices are served.
class ToolCallNoParserTest : public ToolCallRelayTest {
 protected:
  ToolCallNoParserTest() { tool_call_parser_ = ""; }
};

TEST_F(ToolCallNoParserTest, AutoNeedsAParser) {
  httplib::Client http("127.0.0.1", server_->http_port());
  http.set_read_timeout(10, 0);
  auto res = http.Post("/v1/chat/completions", ToolsBody(false).dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_NE(res->body.find("'tool_choice' \\\"auto\\\" (the default when 'tools' are given) needs a tool call parser"),
            std::string::npos)
      << res->body;
  const nlohmann::json response =
      nlohmann::json::parse(Answered(ToolsBody(false, {{"tool_choice", "none"}}), {"Sunny."}));
  EXPECT_EQ(response["choices"][0]["message"]["content"], "Sunny.");
}

// The parser is refused at start on a model whose template renders no tools.
TEST(ToolCallParserConfigTest, NeedsATemplateThatRendersTools) {
  ServerConfig c = LoopbackCoordinatorConfig(64);
  c.model.tool_call_parser = "hermes";
  c.model.chat_template = "llama3";
  auto server = CoordinatorServer::Create(c, CoordinatorRunOptions{});
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find("model.tool_call_parser hermes reads the calls of the chatml chat "
                                           "template's tool layout, and this model's template (llama3) renders no "
                                           "tools in a layout bmad knows"),
            std::string::npos)
      << server.status().ToString();
  // A parser of another layout than the template's.
  c.model.chat_template = "llama3.1";
  auto mismatched = CoordinatorServer::Create(c, CoordinatorRunOptions{});
  ASSERT_FALSE(mismatched.ok());
  EXPECT_NE(mismatched.status().message().find("and this model's template (llama3.1) is another"), std::string::npos)
      << mismatched.status().ToString();
}

}  // namespace
}  // namespace bmad::coord
