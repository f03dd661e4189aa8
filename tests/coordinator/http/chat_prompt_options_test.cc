// ChatPromptOptions: vLLM's continue_final_message and chat_template_kwargs' enable_thinking.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "coordinator/http/chat_format_detect.h"
#include "coordinator/http/chat_template.h"

namespace bmad::http {
namespace {

using ::testing::HasSubstr;

constexpr ChatTemplate kEveryFormat[] = {
    ChatTemplate::kChatML, ChatTemplate::kLlama2,        ChatTemplate::kLlama3, ChatTemplate::kLlama31,
    ChatTemplate::kMistral, ChatTemplate::kMistralV3,    ChatTemplate::kMistralLegacy, ChatTemplate::kMistralV7Tekken,
    ChatTemplate::kZephyr, ChatTemplate::kPhi3,          ChatTemplate::kGemma,
    ChatTemplate::kDeepSeekR1, ChatTemplate::kPlain};

std::vector<ChatMessage> Prefilled(std::string answer) {
  return {{ChatRole::kSystem, "Be brief."},
          {ChatRole::kUser, "What is 6 x 7?"},
          {ChatRole::kAssistant, std::move(answer)}};
}

ChatPromptOptions Continuing() {
  ChatPromptOptions options;
  options.add_generation_prompt = false;
  options.continue_final_message = true;
  return options;
}

Result<ChatPrompt> Render(const ChatFormat& format, const std::vector<ChatMessage>& messages,
                          const ChatPromptOptions& options) {
  return RenderChatPrompt(format, messages, options, std::chrono::system_clock::time_point{});
}

std::string Finished(const ChatFormat& format, const std::vector<ChatMessage>& messages) {
  Result<ChatPrompt> p = RenderChatPrompt(format, messages, false, std::chrono::system_clock::time_point{});
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? p->text : "";
}

TEST(ContinueFinalMessage, EveryFormatEndsRightAfterTheAnswerItWrote) {
  for (ChatTemplate t : kEveryFormat) {
    SCOPED_TRACE(std::string(ChatTemplateName(t)));
    const std::vector<ChatMessage> messages = Prefilled("The answer is");
    Result<ChatPrompt> open = Render(t, messages, Continuing());
    ASSERT_TRUE(open.ok()) << open.status().ToString();
    // The finished conversation, cut: nothing of the turn's end (an end-of-turn marker, an EOS)
    // is left, and nothing else is changed.
    const std::string finished = Finished(t, messages);
    EXPECT_TRUE(finished.starts_with(open->text)) << open->text << "\n---\n" << finished;
    EXPECT_TRUE(open->text.ends_with("The answer is")) << open->text;
    EXPECT_GT(finished.size(), open->text.size());
    // The client's text is still marked as the client's, up to the end.
    ASSERT_FALSE(open->client_spans.empty());
    const ChatPrompt::Span& last = open->client_spans.back();
    EXPECT_EQ(last.begin + last.length, open->text.size());
    EXPECT_EQ(open->text.substr(open->text.size() - 13), "The answer is");
  }
}

TEST(ContinueFinalMessage, ExactTextForChatMLAndLlama3) {
  Result<ChatPrompt> chatml = Render(ChatTemplate::kChatML, Prefilled("The answer is "), Continuing());
  ASSERT_TRUE(chatml.ok());
  // ChatML writes contents as they are: the trailing space stays.
  EXPECT_EQ(chatml->text,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 6 x 7?<|im_end|>\n"
            "<|im_start|>assistant\nThe answer is ");
  // Llama 3 strips contents, so the cut falls after the stripped answer (as transformers cuts).
  Result<ChatPrompt> llama3 = Render(ChatTemplate::kLlama3, Prefilled("The answer is "), Continuing());
  ASSERT_TRUE(llama3.ok());
  EXPECT_EQ(llama3->text,
            "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user"
            "<|end_header_id|>\n\nWhat is 6 x 7?<|eot_id|><|start_header_id|>assistant<|end_header_id|>"
            "\n\nThe answer is");
}

TEST(ContinueFinalMessage, Qwen3KeepsTheReasoningBlockBeforeTheAnswer) {
  ChatFormat qwen3(ChatTemplate::kChatML);
  qwen3.reasoning_turns = true;
  Result<ChatPrompt> p = Render(qwen3, Prefilled("<think>\nsix sevens\n</think>\n\nIt is"), Continuing());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->text.ends_with("<|im_start|>assistant\n<think>\nsix sevens\n</think>\n\nIt is")) << p->text;
  // Only reasoning, which this format writes in the last turn: the model goes on reasoning.
  p = Render(qwen3, Prefilled("<think>\nsix sevens\n</think>"), Continuing());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->text.ends_with("<|im_start|>assistant\n<think>\nsix sevens")) << p->text;
}

TEST(ContinueFinalMessage, RefusedWhereThereIsNothingToContinue) {
  auto error = [](const ChatFormat& format, const std::vector<ChatMessage>& messages,
                  const ChatPromptOptions& options) {
    Result<ChatPrompt> p = Render(format, messages, options);
    EXPECT_FALSE(p.ok());
    return p.ok() ? std::string() : p.status().message();
  };
  ChatPromptOptions both = Continuing();
  both.add_generation_prompt = true;
  EXPECT_THAT(error(ChatTemplate::kChatML, Prefilled("x"), both),
              HasSubstr("'continue_final_message' and 'add_generation_prompt' cannot both be true"));
  EXPECT_THAT(error(ChatTemplate::kChatML, {{ChatRole::kUser, "Tell me"}}, Continuing()),
              HasSubstr("the final message, 'messages[0]', has role 'user'"));
  EXPECT_THAT(error(ChatTemplate::kChatML, Prefilled(""), Continuing()), HasSubstr("'messages[2]', has no content"));
  // Whitespace a stripping format drops; reasoning DeepSeek-R1 drops.
  EXPECT_THAT(error(ChatTemplate::kLlama3, Prefilled("  \n"), Continuing()), HasSubstr("no content the llama3"));
  EXPECT_THAT(error(ChatTemplate::kDeepSeekR1, Prefilled("<think>hmm</think>"), Continuing()),
              HasSubstr("no content the deepseek-r1"));
  // The format's own rules still come first.
  EXPECT_THAT(error(ChatTemplate::kLlama2, {{ChatRole::kAssistant, "Hi"}}, Continuing()), HasSubstr("'messages[0]'"));
}

TEST(EnableThinking, FalseOpensAnEmptyReasoningBlockWhereTheTemplateHasTheSwitch) {
  ChatFormat qwen3(ChatTemplate::kChatML);
  qwen3.reasoning_turns = true;
  qwen3.thinking_switch = true;
  const std::vector<ChatMessage> messages = {{ChatRole::kUser, "Hi"}};
  ChatPromptOptions off;
  off.enable_thinking = false;
  Result<ChatPrompt> p = Render(qwen3, messages, off);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->text, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  // True, or not given: the template's own generation prompt.
  ChatPromptOptions on;
  on.enable_thinking = true;
  EXPECT_EQ(Render(qwen3, messages, on)->text, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(Render(qwen3, messages, ChatPromptOptions{})->text, Render(qwen3, messages, on)->text);
  // No generation prompt, no block.
  off.add_generation_prompt = false;
  EXPECT_EQ(Render(qwen3, messages, off)->text, "<|im_start|>user\nHi<|im_end|>\n");
  // A template without the switch ignores it, as Jinja ignores a variable it does not read.
  off.add_generation_prompt = true;
  for (ChatTemplate t : kEveryFormat) {
    SCOPED_TRACE(std::string(ChatTemplateName(t)));
    EXPECT_EQ(Render(t, messages, off)->text, Render(t, messages, ChatPromptOptions{})->text);
  }
}

TEST(EnableThinking, DetectedFromTheTemplateText) {
  const std::optional<ChatFormat> hybrid = DetectChatFormat(
      "{%- set ns = namespace(last_query_index=messages|length - 1) %}{{- '<|im_start|>' }}"
      "{%- if '</think>' in content %}{%- endif %}{%- if add_generation_prompt %}"
      "{{- '<|im_start|>assistant\\n' }}{%- if enable_thinking is defined and enable_thinking is false %}"
      "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}");
  ASSERT_TRUE(hybrid.has_value());
  EXPECT_TRUE(hybrid->thinking_switch);
  const std::optional<ChatFormat> plain =
      DetectChatFormat("{%- for message in messages %}{{- '<|im_start|>' + message.role }}{%- endfor %}");
  ASSERT_TRUE(plain.has_value());
  EXPECT_FALSE(plain->thinking_switch);
}

}  // namespace
}  // namespace bmad::http
