#include "coordinator/http/chat_template.h"

#include <chrono>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/config/config.h"
#include "coordinator/http/chat_format_detect.h"

namespace bmad::http {
namespace {

using ::testing::HasSubstr;

// A system prompt and two user turns around one assistant reply: every rule of every format
// (system placement, turn separators, later-turn BOS, generation prompt) shows up in it.
std::vector<ChatMessage> Conversation() {
  return {{ChatRole::kSystem, "You are helpful."},
          {ChatRole::kUser, "Hi"},
          {ChatRole::kAssistant, "Hello!"},
          {ChatRole::kUser, "How are you?"}};
}

std::chrono::system_clock::time_point Utc(int year, unsigned month, unsigned day, int hour = 0) {
  const std::chrono::sys_days date = std::chrono::year{year} / std::chrono::month{month} / std::chrono::day{day};
  return date + std::chrono::hours{hour};
}

std::string Apply(const ChatFormat& format, const std::vector<ChatMessage>& messages,
                  bool add_generation_prompt = true,
                  std::chrono::system_clock::time_point now = Utc(2026, 12, 2)) {
  Result<std::string> text = ApplyChatTemplate(format, messages, add_generation_prompt, now);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? *text : "";
}

TEST(ApplyChatTemplate, ChatML) {
  EXPECT_EQ(Apply(ChatTemplate::kChatML, Conversation()),
            "<|im_start|>system\nYou are helpful.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n"
            "<|im_start|>user\nHow are you?<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(Apply(ChatTemplate::kChatML, {{ChatRole::kUser, " Hi "}}, false),
            "<|im_start|>user\n Hi <|im_end|>\n");  // content kept as is
}

TEST(ApplyChatTemplate, Llama2FoldsSystemIntoFirstTurnAndOpensLaterTurnsWithBos) {
  EXPECT_EQ(Apply(ChatTemplate::kLlama2, Conversation()),
            "[INST] <<SYS>>\nYou are helpful.\n<</SYS>>\n\nHi [/INST] Hello! </s>"
            "<s>[INST] How are you? [/INST]");
  // No system message; contents are stripped; nothing is added for the generation prompt.
  EXPECT_EQ(
      Apply(ChatTemplate::kLlama2,
            {{ChatRole::kUser, "  Hi\n"}, {ChatRole::kAssistant, " Yo "}, {ChatRole::kUser, "Bye"}},
            false),
      "[INST] Hi [/INST] Yo </s><s>[INST] Bye [/INST]");
}

TEST(ApplyChatTemplate, Llama3) {
  EXPECT_EQ(Apply(ChatTemplate::kLlama3, Conversation()),
            "<|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(Apply(ChatTemplate::kLlama3, {{ChatRole::kUser, "\n Hi \t"}}, false),
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
  // Jinja's trim is Python's str.strip(): Unicode whitespace too (U+3000, U+00A0, U+2003, U+0085,
  // the ASCII separators \x1c-\x1f), whole characters only; other characters stay (U+200B is no
  // whitespace to Python).
  EXPECT_EQ(Apply(ChatTemplate::kLlama3, {{ChatRole::kUser, "\u3000\u00a0\x1fHi\u2003\u0085"}}, false),
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
  EXPECT_EQ(Apply(ChatTemplate::kLlama3, {{ChatRole::kUser, "\u200bHi\u00e9"}}, false),
            "<|start_header_id|>user<|end_header_id|>\n\n\u200bHi\u00e9<|eot_id|>");
  EXPECT_EQ(Apply(ChatTemplate::kLlama3, {{ChatRole::kUser, "\u2028 \u3000"}}, false),
            "<|start_header_id|>user<|end_header_id|>\n\n<|eot_id|>");
}

TEST(ApplyChatTemplate, Llama31AlwaysOpensWithTheDatedSystemBlock) {
  EXPECT_EQ(Apply(ChatTemplate::kLlama31, Conversation()),
            "<|start_header_id|>system<|end_header_id|>\n\n"
            "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
            "You are helpful.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  // Without a system message the block is still there, empty after the date; the system
  // message is stripped as the other contents are.
  EXPECT_EQ(Apply(ChatTemplate::kLlama31, {{ChatRole::kUser, "Hi"}}, false),
            "<|start_header_id|>system<|end_header_id|>\n\n"
            "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
  EXPECT_THAT(Apply(ChatTemplate::kLlama31, {{ChatRole::kSystem, " S \n"}, {ChatRole::kUser, "u"}}),
              HasSubstr("2024\n\nS<|eot_id|><|start_header_id|>user"));
  // Only the first message is the block's: a later system message is a turn of its own.
  EXPECT_THAT(Apply(ChatTemplate::kLlama31, {{ChatRole::kUser, "u"}, {ChatRole::kSystem, "late"}}),
              HasSubstr("<|eot_id|><|start_header_id|>system<|end_header_id|>\n\nlate<|eot_id|>"));
}

TEST(ApplyChatTemplate, Llama31WithoutAFixedDateWritesTheRequestsDayAndItsOwnValues) {
  ChatFormat format(ChatTemplate::kLlama31);
  format.date.clear();
  format.knowledge_cutoff = "March 2025";
  format.default_system = "Be brief.";
  EXPECT_EQ(Apply(format, {{ChatRole::kUser, "Hi"}}, true, Utc(2026, 12, 2, 23)),
            "<|start_header_id|>system<|end_header_id|>\n\n"
            "Cutting Knowledge Date: March 2025\nToday Date: 02 Dec 2026\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_THAT(Apply(format, {{ChatRole::kUser, "Hi"}}, true, Utc(2027, 1, 1)),
              HasSubstr("Today Date: 01 Jan 2027\n"));
  // The caller's system message replaces the default one.
  const std::string own = Apply(format, {{ChatRole::kSystem, "Mine."}, {ChatRole::kUser, "Hi"}});
  EXPECT_THAT(own, HasSubstr("\n\nMine.<|eot_id|>"));
  EXPECT_THAT(own, ::testing::Not(HasSubstr("Be brief.")));
}

TEST(ApplyChatTemplate, ChatMLWritesTheDefaultSystemPromptOnlyWhenTheCallerHasNone) {
  ChatFormat qwen(ChatTemplate::kChatML);
  qwen.default_system = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
  EXPECT_EQ(Apply(qwen, {{ChatRole::kUser, "Hi"}}),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
            "assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(Apply(qwen, Conversation()), Apply(ChatTemplate::kChatML, Conversation()));
}

TEST(ApplyChatTemplate, Qwen3DropsEarlierReasoningAndGivesLaterTurnsAThinkBlock) {
  ChatFormat qwen3(ChatTemplate::kChatML);
  qwen3.reasoning_turns = true;
  // Before the last user message: only the answer after the last "</think>" stays.
  EXPECT_EQ(Apply(qwen3, {{ChatRole::kUser, "Hi"},
                          {ChatRole::kAssistant, "<think>\nLet me greet.\n</think>\n\nHello!"},
                          {ChatRole::kUser, "How?"}}),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
            "<|im_start|>user\nHow?<|im_end|>\n<|im_start|>assistant\n");
  // After it: reasoning kept in a think block; the conversation's last message gets one even
  // without reasoning; a middle one without reasoning stays as it is.
  EXPECT_EQ(Apply(qwen3, {{ChatRole::kUser, "Q"},
                          {ChatRole::kAssistant, "<think>r1</think>a1"},
                          {ChatRole::kAssistant, "a2"},
                          {ChatRole::kAssistant, "a3"}},
                  false),
            "<|im_start|>user\nQ<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nr1\n</think>\n\na1<|im_end|>\n"
            "<|im_start|>assistant\na2<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\na3<|im_end|>\n");
  // Without reasoning turns nothing is touched, and user contents never are.
  const std::vector<ChatMessage> think_in_user = {{ChatRole::kUser, "<think>x</think>y"}};
  EXPECT_EQ(Apply(qwen3, think_in_user), Apply(ChatTemplate::kChatML, think_in_user));
  const std::vector<ChatMessage> history = {{ChatRole::kUser, "Hi"},
                                            {ChatRole::kAssistant, "<think>t</think>Hello"},
                                            {ChatRole::kUser, "Bye"}};
  EXPECT_THAT(Apply(ChatTemplate::kChatML, history), HasSubstr("assistant\n<think>t</think>Hello<|im_end|>"));
}

// What RenderChatPrompt marks as the clients' text, one string per span.
std::vector<std::string> ClientTexts(const ChatPrompt& p) {
  std::vector<std::string> out;
  size_t end = 0;
  for (const ChatPrompt::Span& s : p.client_spans) {
    EXPECT_GT(s.length, 0u);
    EXPECT_GE(s.begin, end) << "spans sorted and disjoint";
    end = s.begin + s.length;
    EXPECT_LE(end, p.text.size());
    out.push_back(p.text.substr(s.begin, s.length));
  }
  return out;
}

TEST(RenderChatPrompt, MarksExactlyTheMessagesContentInEveryFormat) {
  // Contents with outer blanks (stripped by some formats) and a forged turn marker of each family.
  const std::vector<ChatMessage> conversation = {
      {ChatRole::kSystem, " S<|im_start|> "},
      {ChatRole::kUser, "U1</s><|eot_id|>"},
      {ChatRole::kAssistant, "A1<end_of_turn>"},
      {ChatRole::kUser, "\nU2 [/INST]<|end|>\n"}};
  struct Case {
    ChatTemplate t;
    std::vector<std::string> spans;
  };
  const std::vector<Case> cases = {
      {ChatTemplate::kChatML, {" S<|im_start|> ", "U1</s><|eot_id|>", "A1<end_of_turn>", "\nU2 [/INST]<|end|>\n"}},
      {ChatTemplate::kLlama3, {"S<|im_start|>", "U1</s><|eot_id|>", "A1<end_of_turn>", "U2 [/INST]<|end|>"}},
      {ChatTemplate::kLlama31, {"S<|im_start|>", "U1</s><|eot_id|>", "A1<end_of_turn>", "U2 [/INST]<|end|>"}},
      // The system prompt and the first user message sit in one turn: two spans.
      {ChatTemplate::kLlama2, {" S<|im_start|> ", "U1</s><|eot_id|>", "A1<end_of_turn>", "U2 [/INST]<|end|>"}},
      {ChatTemplate::kMistral,
       {" S<|im_start|> ", "U1</s><|eot_id|>", "A1<end_of_turn>", "\nU2 [/INST]<|end|>\n"}},
      // The system prompt goes with the last user message.
      {ChatTemplate::kMistralV3,
       {"U1</s><|eot_id|>", "A1<end_of_turn>", " S<|im_start|> ", "\nU2 [/INST]<|end|>\n"}},
      {ChatTemplate::kMistralLegacy,
       {" S<|im_start|> ", "U1</s><|eot_id|>", "A1<end_of_turn>", "\nU2 [/INST]<|end|>\n"}},
      {ChatTemplate::kMistralV7Tekken,
       {" S<|im_start|> ", "U1</s><|eot_id|>", "A1<end_of_turn>", "\nU2 [/INST]<|end|>\n"}},
      {ChatTemplate::kGemma, {" S<|im_start|> ", "U1</s><|eot_id|>", "A1<end_of_turn>", "U2 [/INST]<|end|>"}},
      {ChatTemplate::kDeepSeekR1, {" S<|im_start|> ", "U1</s><|eot_id|>", "A1<end_of_turn>", "\nU2 [/INST]<|end|>\n"}},
      {ChatTemplate::kZephyr, {" S<|im_start|> ", "U1</s><|eot_id|>", "A1<end_of_turn>", "\nU2 [/INST]<|end|>\n"}},
      {ChatTemplate::kPhi3, {" S<|im_start|> ", "U1</s><|eot_id|>", "A1<end_of_turn>", "\nU2 [/INST]<|end|>\n"}},
      {ChatTemplate::kPlain, {" S<|im_start|> ", "U1</s><|eot_id|>", "A1<end_of_turn>", "\nU2 [/INST]<|end|>\n"}},
  };
  for (const Case& c : cases) {
    Result<ChatPrompt> p = RenderChatPrompt(c.t, conversation, true, Utc(2026, 12, 2));
    ASSERT_TRUE(p.ok()) << ChatTemplateName(c.t) << ": " << p.status().ToString();
    EXPECT_EQ(ClientTexts(*p), c.spans) << ChatTemplateName(c.t);
  }
  // Llama-2 strips the first turn as a whole: an empty user message after a system prompt
  // leaves the system's span, and nothing of the template's "<</SYS>>" block is marked.
  Result<ChatPrompt> empty_user =
      RenderChatPrompt(ChatTemplate::kLlama2, std::vector<ChatMessage>{{ChatRole::kSystem, "S"}, {ChatRole::kUser, "  "}}, true);
  ASSERT_TRUE(empty_user.ok());
  EXPECT_EQ(ClientTexts(*empty_user), std::vector<std::string>{"S"});
  // A model's default system prompt and Llama-3.1's dated block are the template's, not a client's.
  ChatFormat qwen(ChatTemplate::kChatML);
  qwen.default_system = "You are Qwen.";
  Result<ChatPrompt> with_default = RenderChatPrompt(qwen, std::vector<ChatMessage>{{ChatRole::kUser, "Hi"}}, true);
  ASSERT_TRUE(with_default.ok());
  EXPECT_EQ(ClientTexts(*with_default), std::vector<std::string>{"Hi"});
  Result<ChatPrompt> dated = RenderChatPrompt(ChatTemplate::kLlama31, std::vector<ChatMessage>{{ChatRole::kUser, "Hi"}}, true);
  ASSERT_TRUE(dated.ok());
  EXPECT_EQ(ClientTexts(*dated), std::vector<std::string>{"Hi"});
  // Qwen3's reasoning block: its markers are the template's, the reasoning and answer the client's.
  ChatFormat qwen3(ChatTemplate::kChatML);
  qwen3.reasoning_turns = true;
  Result<ChatPrompt> reasoned = RenderChatPrompt(
      qwen3, std::vector<ChatMessage>{{ChatRole::kUser, "Q"}, {ChatRole::kAssistant, "<think>\nmull\n</think>\n\nA"}},
      false);
  ASSERT_TRUE(reasoned.ok());
  EXPECT_EQ(reasoned->text, "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nmull\n</think>\n\nA<|im_end|>\n");
  EXPECT_EQ(ClientTexts(*reasoned), (std::vector<std::string>{"Q", "mull", "A"}));
}

TEST(ChatDateString, IsDayMonthAbbreviationYearInUtc) {
  EXPECT_EQ(ChatDateString(Utc(2024, 7, 26)), "26 Jul 2024");
  EXPECT_EQ(ChatDateString(Utc(2026, 12, 2, 23)), "02 Dec 2026");
  EXPECT_EQ(ChatDateString(Utc(2025, 1, 9, 12)), "09 Jan 2025");
  EXPECT_EQ(ChatDateString(Utc(2028, 2, 29)), "29 Feb 2028");
}

TEST(ApplyChatTemplate, MistralPrependsSystemToFirstUserMessage) {
  EXPECT_EQ(Apply(ChatTemplate::kMistral, Conversation()),
            " [INST] You are helpful.\n\nHi [/INST] Hello!</s> [INST] How are you? [/INST]");
  EXPECT_EQ(Apply(ChatTemplate::kMistral, {{ChatRole::kUser, "Hi"}}), " [INST] Hi [/INST]");
}

// Mistral-7B-Instruct v0.3's template, as Hugging Face's Jinja renders it (and vLLM serves it):
// the system prompt rides on the last message when that is the user's, and is left out when the
// conversation ends with the assistant; assistant contents are stripped.
TEST(ApplyChatTemplate, MistralV3PutsSystemOnTheLastUserMessage) {
  EXPECT_EQ(Apply(ChatTemplate::kMistralV3, Conversation()),
            "[INST] Hi[/INST] Hello!</s>[INST] You are helpful.\n\nHow are you?[/INST]");
  EXPECT_EQ(Apply(ChatTemplate::kMistralV3, {{ChatRole::kUser, " Hi "}}), "[INST]  Hi [/INST]");
  EXPECT_EQ(Apply(ChatTemplate::kMistralV3, {{ChatRole::kSystem, "S"},
                                             {ChatRole::kUser, "Hi"},
                                             {ChatRole::kAssistant, "  Hello!\n"}}),
            "[INST] Hi[/INST] Hello!</s>");
}

// The first Hugging Face template of Mistral-7B-Instruct v0.1/v0.2 (older GGUFs carry it): no
// space outside "[INST] u [/INST]", assistant text as it is. It refuses a system message; here
// one goes before the first user message, as the later templates put it.
TEST(ApplyChatTemplate, MistralLegacy) {
  EXPECT_EQ(Apply(ChatTemplate::kMistralLegacy, Conversation()),
            "[INST] You are helpful.\n\nHi [/INST]Hello!</s>[INST] How are you? [/INST]");
  EXPECT_EQ(Apply(ChatTemplate::kMistralLegacy, {{ChatRole::kUser, "Hi"}, {ChatRole::kAssistant, " Yo "}}),
            "[INST] Hi [/INST] Yo </s>");
}

TEST(ApplyChatTemplate, Zephyr) {
  EXPECT_EQ(Apply(ChatTemplate::kZephyr, Conversation()),
            "<|system|>\nYou are helpful.</s>\n"
            "<|user|>\nHi</s>\n"
            "<|assistant|>\nHello!</s>\n"
            "<|user|>\nHow are you?</s>\n"
            "<|assistant|>\n");
  // Its template writes the model's eos_token: another vocabulary's end-of-sentence text.
  ChatFormat other(ChatTemplate::kZephyr);
  other.eos_text = "<|endoftext|>";
  EXPECT_EQ(Apply(other, {{ChatRole::kUser, "Hi"}}), "<|user|>\nHi<|endoftext|>\n<|assistant|>\n");
}

TEST(ApplyChatTemplate, Phi3EndsWithEndOfTextWithoutGenerationPrompt) {
  EXPECT_EQ(Apply(ChatTemplate::kPhi3, Conversation()),
            "<|system|>\nYou are helpful.<|end|>\n"
            "<|user|>\nHi<|end|>\n"
            "<|assistant|>\nHello!<|end|>\n"
            "<|user|>\nHow are you?<|end|>\n"
            "<|assistant|>\n");
  EXPECT_EQ(Apply(ChatTemplate::kPhi3, {{ChatRole::kUser, "Hi"}}, false),
            "<|user|>\nHi<|end|>\n<|endoftext|>");
  // An empty system message writes no turn (the template tests its content).
  EXPECT_EQ(Apply(ChatTemplate::kPhi3, {{ChatRole::kSystem, ""}, {ChatRole::kUser, "Hi"}}),
            "<|user|>\nHi<|end|>\n<|assistant|>\n");
}

TEST(ApplyChatTemplate, GemmaCallsTheAssistantModelAndFoldsSystemIntoFirstTurn) {
  EXPECT_EQ(Apply(ChatTemplate::kGemma, Conversation()),
            "<start_of_turn>user\nYou are helpful.\n\nHi<end_of_turn>\n"
            "<start_of_turn>model\nHello!<end_of_turn>\n"
            "<start_of_turn>user\nHow are you?<end_of_turn>\n"
            "<start_of_turn>model\n");
  EXPECT_EQ(Apply(ChatTemplate::kGemma, {{ChatRole::kUser, " Hi "}}, false),
            "<start_of_turn>user\nHi<end_of_turn>\n");
}

// DeepSeek-R1-Distill-Llama's template as Jinja renders it: the last system message first, once;
// earlier reasoning dropped from assistant turns; the generation prompt opens a think block.
TEST(ApplyChatTemplate, DeepSeekR1) {
  EXPECT_EQ(Apply(ChatTemplate::kDeepSeekR1, Conversation()),
            "You are helpful.<\uFF5CUser\uFF5C>Hi<\uFF5CAssistant\uFF5C>Hello!<\uFF5Cend\u2581of\u2581sentence\uFF5C>"
            "<\uFF5CUser\uFF5C>How are you?<\uFF5CAssistant\uFF5C><think>\n");
  EXPECT_EQ(Apply(ChatTemplate::kDeepSeekR1,
                  {{ChatRole::kUser, "Q"},
                   {ChatRole::kAssistant, "<think>\nhmm\n</think>\n\nA"},
                   {ChatRole::kSystem, "first"},
                   {ChatRole::kSystem, "last"}},
                  false),
            "last<\uFF5CUser\uFF5C>Q<\uFF5CAssistant\uFF5C>\n\nA<\uFF5Cend\u2581of\u2581sentence\uFF5C>");
  ChatFormat bare(ChatTemplate::kDeepSeekR1);
  bare.opens_think = false;
  EXPECT_EQ(Apply(bare, {{ChatRole::kUser, "Q"}}), "<\uFF5CUser\uFF5C>Q<\uFF5CAssistant\uFF5C>");
}

TEST(ApplyChatTemplate, Plain) {
  EXPECT_EQ(Apply(ChatTemplate::kPlain, Conversation()),
            "System: You are helpful.\nUser: Hi\nAssistant: Hello!\nUser: How are you?\n"
            "Assistant:");
  EXPECT_EQ(Apply(ChatTemplate::kPlain, {{ChatRole::kUser, "Hi"}}, false), "User: Hi\n");
}

TEST(ApplyChatTemplate, GenerationPromptIsOnlyTheAssistantOpening) {
  for (const ChatTemplate t : {ChatTemplate::kChatML, ChatTemplate::kLlama3, ChatTemplate::kLlama31,
                               ChatTemplate::kZephyr, ChatTemplate::kGemma, ChatTemplate::kPlain}) {
    const std::string with = Apply(t, Conversation(), true);
    const std::string without = Apply(t, Conversation(), false);
    EXPECT_EQ(with.substr(0, without.size()), without) << ChatTemplateName(t);
    EXPECT_GT(with.size(), without.size()) << ChatTemplateName(t);
  }
  for (const ChatTemplate t : {ChatTemplate::kLlama2, ChatTemplate::kMistral, ChatTemplate::kMistralV3,
                               ChatTemplate::kMistralLegacy}) {
    EXPECT_EQ(Apply(t, Conversation(), true), Apply(t, Conversation(), false));
  }
}

TEST(ValidateChatMessages, AlternatingFormatsRejectBadOrdersNamingTheMessage) {
  struct Case {
    std::vector<ChatMessage> messages;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {{}, {"'messages' must be a non-empty array"}},
      {{{ChatRole::kSystem, "s"}}, {"only a system message"}},
      {{{ChatRole::kUser, "a"}, {ChatRole::kUser, "b"}},
       {"'messages[1]'", "'user' where 'assistant' is expected", "alternate"}},
      {{{ChatRole::kSystem, "s"}, {ChatRole::kAssistant, "a"}},
       {"'messages[1]'", "'assistant' where 'user' is expected"}},
      {{{ChatRole::kAssistant, "a"}}, {"'messages[0]'"}},
      {{{ChatRole::kUser, "u"}, {ChatRole::kSystem, "s"}},
       {"'messages[1]'", "system message only as the first"}},
      {{{ChatRole::kSystem, "s"}, {ChatRole::kSystem, "t"}, {ChatRole::kUser, "u"}},
       {"'messages[1]'", "system message only as the first"}},
  };
  for (const ChatTemplate t :
       {ChatTemplate::kLlama2, ChatTemplate::kMistral, ChatTemplate::kMistralV3, ChatTemplate::kMistralLegacy,
        ChatTemplate::kGemma}) {
    for (const Case& c : cases) {
      const Status status = ValidateChatMessages(t, c.messages);
      ASSERT_FALSE(status.ok()) << ChatTemplateName(t) << " " << c.parts[0];
      EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
      for (const std::string& part : c.parts) EXPECT_THAT(status.message(), HasSubstr(part));
      // ApplyChatTemplate refuses the same conversations.
      EXPECT_EQ(ApplyChatTemplate(t, c.messages, true).status(), status);
    }
  }
}

TEST(ValidateChatMessages, FreeFormatsAcceptAnyOrderButNotNothing) {
  const std::vector<ChatMessage> odd = {
      {ChatRole::kAssistant, "a"}, {ChatRole::kAssistant, "b"}, {ChatRole::kSystem, "late system"}};
  for (const ChatTemplate t : {ChatTemplate::kChatML, ChatTemplate::kLlama3, ChatTemplate::kLlama31,
                               ChatTemplate::kZephyr, ChatTemplate::kPhi3, ChatTemplate::kPlain}) {
    EXPECT_TRUE(ValidateChatMessages(t, odd).ok()) << ChatTemplateName(t);
    EXPECT_FALSE(ValidateChatMessages(t, {}).ok()) << ChatTemplateName(t);
  }
}

TEST(ChatTemplateByName, RoundTripsEveryNameAndRejectsOthers) {
  for (const ChatTemplate t :
       {ChatTemplate::kChatML, ChatTemplate::kLlama2, ChatTemplate::kLlama3, ChatTemplate::kLlama31,
        ChatTemplate::kMistral, ChatTemplate::kMistralV3, ChatTemplate::kMistralLegacy, ChatTemplate::kZephyr,
        ChatTemplate::kPhi3, ChatTemplate::kGemma, ChatTemplate::kDeepSeekR1, ChatTemplate::kPlain}) {
    Result<ChatTemplate> back = ChatTemplateByName(ChatTemplateName(t));
    ASSERT_TRUE(back.ok()) << ChatTemplateName(t);
    EXPECT_EQ(*back, t);
  }
  EXPECT_EQ(ChatTemplateName(ChatTemplate::kChatML), "chatml");
  EXPECT_EQ(ChatTemplateName(ChatTemplate::kLlama3), "llama3");
  EXPECT_EQ(ChatTemplateName(ChatTemplate::kLlama31), "llama3.1");
  const Result<ChatTemplate> unknown = ChatTemplateByName("vicuna");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(), HasSubstr("'vicuna'"));
  EXPECT_THAT(unknown.status().message(), HasSubstr("chatml, llama2, llama3"));
  EXPECT_FALSE(ChatTemplateByName("").ok());
  EXPECT_FALSE(ChatTemplateByName("ChatML").ok());  // names are exact
}

// Excerpts of the Jinja templates shipped in the tokenizer_config.json / GGUF of real models.
TEST(DetectChatTemplate, RecognisesRealTemplates) {
  struct Case {
    const char* model;
    const char* jinja;
    std::optional<ChatTemplate> expected;  // nullopt: not recognised
  };
  const std::vector<Case> cases = {
      {"Qwen2-Instruct",
       "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
       "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
       "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
       "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
       ChatTemplate::kChatML},
      {"Llama-2-chat",
       "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
       "{% set system_message = messages[0]['content'] %}{% else %}"
       "{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
       "{% for message in loop_messages %}{% if loop.index0 == 0 and system_message != false %}"
       "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + "
       "message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}"
       "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + "
       "' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' "
       "+ eos_token }}{% endif %}{% endfor %}",
       ChatTemplate::kLlama2},
      {"Meta-Llama-3-8B-Instruct",
       "{% set loop_messages = messages %}{% for message in loop_messages %}"
       "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ "
       "message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
       "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
       "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
       "{% endif %}",
       ChatTemplate::kLlama3},
      {"Mistral-7B-Instruct-v0.1",
       "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != "
       "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
       "user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}"
       "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == "
       "'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only "
       "user and assistant roles are supported!') }}{% endif %}{% endfor %}",
       ChatTemplate::kMistralLegacy},
      {"Mistral-7B-Instruct-v0.2 (2024 template, mistral-common's v1)",
       "{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content'] %}"
       "{%- set loop_messages = messages[1:] %}{%- else %}{%- set loop_messages = messages %}{%- endif %}"
       "{{- bos_token }}{%- for message in loop_messages %}{%- if message['role'] == 'user' %}"
       "{%- if loop.first and system_message is defined %}"
       "{{- ' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}{%- else %}"
       "{{- ' [INST] ' + message['content'] + ' [/INST]' }}{%- endif %}"
       "{%- elif message['role'] == 'assistant' %}{{- ' ' + message['content'] + eos_token}}{%- endif %}"
       "{%- endfor %}",
       ChatTemplate::kMistral},
      {"Mistral-7B-Instruct-v0.3",
       "{%- if messages[0][\"role\"] == \"system\" %}{%- set system_message = messages[0][\"content\"] %}"
       "{%- set loop_messages = messages[1:] %}{%- endif %}{{- bos_token }}"
       "{%- for message in loop_messages %}{%- if message[\"role\"] == \"user\" %}"
       "{%- if tools is not none and (message == user_messages[-1]) %}{{- \"[AVAILABLE_TOOLS] [\" }}"
       "{%- endif %}{%- if loop.last and system_message is defined %}"
       "{{- \"[INST] \" + system_message + \"\\n\\n\" + message[\"content\"] + \"[/INST]\" }}"
       "{%- else %}{{- \"[INST] \" + message[\"content\"] + \"[/INST]\" }}{%- endif %}"
       "{%- elif message[\"role\"] == \"assistant\" %}{{- \" \" + message[\"content\"]|trim + eos_token}}"
       "{%- endif %}{%- endfor %}",
       ChatTemplate::kMistralV3},
      {"zephyr-7b-beta",
       "{% for message in messages %}\n{% if message['role'] == 'user' %}\n"
       "{{ '<|user|>\\n' + message['content'] + eos_token }}\n"
       "{% elif message['role'] == 'system' %}\n{{ '<|system|>\\n' + message['content'] + "
       "eos_token }}\n{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\\n'  + "
       "message['content'] + eos_token }}\n{% endif %}\n{% if loop.last and "
       "add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}",
       ChatTemplate::kZephyr},
      {"Phi-3-mini-4k-instruct",
       "{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\\n' + "
       "message['content'] + '<|end|>\\n'}}{% elif message['role'] == 'user' %}"
       "{{'<|user|>\\n' + message['content'] + '<|end|>\\n'}}{% elif message['role'] == "
       "'assistant' %}{{'<|assistant|>\\n' + message['content'] + '<|end|>\\n'}}{% endif %}"
       "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}"
       "{{ eos_token }}{% endif %}",
       ChatTemplate::kPhi3},
      {"gemma-2-9b-it",
       "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role "
       "not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == "
       "'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}"
       "{% endif %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + "
       "'<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}"
       "{{'<start_of_turn>model\\n'}}{% endif %}",
       ChatTemplate::kGemma},
      {"DeepSeek-R1-Distill-Llama",
       "{{bos_token}}{{ns.system_prompt}}{%- for message in messages %}{%- if message['role'] == 'user' %}"
       "{{'<\uFF5CUser\uFF5C>' + message['content']}}{%- endif %}"
       "{{'<\uFF5CAssistant\uFF5C>' + content + '<\uFF5Cend\u2581of\u2581sentence\uFF5C>'}}"
       "{%- endfor -%}{% if add_generation_prompt and not ns.is_tool %}"
       "{{'<\uFF5CAssistant\uFF5C><think>\\n'}}{% endif %}",
       ChatTemplate::kDeepSeekR1},
      {"an unknown format",
       "{% for message in messages %}{{'<|turn|>' + message['role'] + message['content']}}{% endfor %}",
       std::nullopt},
      {"no template", "", std::nullopt},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(DetectChatTemplate(c.jinja), c.expected) << c.model;
  }
  EXPECT_EQ(kDefaultChatTemplate, ChatTemplate::kChatML);
  EXPECT_EQ(KnownChatTemplateNames(),
            "chatml, llama2, llama3, llama3.1, mistral, mistral-v3, mistral-legacy, mistral-v7-tekken, zephyr, "
            "phi3, gemma, deepseek-r1, plain");
  // The config refuses a name by its own list (bmad config check has no coordinator code): the
  // same names, so that what it passes the coordinator takes.
  std::string config_names;
  for (std::string_view name : kChatTemplateNames) {
    ASSERT_TRUE(ChatTemplateByName(name).ok()) << name;
    config_names += (config_names.empty() ? "" : ", ") + std::string(name);
  }
  EXPECT_EQ(config_names, KnownChatTemplateNames());
}

// The opening of Llama-3.1's template up to its system block; `date_logic` is where 3.1 and
// 3.2/3.3 differ. Quoted from the models' tokenizer_config.json (JSON escapes resolved, so a
// Jinja "\n" is a backslash and an n here).
std::string Llama31Jinja(const std::string& date_logic, const std::string& default_system = "") {
  return R"({{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
)" + date_logic + R"(
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = ")" + default_system + R"(" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if tools is not none %}
    {{- "Environment: ipython\n" }}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- if tools_in_user_message and not tools is none %}
    {{- "Given the following functions, please respond with a JSON for a function call " }}
{%- endif %}
{%- for message in messages %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %})";
}

TEST(DetectChatFormat, ReadsLlama31sDateAndDefaultSystemFromItsTemplate) {
  // Llama-3.1: a fixed date.
  const std::optional<ChatFormat> v31 = DetectChatFormat(Llama31Jinja(
      "{%- if not date_string is defined %}\n    {%- set date_string = \"26 Jul 2024\" %}\n{%- endif %}"));
  ASSERT_TRUE(v31.has_value());
  EXPECT_EQ(*v31, ChatFormat(ChatTemplate::kLlama31));
  // Llama-3.2 and 3.3: today's date when strftime_now exists (vLLM, transformers), which
  // wins over the fallback literal.
  const std::optional<ChatFormat> v32 = DetectChatFormat(Llama31Jinja(R"({%- if not date_string is defined %}
    {%- if strftime_now is defined %}
        {%- set date_string = strftime_now("%d %b %Y") %}
    {%- else %}
        {%- set date_string = "26 Jul 2024" %}
    {%- endif %}
{%- endif %})"));
  ASSERT_TRUE(v32.has_value());
  EXPECT_EQ(v32->chat_template, ChatTemplate::kLlama31);
  EXPECT_EQ(v32->knowledge_cutoff, "December 2023");
  EXPECT_EQ(v32->date, "");
  EXPECT_EQ(v32->default_system, "");
  // A variant with a default system message and an escaped quote in it (vLLM's tool examples).
  const std::optional<ChatFormat> tools = DetectChatFormat(
      Llama31Jinja("{%- set date_string = '01 Jan 2025' %}", R"(Only reply with a tool call if it doesn\'t \"fail\".)"));
  ASSERT_TRUE(tools.has_value());
  EXPECT_EQ(tools->date, "01 Jan 2025");
  EXPECT_EQ(tools->default_system, "Only reply with a tool call if it doesn't \"fail\".");
  // The rendering matches the template's own output for a user turn.
  EXPECT_EQ(Apply(*v31, {{ChatRole::kUser, " Hi "}}, true),
            "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
            "Today Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
            "Hi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

// The first DeepSeek-R1 templates end the generation prompt at "<｜Assistant｜>"; later ones
// open "<think>\n" after it.
TEST(DetectChatFormat, ReadsWhetherDeepSeekR1OpensAThinkBlock) {
  const std::string later =
      "{{'<\uFF5CUser\uFF5C>' + message['content']}}{% if add_generation_prompt %}"
      "{{'<\uFF5CAssistant\uFF5C><think>\\n'}}{% endif %}";
  const std::string first =
      "{{'<\uFF5CUser\uFF5C>' + message['content']}}{% if add_generation_prompt %}"
      "{{'<\uFF5CAssistant\uFF5C>'}}{% endif %}";
  std::optional<ChatFormat> format = DetectChatFormat(later);
  ASSERT_TRUE(format.has_value());
  EXPECT_EQ(format->chat_template, ChatTemplate::kDeepSeekR1);
  EXPECT_TRUE(format->opens_think);
  format = DetectChatFormat(first);
  ASSERT_TRUE(format.has_value());
  EXPECT_FALSE(format->opens_think);
  EXPECT_TRUE(ChatFormat(ChatTemplate::kDeepSeekR1).opens_think);  // the name: the later template
}

// The layouts Mistral's templates differ in, read from the template: v0.1's first one writes a
// space after each assistant turn's eos_token (Mixtral's and v0.2's do not); the "tekken" ones
// (Mistral-Nemo, Ministral) write v3's turns with no space after [INST], and Nemo's the
// assistant's content as it is. Each as Jinja renders it.
TEST(DetectChatFormat, ReadsTheLayoutOfMistralsTemplates) {
  const std::string v01 =
      "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
      "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token + ' ' }}{% endif %}";
  const std::string tekken_head =
      "{%- for message in loop_messages %}{%- if message[\"role\"] == \"user\" %}"
      "{%- if loop.last and system_message is defined %}"
      "{{- \"[INST]\" + system_message + \"\\n\\n\" + message[\"content\"] + \"[/INST]\" }}{%- else %}"
      "{{- \"[INST]\" + message[\"content\"] + \"[/INST]\" }}{%- endif %}"
      "{%- elif message[\"role\"] == \"assistant\" %}";
  const std::string nemo = tekken_head + "{{- message[\"content\"] + eos_token}}{%- endif %}{%- endfor %}";
  const std::string ministral =
      tekken_head + "{{- \" \" + message[\"content\"]|trim + eos_token}}{%- endif %}{%- endfor %}";
  const std::vector<ChatMessage> conversation = {
      {ChatRole::kSystem, "S"}, {ChatRole::kUser, "Hi"}, {ChatRole::kAssistant, " Yo "}, {ChatRole::kUser, "Who"}};
  const std::vector<ChatMessage> no_system(conversation.begin() + 1, conversation.end());
  auto render = [](const std::string& jinja, const std::vector<ChatMessage>& messages) {
    const std::optional<ChatFormat> format = DetectChatFormat(jinja);
    EXPECT_TRUE(format.has_value());
    return format ? Apply(*format, messages) : "";
  };
  EXPECT_EQ(DetectChatTemplate(v01), ChatTemplate::kMistralLegacy);
  EXPECT_EQ(render(v01, no_system), "[INST] Hi [/INST] Yo </s> [INST] Who [/INST]");
  EXPECT_EQ(DetectChatTemplate(nemo), ChatTemplate::kMistralV3);
  EXPECT_EQ(render(nemo, conversation), "[INST]Hi[/INST] Yo </s>[INST]S\n\nWho[/INST]");
  EXPECT_EQ(render(ministral, conversation), "[INST]Hi[/INST] Yo</s>[INST]S\n\nWho[/INST]");
}

TEST(DetectChatFormat, ReadsQwensDefaultSystemPromptAndReasoningRule) {
  const std::optional<ChatFormat> qwen2 = DetectChatFormat(
      "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
      "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
      "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
      "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}");
  ASSERT_TRUE(qwen2.has_value());
  EXPECT_EQ(qwen2->chat_template, ChatTemplate::kChatML);
  EXPECT_EQ(qwen2->default_system, "You are a helpful assistant.");
  // Qwen2.5: the tools branch opens a system turn for the caller's message first; the
  // default is the later literal that writes a whole turn.
  const std::optional<ChatFormat> qwen25 = DetectChatFormat(R"({%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %})");
  ASSERT_TRUE(qwen25.has_value());
  EXPECT_EQ(qwen25->default_system, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
  EXPECT_FALSE(qwen25->reasoning_turns);
  // Qwen3: the reasoning rule.
  const std::optional<ChatFormat> qwen3 = DetectChatFormat(R"({%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- if '</think>' in content %}
            {%- set content = content.split('</think>')[-1].lstrip('\n') %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
        {%- endif %}
    {%- endif %}
{%- endfor %})");
  ASSERT_TRUE(qwen3.has_value());
  EXPECT_EQ(qwen3->chat_template, ChatTemplate::kChatML);
  EXPECT_TRUE(qwen3->reasoning_turns);
  EXPECT_EQ(qwen3->default_system, "");
  // Plain ChatML (Hermes): no default, and no tools (its template renders none).
  const std::optional<ChatFormat> plain = DetectChatFormat(
      "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + "
      "'<|im_end|>' + '\\n' }}{%- endfor %}");
  ASSERT_TRUE(plain.has_value());
  ChatFormat chatml_without_tools(ChatTemplate::kChatML);
  chatml_without_tools.tools = false;
  EXPECT_EQ(*plain, chatml_without_tools);
}

TEST(ChooseChatFormat, ConfiguredNameThenTheModelsOwnThenChatML) {
  const std::string llama32 = Llama31Jinja("{%- set date_string = strftime_now(\"%d %b %Y\") %}");
  bool detected = true;
  Result<ChatFormat> named = ChooseChatFormat("llama3.1", llama32, &detected);
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  EXPECT_EQ(*named, ChatFormat(ChatTemplate::kLlama31));  // the name's reference values
  EXPECT_FALSE(detected);

  Result<ChatFormat> own = ChooseChatFormat("", llama32, &detected);
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(own->chat_template, ChatTemplate::kLlama31);
  EXPECT_EQ(own->date, "");
  EXPECT_TRUE(detected);

  Result<ChatFormat> unknown = ChooseChatFormat("", "{{ messages }}", &detected);
  ASSERT_TRUE(unknown.ok());
  EXPECT_EQ(*unknown, ChatFormat(kDefaultChatTemplate));
  EXPECT_FALSE(detected);
  EXPECT_EQ(*ChooseChatFormat("", "", nullptr), ChatFormat(kDefaultChatTemplate));

  const Result<ChatFormat> bad = ChooseChatFormat("llama-3", llama32, &detected);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("unknown chat template 'llama-3'"));
}

}  // namespace
}  // namespace bmad::http
