// ReasoningSplit: a chat answer's "<think>" block apart from its content, whole and in pieces;
// PromptOpensReasoning: which rendered prompts leave the block open.
#include "coordinator/http/reasoning_split.h"

#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "coordinator/http/chat_template.h"

namespace bmad::http {
namespace {

constexpr ReasoningStart kOpen = ReasoningStart::kOpen;
constexpr ReasoningStart kMayOpen = ReasoningStart::kMayOpen;
constexpr ReasoningStart kAtOnce = ReasoningStart::kMayOpenAtOnce;

// The answer fed in the given pieces, then finished: every part joined.
ReasoningSplit::Parts SplitPieces(ReasoningStart start, const std::vector<std::string_view>& pieces) {
  ReasoningSplit split(start);
  ReasoningSplit::Parts all;
  auto take = [&](ReasoningSplit::Parts p) {
    all.reasoning += p.reasoning;
    all.content += p.content;
  };
  for (std::string_view piece : pieces) take(split.Add(piece));
  take(split.Finish());
  return all;
}

// The answer fed one byte at a time: the same parts as whole.
ReasoningSplit::Parts SplitBytes(ReasoningStart start, std::string_view answer) {
  std::vector<std::string_view> bytes;
  for (size_t i = 0; i < answer.size(); ++i) bytes.push_back(answer.substr(i, 1));
  return SplitPieces(start, bytes);
}

TEST(ReasoningSplitTest, AnswerThatOpensTheBlockItself) {
  // Qwen3's hybrid models, thinking: the block first, the markers in neither part.
  const std::string answer = "<think>\nFirst, 2+2.\n</think>\n\nIt is 4.";
  for (const auto& parts : {SplitPieces(kMayOpen, {answer}), SplitBytes(kMayOpen, answer)}) {
    EXPECT_EQ(parts.reasoning, "\nFirst, 2+2.\n");
    EXPECT_EQ(parts.content, "\n\nIt is 4.");
  }
}

TEST(ReasoningSplitTest, PromptThatOpenedTheBlock) {
  // R1's and QwQ's generation prompts end with "<think>\n": the answer starts inside it.
  const std::string answer = "Let me see.\n</think>\n\nYes.";
  for (const auto& parts : {SplitPieces(kOpen, {answer}), SplitBytes(kOpen, answer)}) {
    EXPECT_EQ(parts.reasoning, "Let me see.\n");
    EXPECT_EQ(parts.content, "\n\nYes.");
  }
}

TEST(ReasoningSplitTest, BlockNeverClosedIsAllReasoning) {
  // Cut by max_tokens while thinking; the held-back "</th" is reasoning text at the end.
  EXPECT_EQ(SplitPieces(kOpen, {"Still thinking </th"}).reasoning, "Still thinking </th");
  EXPECT_EQ(SplitPieces(kOpen, {"Still thinking </th"}).content, "");
  EXPECT_EQ(SplitPieces(kMayOpen, {"<think>half", " a thought"}).reasoning, "half a thought");
}

TEST(ReasoningSplitTest, AnswerWithoutBlockIsAllContent) {
  for (const auto& parts : {SplitPieces(kMayOpen, {"Hello there."}), SplitBytes(kMayOpen, "Hello there.")}) {
    EXPECT_EQ(parts.reasoning, "");
    EXPECT_EQ(parts.content, "Hello there.");
  }
  // Leading whitespace stays with content that opens no block.
  EXPECT_EQ(SplitBytes(kMayOpen, "\n\n Hi").content, "\n\n Hi");
  // A "<think>" later in the content is content.
  EXPECT_EQ(SplitBytes(kMayOpen, "Say <think> and </think>.").content, "Say <think> and </think>.");
  // The marker's start alone at the end is content.
  EXPECT_EQ(SplitPieces(kMayOpen, {"<thi"}).content, "<thi");
  EXPECT_EQ(SplitPieces(kMayOpen, {"<thin", "g>"}).content, "<thing>");
  EXPECT_EQ(SplitPieces(kMayOpen, {}).content, "");
}

TEST(ReasoningSplitTest, AMarkerWrittenAgainInsideAnOpenBlockIsDropped) {
  // As vLLM's deepseek_r1 parser drops it: the prompt opened the block, the model opens it again.
  for (const auto& parts : {SplitPieces(kOpen, {"<think>\nHm.</think>A"}), SplitBytes(kOpen, " <think>Hm.</think>A")}) {
    EXPECT_EQ(parts.reasoning.substr(parts.reasoning.find_first_not_of('\n')), "Hm.");
    EXPECT_EQ(parts.content, "A");
  }
  // Whitespace without the marker stays reasoning, and so does an end that looked like one.
  EXPECT_EQ(SplitPieces(kOpen, {"\n", "x</think>"}).reasoning, "\nx");
  EXPECT_EQ(SplitPieces(kOpen, {" <thi"}).reasoning, " <thi");
  EXPECT_EQ(SplitPieces(kOpen, {"<", "/think>c"}).content, "c");
}

TEST(ReasoningSplitTest, AtOnceTheMarkerMustBeTheVeryFirstText) {
  // What a replica's gate takes for an opening: the marker as the first token.
  EXPECT_EQ(SplitBytes(kAtOnce, "<think>r</think>{}").reasoning, "r");
  EXPECT_EQ(SplitBytes(kAtOnce, "<think>r</think>{}").content, "{}");
  const ReasoningSplit::Parts spaced = SplitBytes(kAtOnce, "\n<think>r</think>{}");
  EXPECT_EQ(spaced.reasoning, "");
  EXPECT_EQ(spaced.content, "\n<think>r</think>{}");
}

TEST(ReasoningSplitTest, WhitespaceBeforeTheOpeningMarkerGoesWithIt) {
  const ReasoningSplit::Parts parts = SplitPieces(kMayOpen, {"\n ", "<think>", "r", "</think>", "c"});
  EXPECT_EQ(parts.reasoning, "r");
  EXPECT_EQ(parts.content, "c");
}

TEST(ReasoningSplitTest, PiecesComeOutAsSoonAsTheyAreKnown) {
  ReasoningSplit split(kOpen);
  ReasoningSplit::Parts p = split.Add("abc</");
  EXPECT_EQ(p.reasoning, "abc");  // "</" may begin the marker: held back
  EXPECT_EQ(p.content, "");
  p = split.Add("b>x");  // it was not the marker
  EXPECT_EQ(p.reasoning, "</b>x");
  p = split.Add("</think");
  EXPECT_EQ(p.reasoning, "");
  p = split.Add("> done");
  EXPECT_EQ(p.reasoning, "");
  EXPECT_EQ(p.content, " done");
  p = split.Add(" more </think>");  // content is content, markers and all
  EXPECT_EQ(p.content, " more </think>");
  p = split.Finish();
  EXPECT_EQ(p.reasoning, "");
  EXPECT_EQ(p.content, "");
}

TEST(ReasoningSplitTest, ReasoningAndContentInOnePiece) {
  ReasoningSplit split(kMayOpen);
  EXPECT_EQ(split.Add("").content, "");
  const ReasoningSplit::Parts p = split.Add("<think>a</think>b");
  EXPECT_EQ(p.reasoning, "a");
  EXPECT_EQ(p.content, "b");
}

TEST(ReasoningSplitTest, MultiByteCharactersAreNeverCut) {
  // Held-back text is an ASCII marker's start, so a UTF-8 character stays whole.
  const std::string answer = "<think>d\xC3\xA9j\xC3\xA0</think>\xE2\x9C\x93";
  const ReasoningSplit::Parts parts = SplitBytes(kMayOpen, answer);
  EXPECT_EQ(parts.reasoning, "d\xC3\xA9j\xC3\xA0");
  EXPECT_EQ(parts.content, "\xE2\x9C\x93");
}

ChatPrompt RenderedPrompt(const ChatFormat& format, const std::vector<ChatMessage>& messages,
                    const ChatPromptOptions& options) {
  Result<ChatPrompt> prompt = RenderChatPrompt(format, messages, options);
  EXPECT_TRUE(prompt.ok()) << prompt.status().ToString();
  return prompt.ok() ? *prompt : ChatPrompt{};
}

TEST(PromptOpensReasoningTest, GenerationPromptThatOpensTheBlock) {
  const std::vector<ChatMessage> messages = {{ChatRole::kUser, "Why?"}};
  ChatFormat r1(ChatTemplate::kDeepSeekR1);
  EXPECT_TRUE(PromptOpensReasoning(RenderedPrompt(r1, messages, {}), false));
  r1.opens_think = false;  // the first R1 template: the model writes "<think>" itself
  EXPECT_FALSE(PromptOpensReasoning(RenderedPrompt(r1, messages, {}), false));

  ChatFormat qwq(ChatTemplate::kChatML);
  qwq.opens_think = true;
  EXPECT_TRUE(PromptOpensReasoning(RenderedPrompt(qwq, messages, {}), false));
  ChatPromptOptions no_prompt;
  no_prompt.add_generation_prompt = false;
  EXPECT_FALSE(PromptOpensReasoning(RenderedPrompt(qwq, messages, no_prompt), false));
}

TEST(PromptOpensReasoningTest, EmptyBlockOfThinkingSwitchedOff) {
  ChatFormat qwen3(ChatTemplate::kChatML);
  qwen3.reasoning_turns = true;
  qwen3.thinking_switch = true;
  ChatPromptOptions off;
  off.enable_thinking = false;
  const std::vector<ChatMessage> messages = {{ChatRole::kUser, "Hi"}};
  const ChatPrompt prompt = RenderedPrompt(qwen3, messages, off);
  ASSERT_TRUE(prompt.text.ends_with("<think>\n\n</think>\n\n"));
  EXPECT_FALSE(PromptOpensReasoning(prompt, false));
  EXPECT_FALSE(PromptOpensReasoning(RenderedPrompt(qwen3, messages, {}), false));
}

TEST(PromptOpensReasoningTest, MessagesOwnMarkersOpenNothing) {
  // A user who writes "<think>" opens no block for the model.
  const ChatPrompt prompt = RenderedPrompt(ChatFormat(ChatTemplate::kChatML), {{ChatRole::kUser, "Say <think>"}}, {});
  EXPECT_FALSE(PromptOpensReasoning(prompt, false));
}

TEST(PromptOpensReasoningTest, ContinuedFinalMessageInsideItsBlock) {
  ChatPromptOptions cont;
  cont.add_generation_prompt = false;
  cont.continue_final_message = true;
  const ChatFormat chatml(ChatTemplate::kChatML);
  const ChatPrompt inside =
      RenderedPrompt(chatml, {{ChatRole::kUser, "Q"}, {ChatRole::kAssistant, "<think>\nLet me"}}, cont);
  EXPECT_TRUE(PromptOpensReasoning(inside, true));
  const ChatPrompt after =
      RenderedPrompt(chatml, {{ChatRole::kUser, "Q"}, {ChatRole::kAssistant, "<think>x</think>The answer"}}, cont);
  EXPECT_FALSE(PromptOpensReasoning(after, true));
}

}  // namespace
}  // namespace bmad::http
