// Chat's tool calling fields: tools, tool_choice, parallel_tool_calls, and the tool calls and
// tool results of earlier turns; what each becomes (the tools as the template writes them, the
// schema tool_choice "required" or a named function holds the answer to) and every refusal.
#include "coordinator/http/openai_request.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/coordinator/http/parse_request.h"

namespace bmad::http {
namespace {

using testing::Chat;
using testing::ExpectRejected;
using testing::Ok;

constexpr const char* kWeatherTool =
    R"({"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}})";
constexpr const char* kTimeTool = R"({"type": "function", "function": {"name": "get_time", "strict": true}})";

std::string Body(const std::string& extra) {
  return R"({"messages": [{"role": "user", "content": "Weather in Oslo?"}], "tools": [)" + std::string(kWeatherTool) +
         ", " + kTimeTool + "]" + extra + "}";
}

TEST(ParseToolsTest, ToolsAreRenderedAsVllmGivesThemToTheTemplate) {
  const CompletionRequest r = Ok(Chat(Body("")));
  EXPECT_EQ(r.tools.choice, ToolChoice::kAuto);  // the default with tools
  EXPECT_TRUE(r.tools.parallel_calls);
  EXPECT_THAT(r.tools.names, ::testing::ElementsAre("get_weather", "get_time"));
  ASSERT_EQ(r.tools.rendered.size(), 2u);
  // Python's json.dumps layout, keys in the request's order; absent fields null, others kept.
  EXPECT_EQ(r.tools.rendered[0],
            R"({"type": "function", "function": {"name": "get_weather", "description": "Weather of a city", )"
            R"("parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}})");
  EXPECT_EQ(r.tools.rendered[1],
            R"({"type": "function", "function": {"name": "get_time", "description": null, "parameters": null, )"
            R"("strict": true}})");
  // "auto" and "none" leave the answer free.
  EXPECT_EQ(r.sampling.response_format, proto::ResponseFormat::kText);
  EXPECT_EQ(Ok(Chat(Body(R"(, "tool_choice": "none")"))).tools.choice, ToolChoice::kNone);
  // No tools: nothing, and "none" is fine.
  const CompletionRequest plain =
      Ok(Chat(R"({"messages": [{"role": "user", "content": "x"}], "tools": [], "tool_choice": "none"})"));
  EXPECT_EQ(plain.tools.choice, ToolChoice::kNone);
  EXPECT_TRUE(plain.tools.rendered.empty());
}

TEST(ParseToolsTest, NamedFunctionHoldsTheAnswerToItsParameters) {
  const CompletionRequest r =
      Ok(Chat(Body(R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}})")));
  EXPECT_EQ(r.tools.choice, ToolChoice::kFunction);
  EXPECT_EQ(r.tools.function, "get_weather");
  EXPECT_EQ(r.sampling.response_format, proto::ResponseFormat::kJsonSchema);
  EXPECT_EQ(nlohmann::json::parse(r.sampling.json_schema),
            nlohmann::json::parse(R"({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})"));
  // A function without parameters takes none: {} only.
  const CompletionRequest none = Ok(Chat(Body(R"(, "tool_choice": {"type": "function", "function": {"name": "get_time"}})")));
  EXPECT_EQ(nlohmann::json::parse(none.sampling.json_schema),
            nlohmann::json::parse(R"({"type": "object", "additionalProperties": false})"));
}

TEST(ParseToolsTest, RequiredHoldsTheAnswerToAListOfCalls) {
  const CompletionRequest r = Ok(Chat(Body(R"(, "tool_choice": "required")")));
  EXPECT_EQ(r.tools.choice, ToolChoice::kRequired);
  EXPECT_EQ(r.sampling.response_format, proto::ResponseFormat::kJsonSchema);
  const nlohmann::json schema = nlohmann::json::parse(r.sampling.json_schema);
  EXPECT_EQ(schema["type"], "array");
  EXPECT_EQ(schema["minItems"], 1);
  EXPECT_FALSE(schema.contains("maxItems"));
  ASSERT_EQ(schema["items"]["anyOf"].size(), 2u);
  const nlohmann::json& weather = schema["items"]["anyOf"][0];
  EXPECT_EQ(weather["properties"]["name"], nlohmann::json::parse(R"({"const": "get_weather"})"));
  EXPECT_EQ(weather["properties"]["arguments"]["required"], nlohmann::json::parse(R"(["city"])"));
  EXPECT_EQ(weather["required"], nlohmann::json::parse(R"(["name", "arguments"])"));
  // Without parallel calls, one call.
  const CompletionRequest one = Ok(Chat(Body(R"(, "tool_choice": "required", "parallel_tool_calls": false)")));
  EXPECT_FALSE(one.tools.parallel_calls);
  EXPECT_EQ(nlohmann::json::parse(one.sampling.json_schema)["maxItems"], 1);
}

TEST(ParseToolsTest, RequiredKeepsReferencesIntoEachToolsParameters) {
  // A parameters schema with $defs (pydantic's): its references follow it into the list's schema.
  const std::string tool =
      R"({"type": "function", "function": {"name": "f", "parameters": {"type": "object", "$defs": {"P": {"type": "integer"}},
          "properties": {"p": {"$ref": "#/$defs/P"}}, "required": ["p"]}}})";
  const CompletionRequest r = Ok(Chat(R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required", "tools": [)" +
                                      tool + ", " + kTimeTool + "]}"));
  const nlohmann::json schema = nlohmann::json::parse(r.sampling.json_schema);
  EXPECT_EQ(schema["items"]["anyOf"][0]["properties"]["arguments"]["properties"]["p"]["$ref"],
            "#/items/anyOf/0/properties/arguments/$defs/P");
  // Data is not a schema: a "$ref" key in a const stays. A root $id goes (only the document's
  // root may have one), and so do descriptions (the size limit counts what is enforced).
  const std::string data_tool =
      R"({"type": "function", "function": {"name": "g", "parameters": {"$id": "https://x/y", "type": "object",
          "description": "d", "properties": {"c": {"const": {"$ref": "#/x"}, "description": "e"}}, "required": ["c"]}}})";
  const CompletionRequest data = Ok(Chat(R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required", "tools": [)" +
                                         data_tool + "]}"));
  const nlohmann::json arguments = nlohmann::json::parse(data.sampling.json_schema)["items"]["properties"]["arguments"];
  EXPECT_EQ(arguments, nlohmann::json::parse(R"({"type": "object", "properties": {"c": {"const": {"$ref": "#/x"}}},
                                                  "required": ["c"]})"));
}

TEST(ParseToolsTest, DescriptionsDoNotCountAgainstTheSchemaLimit) {
  // A 70,000-byte description: rendered for the model, left out of the schema the call is held to.
  const std::string tool = R"({"type": "function", "function": {"name": "f", "parameters": {"type": "object",
      "properties": {"q": {"type": "string", "description": ")" + std::string(70000, 'd') + R"("}}}}})";
  for (const std::string choice : {R"("required")", R"({"type": "function", "function": {"name": "f"}})"}) {
    const CompletionRequest r = Ok(Chat(R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": )" + choice +
                                        R"(, "tools": [)" + tool + "]}"));
    EXPECT_LT(r.sampling.json_schema.size(), 1000u) << choice;
    EXPECT_GT(r.tools.rendered[0].size(), 70000u);
  }
}

TEST(ParseToolsTest, RequiredSchemaHasABound) {
  std::string tools;
  const std::string wide = R"({"type": "object", "properties": {)" + [] {
    std::string p;
    for (int i = 0; i < 60; ++i) p += (i ? ", " : "") + ("\"p" + std::to_string(i) + "\": {\"type\": \"string\", \"maxLength\": 5}");
    return p;
  }() + "}}";
  for (int i = 0; i < 40; ++i) {
    tools += (i ? ", " : "") + std::string(R"({"function": {"name": "f)") + std::to_string(i) + R"(", "parameters": )" + wide + "}}";
  }
  ExpectRejected({{R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required", "tools": [)" + tools + "]}",
                   true,
                   {"'tools': tool_choice \"required\" holds the answer to every tool's parameters at once, a schema of",
                    "at most 65536 are supported (send fewer tools, or name the function)"}}});
}

TEST(ParseToolsTest, EarlierTurnsToolCallsAndResults) {
  const CompletionRequest r = Ok(Chat(R"({"messages": [
      {"role": "user", "content": "Weather in Oslo?"},
      {"role": "assistant", "content": null, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}},
        {"type": "function", "function": {"name": "get_time", "arguments": {"tz": "CET"}}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": -3}"},
      {"role": "tool", "content": [{"type": "text", "text": "12:00"}]}]})"));
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[1].content, "");
  ASSERT_EQ(r.messages[1].tool_calls.size(), 2u);
  EXPECT_EQ(r.messages[1].tool_calls[0], (ChatToolCall{"get_weather", R"({"city": "Oslo"})"}));
  EXPECT_EQ(r.messages[1].tool_calls[1], (ChatToolCall{"get_time", R"({"tz": "CET"})"}));
  EXPECT_EQ(r.messages[2].role, ChatRole::kTool);
  EXPECT_EQ(r.messages[2].content, R"({"temp": -3})");
  EXPECT_EQ(r.messages[3].content, "12:00");
}

TEST(ParseToolsTest, MalformedToolFieldsAreRefusedByName) {
  const std::string m = R"({"messages": [{"role": "user", "content": "x"}], )";
  const std::string tool = R"({"type": "function", "function": {"name": "f"}})";
  std::string many = "[";
  for (int i = 0; i < 129; ++i) many += (i ? ", " : "") + std::string(R"({"function": {"name": "f)") + std::to_string(i) + "\"}}";
  many += "]";
  ExpectRejected({
      {m + R"("tools": {"name": "f"}})", true, {"'tools' must be an array of tools"}},
      {m + R"("tools": ["f"]})", true, {"'tools[0]' must be an object"}},
      {m + R"("tools": [{"type": "retrieval", "function": {"name": "f"}}]})", true,
       {"'tools[0].type' must be \"function\", got \"retrieval\""}},
      {m + R"("tools": [{"type": "function"}]})", true, {"'tools[0].function' is required"}},
      {m + R"("tools": [{"function": {"description": "d"}}]})", true, {"'tools[0].function.name' is required"}},
      {m + R"("tools": [{"function": {"name": "get.weather"}}]})", true,
       {"'tools[0].function.name' must be a name of 1 to 64 letters, digits, underscores or dashes"}},
      {m + R"("tools": [{"function": {"name": ")" + std::string(65, 'a') + R"("}}]})", true,
       {"'tools[0].function.name' must be a name of 1 to 64"}},
      {m + R"("tools": [{"function": {"name": "f", "parameters": "{}"}}]})", true,
       {"'tools[0].function.parameters' must be an object (a JSON Schema)"}},
      {m + R"("tools": [{"function": {"name": "f", "description": 3}}]})", true,
       {"'tools[0].function.description' must be a string"}},
      {m + R"("tools": [{"function": {"name": "f", "strict": "yes"}}]})", true,
       {"'tools[0].function.strict' must be a boolean"}},
      {m + R"("tools": [)" + tool + ", " + tool + "]}", true,
       {"'tools[1].function.name' \"f\" names a function an earlier tool already names"}},
      {m + R"("tools": )" + many + "}", true, {"'tools' holds 129 tools; at most 128 are allowed"}},
      {m + R"("tools": [)" + tool + R"(], "tool_choice": "any"})", true,
       {"'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\""}},
      {m + R"("tools": [)" + tool + R"(], "tool_choice": {"type": "function", "function": {"name": "g"}}})", true,
       {"'tool_choice.function.name' \"g\" is not one of the request's tools"}},
      {m + R"("tools": [)" + tool + R"(], "tool_choice": {"type": "function"}})", true,
       {"'tool_choice.function' is required"}},
      {m + R"("tool_choice": {"type": "function", "function": {"name": "f"}}})", true,
       {"'tool_choice' naming function \"f\" needs 'tools', and the request gives none"}},
      {m + R"("tools": [)" + tool + R"(], "parallel_tool_calls": 1})", true,
       {"'parallel_tool_calls' must be a boolean"}},
      {m + R"("tools": [)" + tool + R"(], "tool_choice": "required", "response_format": {"type": "json_object"}})", true,
       {"'response_format' cannot be combined with 'tool_choice' \"required\""}},
      {m + R"("tools": [{"function": {"name": "f", "parameters": {"type": "object", "properties":
           {"zip": {"type": "string", "pattern": "[0-9]+"}}}}}], "tool_choice": "required"})",
       true,
       {"'tools[0].function.parameters' at /properties/zip: keyword 'pattern' is not supported"}},
      {m + R"("tools": [)" + tool + R"(, {"function": {"name": "g", "parameters": {"type": "object", "properties":
           {"zip": {"type": "string", "pattern": "[0-9]+"}}}}}], "tool_choice": {"type": "function", "function": {"name": "g"}}})",
       true,
       {"'tools[1].function.parameters' at /properties/zip: keyword 'pattern' is not supported"}},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{"}}]}]})", true,
       {"'messages[0].tool_calls[0].function.arguments' must be the JSON text of an object"}},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "[1]"}}]}]})", true,
       {"'messages[0].tool_calls[0].function.arguments' must be the JSON text of an object"}},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}]})", true,
       {"'messages[0].tool_calls[0].function.arguments' is required"}},
      {R"({"messages": [{"role": "assistant", "tool_calls": {"function": {"name": "f"}}}]})", true,
       {"'messages[0].tool_calls' must be an array of tool calls"}},
      {R"({"messages": [{"role": "user", "content": "x", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}]})",
       true, {"'messages[0].tool_calls' is allowed only in an assistant message"}},
      {R"({"messages": [{"role": "tool", "tool_call_id": 7, "content": "x"}]})", true,
       {"'messages[0].tool_call_id' must be a string"}},
      {R"({"messages": [{"role": "tool", "tool_call_id": "c"}]})", true, {"'messages[0].content' is required"}},
      // Completions take no tools.
      {R"({"prompt": "x", "tools": [{"function": {"name": "f"}}]})", false,
       {"'tools' is a chat completions parameter"}},
      {R"({"prompt": "x", "tool_choice": "auto"})", false, {"'tool_choice' is a chat completions parameter"}},
  });
}

}  // namespace
}  // namespace bmad::http
