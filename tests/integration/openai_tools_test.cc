// Tool calling end to end on a local cluster (bmad-coordinator and a bmad-worker replica under
// mpirun, 127.0.0.1, model.tool_call_parser hermes): tool_choice "required" and a named function
// hold a real replica's answer to the tools' calls (the tagged-union and parameters schemas);
// "auto" reads the calls the model writes; earlier turns' calls and results reach the prompt.
// llama-2-tiny-random (random weights, the Llama-2 vocabulary and a 4096-token context, no chat
// template: ChatML, whose built-in layout has tools), with two of its tokens made Qwen's
// "<tool_call>" markers.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
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

json Tools() {
  return json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                     "days": {"type": "integer", "minimum": 1, "maximum": 7}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time"}}])");
}

json Question(const json& extra) {
  json body = {{"messages", {{{"role", "user"}, {"content", "What is the weather in Oslo?"}}}},
               {"tools", Tools()},
               {"max_tokens", 400},
               {"temperature", 1.0}};
  body.update(extra);
  return body;
}

// A call's arguments hold to its function's parameters.
void ExpectValidCall(const json& call) {
  ASSERT_EQ(call["type"], "function") << call;
  EXPECT_TRUE(call["id"].get<std::string>().starts_with("call_")) << call;
  const std::string name = call["function"]["name"];
  const json arguments = json::parse(call["function"]["arguments"].get<std::string>());
  if (name == "get_time") {
    EXPECT_EQ(arguments, json::object()) << call;
    return;
  }
  ASSERT_EQ(name, "get_weather") << call;
  ASSERT_TRUE(arguments.contains("city") && arguments["city"].is_string()) << call;
  if (arguments.contains("days")) {
    EXPECT_GE(arguments["days"].get<int>(), 1) << call;
    EXPECT_LE(arguments["days"].get<int>(), 7) << call;
  }
  for (const auto& [key, value] : arguments.items()) EXPECT_TRUE(key == "city" || key == "days") << call;
}

TEST(OpenAiToolsTest, ToolChoicesOnARealReplica) {
  const std::string model = MakeTempDir("tools-model") + "/llama-2-tiny-random.gguf";
  {
    auto base = tokenizer::testing::OpenSharedModel("llama-2-tiny-random.gguf");
    ASSERT_TRUE(base.ok()) << base.status().ToString();
    const Status written = tokenizer::testing::WriteRewrittenModel(
        **base,
        {{31990, "<tool_call>", tokenizer::TokenType::kUserDefined},
         {31991, "</tool_call>", tokenizer::TokenType::kUserDefined}},
        model);
    ASSERT_TRUE(written.ok()) << written.ToString();
  }
  LocalCluster cluster({model, 1, 0, {"model.tool_call_parser=hermes"}});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  const int port = cluster.http_port();

  // "required", one call: whatever the random weights pick, a valid call of one of the tools.
  std::set<std::string> called;
  for (int seed = 1; seed <= 6; ++seed) {
    const json body = Question({{"tool_choice", "required"}, {"parallel_tool_calls", false}, {"seed", seed}});
    const json answer = ParsedOk(Post(port, "/v1/chat/completions", body.dump()));
    const json& choice = answer["choices"][0];
    ASSERT_EQ(choice["finish_reason"], "tool_calls") << answer;
    EXPECT_TRUE(choice["message"]["content"].is_null()) << answer;
    ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << answer;
    ExpectValidCall(choice["message"]["tool_calls"][0]);
    called.insert(choice["message"]["tool_calls"][0]["function"]["name"].get<std::string>());
  }
  EXPECT_FALSE(called.empty());

  // A named function, whole and streamed (the same seed: the same call, in pieces).
  const json named = Question({{"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}},
                               {"seed", 7}});
  const json whole = ParsedOk(Post(port, "/v1/chat/completions", named.dump()));
  ASSERT_EQ(whole["choices"][0]["finish_reason"], "stop") << whole;
  ASSERT_EQ(whole["choices"][0]["message"]["tool_calls"].size(), 1u) << whole;
  const json& call = whole["choices"][0]["message"]["tool_calls"][0];
  EXPECT_EQ(call["function"]["name"], "get_weather");
  ExpectValidCall(call);
  json streamed_body = named;
  streamed_body["stream"] = true;
  const SseCompletion streamed = StreamCompletion(port, "/v1/chat/completions", streamed_body);
  EXPECT_TRUE(streamed.done) << streamed.error;
  EXPECT_TRUE(streamed.tool_calls_in_order);
  ASSERT_EQ(streamed.tool_calls.count(0), 1u);
  ASSERT_EQ(streamed.tool_calls.at(0).size(), 1u);
  EXPECT_EQ(streamed.tool_calls.at(0)[0]["function"], call["function"]);
  EXPECT_EQ(streamed.finish_reasons.at(0), "stop");

  // "auto": the model's own <tool_call> block (held to it with guided_choice) becomes the call.
  const std::string block = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  const json automatic = Question({{"guided_choice", {block}}});
  const json read = ParsedOk(Post(port, "/v1/chat/completions", automatic.dump()));
  ASSERT_EQ(read["choices"][0]["finish_reason"], "tool_calls") << read;
  ASSERT_EQ(read["choices"][0]["message"]["tool_calls"].size(), 1u) << read;
  EXPECT_EQ(read["choices"][0]["message"]["tool_calls"][0]["function"],
            json({{"name", "get_time"}, {"arguments", "{}"}}));
  json automatic_streamed = automatic;
  automatic_streamed["stream"] = true;
  const SseCompletion auto_stream = StreamCompletion(port, "/v1/chat/completions", automatic_streamed);
  EXPECT_TRUE(auto_stream.done) << auto_stream.error;
  ASSERT_EQ(auto_stream.tool_calls.count(0), 1u);
  ASSERT_EQ(auto_stream.tool_calls.at(0).size(), 1u);
  EXPECT_EQ(auto_stream.tool_calls.at(0)[0]["function"]["name"], "get_time");
  EXPECT_EQ(auto_stream.text, "");
  EXPECT_EQ(auto_stream.finish_reasons.at(0), "tool_calls");
  // "none": the same block is content.
  json none = automatic;
  none["tool_choice"] = "none";
  const json as_text = ParsedOk(Post(port, "/v1/chat/completions", none.dump()));
  EXPECT_EQ(as_text["choices"][0]["message"]["content"], block) << as_text;
  EXPECT_FALSE(as_text["choices"][0]["message"].contains("tool_calls"));

  // A conversation with a call and its result: served, and the tools count in /tokenize.
  json conversation = Question({{"tool_choice", "none"}, {"max_tokens", 4}});
  conversation["messages"].push_back(json::parse(R"({"role": "assistant", "content": null, "tool_calls": [
      {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]})"));
  conversation["messages"].push_back(json::parse(R"({"role": "tool", "tool_call_id": "call_1", "content": "-3 C"})"));
  ParsedOk(Post(port, "/v1/chat/completions", conversation.dump()));
  const json with_tools = ParsedOk(Post(port, "/tokenize", conversation.dump()));
  conversation.erase("tools");
  conversation.erase("tool_choice");
  const json without = ParsedOk(Post(port, "/tokenize", conversation.dump()));
  EXPECT_GT(with_tools["count"].get<int>(), without["count"].get<int>() + 100);
}

// Llama 3.1's layout (model.chat_template llama3.1) under the llama3_json parser: the model's
// JSON calls (held to one with guided_choice) become tool_calls, whole and streamed; a named
// function is served the same way as under chatml.
TEST(OpenAiToolsTest, Llama31LayoutOnARealReplica) {
  LocalCluster cluster({SharedModelsDir() + "/llama-2-tiny-random.gguf", 1, 0,
                        {"model.tool_call_parser=llama3_json", "model.chat_template=llama3.1"}});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  const int port = cluster.http_port();
  const std::string calls = R"({"name": "get_time", "parameters": {}}; {"name": "get_weather", "parameters": {"city": "Oslo"}})";
  const json automatic = Question({{"guided_choice", {calls}}});
  const json read = ParsedOk(Post(port, "/v1/chat/completions", automatic.dump()));
  ASSERT_EQ(read["choices"][0]["finish_reason"], "tool_calls") << read;
  ASSERT_EQ(read["choices"][0]["message"]["tool_calls"].size(), 2u) << read;
  EXPECT_EQ(read["choices"][0]["message"]["tool_calls"][1]["function"],
            json({{"name", "get_weather"}, {"arguments", "{\"city\": \"Oslo\"}"}}));
  json streamed_body = automatic;
  streamed_body["stream"] = true;
  const SseCompletion streamed = StreamCompletion(port, "/v1/chat/completions", streamed_body);
  EXPECT_TRUE(streamed.done) << streamed.error;
  ASSERT_EQ(streamed.tool_calls.count(0), 1u);
  ASSERT_EQ(streamed.tool_calls.at(0).size(), 2u);
  EXPECT_EQ(streamed.tool_calls.at(0)[0]["function"]["name"], "get_time");
  EXPECT_EQ(streamed.finish_reasons.at(0), "tool_calls");
  const json named = Question({{"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}},
                               {"seed", 3}});
  const json answer = ParsedOk(Post(port, "/v1/chat/completions", named.dump()));
  ASSERT_EQ(answer["choices"][0]["message"]["tool_calls"].size(), 1u) << answer;
  ExpectValidCall(answer["choices"][0]["message"]["tool_calls"][0]);
  // A conversation with a call and its result.
  json conversation = Question({{"tool_choice", "none"}, {"max_tokens", 4}});
  conversation["messages"].push_back(json::parse(R"({"role": "assistant", "content": null, "tool_calls": [
      {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]})"));
  conversation["messages"].push_back(json::parse(R"({"role": "tool", "tool_call_id": "call_1", "content": "-3 C"})"));
  ParsedOk(Post(port, "/v1/chat/completions", conversation.dump()));
}

}  // namespace
}  // namespace bmad::testing
