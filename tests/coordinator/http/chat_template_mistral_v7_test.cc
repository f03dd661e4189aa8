// Mistral-v7-tekken (Mistral Small 3 and its kind): recognised from its template, its default system
// message read (with the request's date where the template calls strftime_now), rendered as the
// reference template renders it.
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "coordinator/http/chat_format_detect.h"
#include "coordinator/http/chat_template.h"

namespace bmad::http {
namespace {

std::chrono::system_clock::time_point LateOn(int year, unsigned month, unsigned day) {
  return std::chrono::sys_days(std::chrono::year{year} / std::chrono::month{month} / std::chrono::day{day}) +
         std::chrono::hours{23};  // late in the day: the date is UTC's
}

// A Mistral Small 3 template with a dated default system message, the shape of Small 3.1's
// (literals joined by + around `today`, set from strftime_now), as third-party renderers carry
// it; JSON escapes resolved (a Jinja "\n" escape is a backslash and an n here). Not checked
// against the files Mistral published.
constexpr const char* kSmall3Dated = R"J({%- set today = strftime_now("%Y-%m-%d") %}
{%- set default_system_message = "You are Mistral Small 3, a Large Language Model (LLM) created by Mistral AI, a French startup headquartered in Paris.\nYour knowledge base was last updated on 2023-10-01. The current date is " + today + ".\n\nWhen you're not sure about some information, you say that you don't have the information and don't make up anything.\nIf the user's question is not clear, ambiguous, or does not provide enough context for you to accurately answer the question, you do not try to answer it right away and you rather ask the user to clarify their request (e.g. \"What are some good restaurants around me?\" => \"Where are you?\" or \"When is the next flight to Tokyo\" => \"Where do you travel from?\")" %}

{{- bos_token }}

{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set system_message = default_system_message %}
    {%- set loop_messages = messages %}
{%- endif %}
{{- '[SYSTEM_PROMPT]' + system_message + '[/SYSTEM_PROMPT]' }}

{%- for message in loop_messages %}
    {%- if message['role'] == 'user' %}
        {{- '[INST]' + message['content'] + '[/INST]' }}
    {%- elif message['role'] == 'system' %}
        {{- '[SYSTEM_PROMPT]' + message['content'] + '[/SYSTEM_PROMPT]' }}
    {%- elif message['role'] == 'assistant' %}
        {{- message['content'] + eos_token }}
    {%- else %}
        {{- raise_exception('Only user, system and assistant roles are supported!') }}
    {%- endif %}
{%- endfor %})J";

std::string Rendered(const ChatFormat& format, const std::vector<ChatMessage>& messages,
                  std::chrono::system_clock::time_point now = LateOn(2026, 12, 2)) {
  Result<std::string> text = ApplyChatTemplate(format, messages, /*add_generation_prompt=*/true, now);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? *text : "";
}

TEST(MistralV7Tekken, RecognisedWithItsDefaultSystemMessageAndTheRequestsDate) {
  EXPECT_EQ(DetectChatTemplate(kSmall3Dated), ChatTemplate::kMistralV7Tekken);
  const std::optional<ChatFormat> format = DetectChatFormat(kSmall3Dated);
  ASSERT_TRUE(format.has_value());
  EXPECT_EQ(format->chat_template, ChatTemplate::kMistralV7Tekken);
  const std::string expected_system =
      "You are Mistral Small 3, a Large Language Model (LLM) created by Mistral AI, a French startup "
      "headquartered in Paris.\nYour knowledge base was last updated on 2023-10-01. The current date is "
      "2026-12-02.\n\nWhen you're not sure about some information, you say that you don't have the information "
      "and don't make up anything.\nIf the user's question is not clear, ambiguous, or does not provide enough "
      "context for you to accurately answer the question, you do not try to answer it right away and you rather "
      "ask the user to clarify their request (e.g. \"What are some good restaurants around me?\" => \"Where are "
      "you?\" or \"When is the next flight to Tokyo\" => \"Where do you travel from?\")";
  // No system message: the template's own, dated the request's day (UTC).
  EXPECT_EQ(Rendered(*format, {{ChatRole::kUser, "Hi"}}), "[SYSTEM_PROMPT]" + expected_system + "[/SYSTEM_PROMPT][INST]Hi[/INST]");
  const std::string next_year = Rendered(*format, {{ChatRole::kUser, "Hi"}}, LateOn(2027, 1, 5));
  EXPECT_NE(next_year.find("The current date is 2027-01-05.\n"), std::string::npos) << next_year;
}

TEST(MistralV7Tekken, RendersTurnsAsTheReferenceTemplate) {
  const std::optional<ChatFormat> format = DetectChatFormat(kSmall3Dated);
  ASSERT_TRUE(format.has_value());
  // The caller's system message replaces the default; contents are kept as they are (no strip);
  // an assistant turn ends with the model's end-of-sentence token; nothing follows the last
  // user turn, generation prompt or not.
  const std::vector<ChatMessage> conversation = {{ChatRole::kSystem, " Be brief. "},
                                                 {ChatRole::kUser, "Hi "},
                                                 {ChatRole::kAssistant, " Hello!"},
                                                 {ChatRole::kUser, "How are you?"}};
  const std::string expected =
      "[SYSTEM_PROMPT] Be brief. [/SYSTEM_PROMPT][INST]Hi [/INST] Hello!</s>[INST]How are you?[/INST]";
  EXPECT_EQ(Rendered(*format, conversation), expected);
  Result<std::string> no_gen = ApplyChatTemplate(*format, conversation, false, LateOn(2026, 12, 2));
  ASSERT_TRUE(no_gen.ok());
  EXPECT_EQ(*no_gen, expected);
  // Any order: a later system message gets a block where it stands; an assistant message may
  // come first (after the default system block).
  EXPECT_EQ(Rendered(ChatTemplate::kMistralV7Tekken, {{ChatRole::kAssistant, "A"},
                                                   {ChatRole::kUser, "U"},
                                                   {ChatRole::kSystem, "S2"},
                                                   {ChatRole::kUser, "V"}}),
            "A</s>[INST]U[/INST][SYSTEM_PROMPT]S2[/SYSTEM_PROMPT][INST]V[/INST]");
  // An empty system message given still writes its block, as the template does.
  EXPECT_EQ(Rendered(*format, {{ChatRole::kSystem, ""}, {ChatRole::kUser, "Hi"}}),
            "[SYSTEM_PROMPT][/SYSTEM_PROMPT][INST]Hi[/INST]");
  // By name: llama.cpp's built-in mistral-v7-tekken, without a default system message.
  EXPECT_EQ(Rendered(ChatTemplate::kMistralV7Tekken, {{ChatRole::kUser, "Hi"}}), "[INST]Hi[/INST]");
  ChatFormat eos(ChatTemplate::kMistralV7Tekken);
  eos.eos_text = "<|end|>";  // the model's own end-of-sentence text
  EXPECT_EQ(Rendered(eos, {{ChatRole::kUser, "U"}, {ChatRole::kAssistant, "A"}}), "[INST]U[/INST]A<|end|>");
}

TEST(MistralV7Tekken, DefaultSystemMessagesReadAsLiteralsOrNotRecognised) {
  // A default of one literal, no date.
  const std::string small3 =
      R"J({%- set default_system_message = "You are Mistral Small 3.\nBe kind." %})J"
      R"J({{- bos_token }}{{- '[SYSTEM_PROMPT]' + system_message + '[/SYSTEM_PROMPT]' }}{{- '[INST]' + message['content'] + '[/INST]' }})J";
  std::optional<ChatFormat> format = DetectChatFormat(small3);
  ASSERT_TRUE(format.has_value());
  EXPECT_EQ(format->default_system, "You are Mistral Small 3.\nBe kind.");
  EXPECT_TRUE(format->default_system_date_at.empty());
  // None: no system block unless the caller gives one.
  const std::string bare = R"J({{- '[SYSTEM_PROMPT]' + system_message + '[/SYSTEM_PROMPT]' }}{{- '[INST]' + m + '[/INST]' }})J";
  format = DetectChatFormat(bare);
  ASSERT_TRUE(format.has_value());
  EXPECT_EQ(Rendered(*format, {{ChatRole::kUser, "Hi"}}), "[INST]Hi[/INST]");
  // Whitespace control and single quotes.
  const std::string single = R"J({%- set today = strftime_now('%Y-%m-%d') -%}{%- set default_system_message = 'Day ' + today + '.' -%}[SYSTEM_PROMPT][INST])J";
  format = DetectChatFormat(single);
  ASSERT_TRUE(format.has_value());
  EXPECT_EQ(Rendered(*format, {{ChatRole::kUser, "Hi"}}), "[SYSTEM_PROMPT]Day 2026-12-02.[/SYSTEM_PROMPT][INST]Hi[/INST]");
  // An expression this reader cannot evaluate: the format without a default system message,
  // marked so that the coordinator warns.
  for (const std::string unknown : {
           R"J({%- set default_system_message = "It is " + yesterday + "." %}[SYSTEM_PROMPT][INST])J",
           R"J({%- set default_system_message = "It is " + today + "." %}[SYSTEM_PROMPT][INST])J",  // today unset
           R"J({%- set default_system_message = load_text("SYSTEM_PROMPT.txt") %}[SYSTEM_PROMPT][INST])J",
           R"J({%- set default_system_message = "Hi" | trim %}[SYSTEM_PROMPT][INST])J",
           R"J({%- set default_system_message = "never closed [SYSTEM_PROMPT][INST])J"}) {
    EXPECT_EQ(DetectChatTemplate(unknown), ChatTemplate::kMistralV7Tekken) << unknown;
    const std::optional<ChatFormat> unread = DetectChatFormat(unknown);
    ASSERT_TRUE(unread.has_value()) << unknown;
    EXPECT_EQ(unread->chat_template, ChatTemplate::kMistralV7Tekken);
    EXPECT_TRUE(unread->default_system_unread) << unknown;
    EXPECT_EQ(Rendered(*unread, {{ChatRole::kUser, "Hi"}}), "[INST]Hi[/INST]") << unknown;
  }
  EXPECT_FALSE(DetectChatFormat(kSmall3Dated)->default_system_unread);
}

TEST(MistralV7Tekken, TheSpacedV7AndOtherMistralTemplatesAreNotIt) {
  // Mistral-Large-2411's "v7" writes "[SYSTEM_PROMPT] " and "[INST] ": another layout.
  EXPECT_NE(DetectChatTemplate(R"J({{- "[SYSTEM_PROMPT] " + system_message + "[/SYSTEM_PROMPT][INST] " }})J"),
            ChatTemplate::kMistralV7Tekken);
  EXPECT_NE(DetectChatTemplate(R"J({{- '[SYSTEM_PROMPT]' + s + '[/SYSTEM_PROMPT]' }}{{- '[INST] ' + c }})J"),
            ChatTemplate::kMistralV7Tekken);
  EXPECT_EQ(DetectChatTemplate(R"J({{- '[AVAILABLE_TOOLS]' }}{{- '[INST]' + c + '[/INST]' }})J"), ChatTemplate::kMistralV3);
  EXPECT_EQ(ChatTemplateByName("mistral-v7-tekken").value(), ChatTemplate::kMistralV7Tekken);
}

}  // namespace
}  // namespace bmad::http
