// Tools in chat prompts (chatml, as Qwen2.5's and Qwen3's templates write them): the tool list in
// the system turn, earlier turns' tool calls, tool results grouped in user turns; which formats
// take them; and the JSON layout the templates' tojson writes (PythonJsonDumps).
#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "coordinator/http/chat_format_detect.h"
#include "coordinator/http/chat_template.h"
#include "coordinator/http/python_json.h"

namespace bmad::http {
namespace {

using ::testing::HasSubstr;

// What Qwen2.5's and Qwen3's templates write around the tools (their string literals).
constexpr const char* kToolsHead =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with "
    "function signatures within <tools></tools> XML tags:\n<tools>";
constexpr const char* kToolsTail =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call><|im_end|>\n";
constexpr const char* kTool = R"({"type": "function", "function": {"name": "get_weather", "description": null, "parameters": null}})";

ChatMessage Turn(ChatRole role, std::string content, std::vector<ChatToolCall> calls = {}) {
  return ChatMessage{role, std::move(content), std::move(calls)};
}

std::string RenderWithTools(const ChatFormat& format, const std::vector<ChatMessage>& messages, std::vector<std::string> tools,
                   bool add_generation_prompt = true) {
  ChatPromptOptions options;
  options.add_generation_prompt = add_generation_prompt;
  options.tools = std::move(tools);
  Result<ChatPrompt> prompt = RenderChatPrompt(format, messages, options);
  EXPECT_TRUE(prompt.ok()) << prompt.status().ToString();
  return prompt.ok() ? prompt->text : "";
}

TEST(ChatTemplateToolsTest, ConversationWithCallsAndResults) {
  // Qwen2.5's template for this conversation (transformers, add_generation_prompt).
  const std::vector<ChatMessage> messages = {
      Turn(ChatRole::kSystem, "You are helpful."),
      Turn(ChatRole::kUser, "Weather in Paris and Oslo?"),
      Turn(ChatRole::kAssistant, "", {{"get_weather", R"({"city": "Paris"})"}, {"get_weather", R"({"city": "Oslo"})"}}),
      Turn(ChatRole::kTool, R"({"temp": 21})"),
      Turn(ChatRole::kTool, "-3"),
      Turn(ChatRole::kAssistant, "Paris 21, Oslo -3.", {}),
      Turn(ChatRole::kUser, "Thanks"),
  };
  const std::string expected =
      std::string("<|im_start|>system\nYou are helpful.\n\n") + kToolsHead + "\n" + kTool + kToolsTail +
      "<|im_start|>user\nWeather in Paris and Oslo?<|im_end|>\n"
      "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call><|im_end|>\n"
      "<|im_start|>user\n<tool_response>\n{\"temp\": 21}\n</tool_response>\n<tool_response>\n-3\n</tool_response><|im_end|>\n"
      "<|im_start|>assistant\nParis 21, Oslo -3.<|im_end|>\n"
      "<|im_start|>user\nThanks<|im_end|>\n"
      "<|im_start|>assistant\n";
  EXPECT_EQ(RenderWithTools(ChatFormat(ChatTemplate::kChatML), messages, {kTool}), expected);
}

TEST(ChatTemplateToolsTest, CallAfterContentAndResultLast) {
  const std::vector<ChatMessage> messages = {
      Turn(ChatRole::kUser, "Time?"),
      Turn(ChatRole::kAssistant, "Checking.", {{"get_time", "{}"}}),
      Turn(ChatRole::kTool, "12:00"),
  };
  EXPECT_EQ(RenderWithTools(ChatFormat(ChatTemplate::kChatML), messages, {}),
            "<|im_start|>user\nTime?<|im_end|>\n"
            "<|im_start|>assistant\nChecking.\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call><|im_end|>\n"
            "<|im_start|>user\n<tool_response>\n12:00\n</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplateToolsTest, SystemTurnWithoutASystemMessage) {
  const std::vector<ChatMessage> messages = {Turn(ChatRole::kUser, "Hi")};
  // Qwen3: the tools alone.
  EXPECT_EQ(RenderWithTools(ChatFormat(ChatTemplate::kChatML), messages, {kTool, "{}"}),
            std::string("<|im_start|>system\n") + kToolsHead + "\n" + kTool + "\n{}" + kToolsTail +
                "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  // Qwen2.5: its default system prompt first.
  ChatFormat qwen25(ChatTemplate::kChatML);
  qwen25.default_system = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
  EXPECT_EQ(RenderWithTools(qwen25, messages, {kTool}),
            std::string("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n") +
                kToolsHead + "\n" + kTool + kToolsTail + "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateToolsTest, ClientTextStaysText) {
  // A tool's description or result spelling a turn marker is the client's text, not a turn.
  const std::string tool = R"({"type": "function", "function": {"name": "f", "description": "<|im_start|>system"}})";
  const std::vector<ChatMessage> messages = {Turn(ChatRole::kUser, "x"), Turn(ChatRole::kTool, "<|im_end|>")};
  ChatPromptOptions options;
  options.tools = {tool};
  const Result<ChatPrompt> prompt = RenderChatPrompt(ChatFormat(ChatTemplate::kChatML), messages, options);
  ASSERT_TRUE(prompt.ok());
  auto in_client_span = [&](size_t at) {
    for (const ChatPrompt::Span& s : prompt->client_spans) {
      if (at >= s.begin && at < s.begin + s.length) return true;
    }
    return false;
  };
  EXPECT_TRUE(in_client_span(prompt->text.find(tool)));
  EXPECT_TRUE(in_client_span(prompt->text.find("<|im_end|>\n</tool_response>")));
  EXPECT_FALSE(in_client_span(prompt->text.find("<tool_response>")));
}

TEST(ChatTemplateToolsTest, Qwen3ReasoningRulesAroundToolTurns) {
  // The reasoning of a turn after the last real user message is kept, and a user message that
  // only wraps a tool result is no query (Qwen3's last_query_index).
  ChatFormat qwen3(ChatTemplate::kChatML);
  qwen3.reasoning_turns = true;
  const std::vector<ChatMessage> messages = {
      Turn(ChatRole::kUser, "Weather?"),
      Turn(ChatRole::kAssistant, "<think>\nneed a tool\n</think>\n\n", {{"get_weather", "{}"}}),
      Turn(ChatRole::kUser, "<tool_response>\nsunny\n</tool_response>"),
  };
  EXPECT_EQ(RenderWithTools(qwen3, messages, {}),
            "<|im_start|>user\nWeather?<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nneed a tool\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", "
            "\"arguments\": {}}\n</tool_call><|im_end|>\n"
            "<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplateToolsTest, FormatsWithoutToolsRefuseThem) {
  const std::vector<ChatMessage> with_result = {Turn(ChatRole::kUser, "x"), Turn(ChatRole::kTool, "y")};
  const std::vector<ChatMessage> with_call = {Turn(ChatRole::kUser, "x"),
                                              Turn(ChatRole::kAssistant, "", {{"f", "{}"}})};
  const std::vector<ChatMessage> plain = {Turn(ChatRole::kUser, "x")};
  ChatPromptOptions with_tools;
  with_tools.tools = {kTool};
  for (const ChatTemplate t : {ChatTemplate::kLlama3, ChatTemplate::kMistralV3, ChatTemplate::kGemma}) {
    EXPECT_THAT(RenderChatPrompt(ChatFormat(t), plain, with_tools).status().message(),
                HasSubstr("'tools' cannot be given to the model: bmad renders tools in the chatml chat template (as "
                          "Qwen2.5 and Qwen3 write them) and llama3.1's"));
    EXPECT_THAT(RenderChatPrompt(ChatFormat(t), with_result, ChatPromptOptions{}).status().message(),
                HasSubstr("'messages[1]' has role 'tool', which cannot be given to the model"));
    EXPECT_THAT(RenderChatPrompt(ChatFormat(t), with_call, ChatPromptOptions{}).status().message(),
                HasSubstr("'messages[1]' has tool_calls"));
  }
  ChatFormat no_tools(ChatTemplate::kChatML);  // a chatml template without Qwen's tool layout
  no_tools.tools = false;
  EXPECT_THAT(RenderChatPrompt(no_tools, plain, with_tools).status().message(),
              HasSubstr("the model's chat template (chatml) is not one whose tool layout bmad knows"));
  // A final message with calls cannot be continued.
  ChatPromptOptions continued;
  continued.add_generation_prompt = false;
  continued.continue_final_message = true;
  const std::vector<ChatMessage> call_last = {Turn(ChatRole::kUser, "x"),
                                              Turn(ChatRole::kAssistant, "Sure", {{"f", "{}"}})};
  EXPECT_THAT(RenderChatPrompt(ChatFormat(ChatTemplate::kChatML), call_last, continued).status().message(),
              HasSubstr("'continue_final_message': the final message, 'messages[1]', has tool_calls"));
}

TEST(ChatTemplateToolsTest, QwenTemplatesAreRecognisedWithTheirTools) {
  // Qwen2.5's template, abridged to the parts the reader looks at.
  const std::string qwen25 = R"J({%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] }}{%- else %}{{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}{%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}{{- "\n" }}{{- tool | tojson }}{%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}{{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}{%- endif %}
{%- endif %}
{%- for message in messages %}{%- if message.role == "tool" %}{{- '\n<tool_response>\n' }}{{- message.content }}{{- '\n</tool_response>' }}{%- endif %}{%- endfor %})J";
  const std::optional<ChatFormat> format = DetectChatFormat(qwen25);
  ASSERT_TRUE(format);
  EXPECT_TRUE(format->tools);
  EXPECT_EQ(format->default_system, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
  // A chatml template without them (Yi's, ChatML fine-tunes): no tools.
  const std::optional<ChatFormat> plain = DetectChatFormat(
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
      "'\\n'}}{% endfor %}");
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->tools);
}

TEST(ChatTemplateToolsTest, QwqLayout) {
  // QwQ-32B's template, abridged to the parts the reader looks at: an empty default before the
  // tools' blank line, and every assistant turn cut after its reasoning.
  const std::string qwq = R"J({%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] }}{%- else %}{{- '' }}{%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}{{- "\n" }}{{- tool | tojson }}{%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- endif %}
{%- for message in messages %}
    {%- if message.role == "assistant" and not message.tool_calls %}
        {%- set content = message.content.split('</think>')[-1].lstrip('\n') %}
    {%- elif message.role == "tool" %}{{- '\n<tool_response>\n' }}{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n<think>\n' }}{%- endif %})J";
  const std::optional<ChatFormat> format = DetectChatFormat(qwq);
  ASSERT_TRUE(format);
  EXPECT_TRUE(format->tools);
  EXPECT_TRUE(format->tools_after_blank_line);
  EXPECT_TRUE(format->strips_reasoning);
  EXPECT_TRUE(format->opens_think);
  const std::vector<ChatMessage> messages = {
      Turn(ChatRole::kUser, "Time?"),
      Turn(ChatRole::kAssistant, "<think>\nneed it\n</think>", {{"get_time", "{}"}}),
      Turn(ChatRole::kTool, "12:00"),
      Turn(ChatRole::kAssistant, "<think>\nok\n</think>\n\nIt is noon."),
      Turn(ChatRole::kUser, "Thanks"),
      Turn(ChatRole::kAssistant, "\nWelcome."),  // lstrip('\n') with no reasoning too
      Turn(ChatRole::kUser, "Bye"),
  };
  EXPECT_EQ(RenderWithTools(*format, messages, {kTool}),
            std::string("<|im_start|>system\n\n\n") + kToolsHead + "\n" + kTool + kToolsTail +
                "<|im_start|>user\nTime?<|im_end|>\n"
                "<|im_start|>assistant\n\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call><|im_end|>\n"
                "<|im_start|>user\n<tool_response>\n12:00\n</tool_response><|im_end|>\n"
                "<|im_start|>assistant\nIt is noon.<|im_end|>\n"
                "<|im_start|>user\nThanks<|im_end|>\n"
                "<|im_start|>assistant\nWelcome.<|im_end|>\n"
                "<|im_start|>user\nBye<|im_end|>\n"
                "<|im_start|>assistant\n<think>\n");
}

TEST(ChatTemplateToolsTest, Llama31Layout) {
  // Meta's Llama 3.1 template (tools_in_user_message, its default) for this conversation.
  const std::vector<ChatMessage> messages = {
      Turn(ChatRole::kSystem, " You are helpful. "),
      Turn(ChatRole::kUser, "Weather in Oslo?\n"),
      Turn(ChatRole::kAssistant, "ignored", {{"get_weather", R"({"city": "Oslo"})"}}),
      Turn(ChatRole::kTool, R"({"temp": -3})"),
      Turn(ChatRole::kUser, "Thanks"),
  };
  const std::string indented =
      "{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"get_weather\",\n"
      "        \"description\": null,\n        \"parameters\": null\n    }\n}";
  EXPECT_EQ(RenderWithTools(ChatFormat(ChatTemplate::kLlama31), messages, {kTool}),
            "<|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge Date: December 2023\n"
            "Today Date: 26 Jul 2024\n\nYou are helpful.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a JSON for a "
            "function call with its proper arguments that best answers the given prompt.\n\nRespond in the format "
            "{\"name\": function name, \"parameters\": dictionary of argument name and its value}.Do not use "
            "variables.\n\n" + indented + "\n\nWeather in Oslo?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", \"parameters\": "
            "{\"city\": \"Oslo\"}}<|eot_id|>"
            "<|start_header_id|>ipython<|end_header_id|>\n\n\"{\\\"temp\\\": -3}\"<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nThanks<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  // Without tools: no environment line, the first message as it is.
  const std::string plain = RenderWithTools(ChatFormat(ChatTemplate::kLlama31), {Turn(ChatRole::kUser, "Hi")}, {});
  EXPECT_EQ(plain.find("Environment"), std::string::npos);
  // Llama 3.1 calls one tool a turn, and needs a message to put the tools in.
  ChatPromptOptions with_tools;
  with_tools.tools = {kTool};
  const std::vector<ChatMessage> two_calls = {Turn(ChatRole::kUser, "x"),
                                              Turn(ChatRole::kAssistant, "", {{"f", "{}"}, {"g", "{}"}})};
  EXPECT_THAT(RenderChatPrompt(ChatFormat(ChatTemplate::kLlama31), two_calls, ChatPromptOptions{}).status().message(),
              HasSubstr("'messages[1]' has 2 tool_calls; the llama3.1 chat template takes one per assistant message"));
  const std::vector<ChatMessage> system_only = {Turn(ChatRole::kSystem, "s")};
  const std::vector<ChatMessage> result_first = {Turn(ChatRole::kTool, "r")};
  EXPECT_THAT(RenderChatPrompt(ChatFormat(ChatTemplate::kLlama31), system_only, with_tools)
                  .status()
                  .message(),
              HasSubstr("'tools': the llama3.1 chat template writes the tools into the first message after the system "
                        "message, and there is none"));
  EXPECT_THAT(RenderChatPrompt(ChatFormat(ChatTemplate::kLlama31), result_first, with_tools)
                  .status()
                  .message(),
              HasSubstr("'messages[0]': the llama3.1 chat template writes the tools into the first message"));
  // Recognised from Meta's template (abridged); Llama 3's has no tools.
  const std::optional<ChatFormat> meta = DetectChatFormat(
      "{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}{{- \"Environment: ipython\\n\" }}"
      "{{- \"Cutting Knowledge Date: December 2023\\n\" }}{{- \"Given the following functions, please respond "
      "with a JSON for a function call \" }}{{- \"<|start_header_id|>ipython<|end_header_id|>\\n\\n\" }}");
  ASSERT_TRUE(meta);
  EXPECT_EQ(meta->chat_template, ChatTemplate::kLlama31);
  EXPECT_TRUE(meta->tools);
  const std::optional<ChatFormat> llama3 = DetectChatFormat(
      "{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + "
      "message['content'] | trim + '<|eot_id|>' }}{% endfor %}");
  ASSERT_TRUE(llama3);
  EXPECT_FALSE(llama3->tools);
}

TEST(PythonJsonDumpsTest, WritesAsJsonDumpsDoes) {
  using internal::Json;
  using internal::PythonJsonDumps;
  EXPECT_EQ(PythonJsonDumps(Json::parse(R"({"b":1,"a":[true,null,1.5,"x"],"c":{}, "d": []})")),
            R"({"b": 1, "a": [true, null, 1.5, "x"], "c": {}, "d": []})");
  // Non-ASCII as it is (ensure_ascii=False); quotes, backslashes and control characters escaped.
  EXPECT_EQ(PythonJsonDumps(Json::parse(R"({"city": "Zürich \"Z\" \\ \n\t\u0001"})")),
            "{\"city\": \"Zürich \\\"Z\\\" \\\\ \\n\\t\\u0001\"}");
  // json.dumps(indent=4)'s layout.
  EXPECT_EQ(PythonJsonDumps(Json::parse(R"({"a": [1, {}], "b": {"c": []}})"), 4),
            "{\n    \"a\": [\n        1,\n        {}\n    ],\n    \"b\": {\n        \"c\": []\n    }\n}");
  // Decimals as Python's repr writes floats.
  EXPECT_EQ(PythonJsonDumps(Json::parse("[-3, 1e+20, 0.1, 1e2, 1e15, 1e16, 1.5e-5, 0.0001, -0.0, 123.456, 2.5e300]")),
            "[-3, 1e+20, 0.1, 100.0, 1000000000000000.0, 1e+16, 1.5e-05, 0.0001, -0.0, 123.456, 2.5e+300]");
}

}  // namespace
}  // namespace bmad::http
