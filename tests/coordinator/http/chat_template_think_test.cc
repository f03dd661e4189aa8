// ChatML templates whose generation prompt opens a reasoning block (QwQ, Qwen3's Thinking-2507
// models): recognised, and the block opened, as their templates write it.
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "coordinator/http/chat_format_detect.h"
#include "coordinator/http/chat_template.h"

namespace bmad::http {
namespace {

// Qwen3-4B-Thinking-2507's template, abridged: its tools and reasoning_content branches left out
// (JSON escapes resolved: a Jinja "\n" escape is a backslash and an n here).
constexpr const char* kThinking2507 = R"J({%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if '</think>' in content %}
            {%- set reasoning_content = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
            {%- set content = content.split('</think>')[-1].lstrip('\n') %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\n' + content }}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n<think>\n' }}
{%- endif %})J";

std::string Opened(const ChatFormat& format, const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  Result<std::string> text = ApplyChatTemplate(format, messages, add_generation_prompt);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? *text : "";
}

TEST(ChatMLOpensThink, Qwen3Thinking2507OpensTheReasoningBlockAfterTheGenerationPrompt) {
  const std::optional<ChatFormat> format = DetectChatFormat(kThinking2507);
  ASSERT_TRUE(format.has_value());
  EXPECT_EQ(format->chat_template, ChatTemplate::kChatML);
  EXPECT_TRUE(format->opens_think);
  EXPECT_TRUE(format->reasoning_turns);
  EXPECT_FALSE(format->thinking_switch);
  const std::vector<ChatMessage> question = {{ChatRole::kUser, "2+2?"}};
  EXPECT_EQ(Opened(*format, question, true), "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n");
  // Without the generation prompt nothing is opened.
  EXPECT_EQ(Opened(*format, question, false), "<|im_start|>user\n2+2?<|im_end|>\n");
  // An earlier answer keeps only what follows its reasoning (before the last user message).
  const std::vector<ChatMessage> later = {{ChatRole::kUser, "2+2?"},
                                          {ChatRole::kAssistant, "Adding.\n</think>\n\n4"},
                                          {ChatRole::kUser, "3+3?"}};
  EXPECT_EQ(Opened(*format, later, true),
            "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n"
            "<|im_start|>user\n3+3?<|im_end|>\n<|im_start|>assistant\n<think>\n");
}

TEST(ChatMLOpensThink, QwQsOneLineAndOnlyThatLiteral) {
  // QwQ-32B's generation prompt, in a template without the reasoning rule.
  const std::string qwq =
      "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + "
      "'<|im_end|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}"
      "{%- endif %}";
  const std::optional<ChatFormat> format = DetectChatFormat(qwq);
  ASSERT_TRUE(format.has_value());
  EXPECT_TRUE(format->opens_think);
  EXPECT_EQ(Opened(*format, {{ChatRole::kUser, "Hi"}}, true), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n");
  // Qwen3's hybrid templates write "<think>\n" after the role elsewhere (a reasoning turn of the
  // history), not after the generation prompt: they do not open one.
  const std::string hybrid =
      "{{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content }}"
      "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- if enable_thinking is defined and "
      "enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}";
  const std::optional<ChatFormat> qwen3 = DetectChatFormat(hybrid);
  ASSERT_TRUE(qwen3.has_value());
  EXPECT_FALSE(qwen3->opens_think);
  EXPECT_TRUE(qwen3->thinking_switch);
  // By name, chatml opens nothing.
  EXPECT_EQ(Opened(ChatTemplate::kChatML, {{ChatRole::kUser, "Hi"}}, true),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

}  // namespace
}  // namespace bmad::http
