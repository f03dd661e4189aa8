// ToolCallSplit: tool calls apart from a chat answer's content, whole and in pieces, in the three
// formats (hermes blocks, a named function's arguments, tool_choice "required"'s list).
#include "coordinator/http/tool_call_split.h"

#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

namespace bmad::http {
namespace {

// The answer fed in the given pieces, then finished: content joined, calls' pieces merged.
ToolCallSplit::Parts FeedPieces(ToolCallFormat format, const std::vector<std::string_view>& pieces,
                                bool parallel_calls = true, std::string function = "") {
  ToolCallSplit split(format, function, parallel_calls);
  ToolCallSplit::Parts all;
  auto take = [&](ToolCallSplit::Parts p) {
    all.content += p.content;
    for (ToolCallPiece& piece : p.calls) {
      if (!all.calls.empty() && all.calls.back().index == piece.index) {
        EXPECT_TRUE(piece.id.empty()) << "a call's later pieces carry no id";
        all.calls.back().arguments += piece.arguments;
      } else {
        EXPECT_EQ(piece.index, all.calls.size()) << "calls are numbered in order";
        EXPECT_EQ(piece.id.substr(0, 5), "call_");
        EXPECT_EQ(piece.id.size(), 29u);
        all.calls.push_back(piece);
      }
    }
  };
  for (std::string_view piece : pieces) take(split.Add(piece));
  take(split.Finish());
  EXPECT_EQ(split.called(), !all.calls.empty());
  return all;
}

ToolCallSplit::Parts FeedBytes(ToolCallFormat format, std::string_view answer, bool parallel_calls = true) {
  std::vector<std::string_view> bytes;
  for (size_t i = 0; i < answer.size(); ++i) bytes.push_back(answer.substr(i, 1));
  return FeedPieces(format, bytes, parallel_calls);
}

constexpr ToolCallFormat kHermes = ToolCallFormat::kHermes;

TEST(ToolCallSplitTest, HermesBlocksAreCalls) {
  // Qwen2.5's and Qwen3's answer: a sentence, then two calls on their own lines.
  const std::string answer =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\",\"days\":[1,2]}}\n"
      "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  for (const auto& parts : {FeedPieces(kHermes, {answer}), FeedBytes(kHermes, answer)}) {
    EXPECT_EQ(parts.content, "Let me check.");
    ASSERT_EQ(parts.calls.size(), 2u);
    EXPECT_EQ(parts.calls[0].name, "get_weather");
    // Written back in Python's json.dumps layout, as vLLM writes them.
    EXPECT_EQ(parts.calls[0].arguments, "{\"city\": \"Paris\", \"days\": [1, 2]}");
    EXPECT_EQ(parts.calls[1].name, "get_time");
    EXPECT_EQ(parts.calls[1].arguments, "{}");
  }
}

TEST(ToolCallSplitTest, EachCallHasItsOwnId) {
  const ToolCallSplit::Parts parts = FeedPieces(
      kHermes, {"<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call><tool_call>{\"name\": \"b\"}</tool_call>"});
  ASSERT_EQ(parts.calls.size(), 2u);
  EXPECT_NE(parts.calls[0].id, parts.calls[1].id);
  EXPECT_EQ(parts.calls[1].arguments, "{}");  // no arguments: none
}

TEST(ToolCallSplitTest, AnswerWithoutBlocksIsContentExactly) {
  // Whitespace, "<" and a marker's beginning are held back only until the text tells.
  for (const std::string answer : {"Hello\n\n", "a < b and <tool", "x <tool_cal", "  \n", "<b>bold</b>\n"}) {
    EXPECT_EQ(FeedPieces(kHermes, {answer}).content, answer);
    EXPECT_EQ(FeedBytes(kHermes, answer).content, answer);
    EXPECT_TRUE(FeedBytes(kHermes, answer).calls.empty());
  }
}

TEST(ToolCallSplitTest, WhitespaceNextToBlocksIsDropped) {
  // Reasoning models' content after "</think>" opens with "\n\n": with only calls, no content.
  const std::string answer = "\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>\n";
  for (const auto& parts : {FeedPieces(kHermes, {answer}), FeedBytes(kHermes, answer)}) {
    EXPECT_EQ(parts.content, "");
    ASSERT_EQ(parts.calls.size(), 1u);
    EXPECT_EQ(parts.calls[0].arguments, "{\"x\": 1}");
  }
}

TEST(ToolCallSplitTest, TextAfterACallIsContent) {
  const std::string answer = "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>\n\nDone: see above.";
  for (const auto& parts : {FeedPieces(kHermes, {answer}), FeedBytes(kHermes, answer)}) {
    EXPECT_EQ(parts.content, "Done: see above.");
    EXPECT_EQ(parts.calls.size(), 1u);
  }
}

TEST(ToolCallSplitTest, BlockThatIsNoCallStaysInTheContent) {
  // Not JSON, JSON without a name, a name that is no string: the model's text, as written.
  for (const std::string block : {"<tool_call>\nnot json\n</tool_call>", "<tool_call>{\"arguments\": {}}</tool_call>",
                                  "<tool_call>{\"name\": 3}</tool_call>", "<tool_call>[1, 2]</tool_call>"}) {
    const std::string answer = "Hi \n" + block + "\n  x";
    for (const auto& parts : {FeedPieces(kHermes, {answer}), FeedBytes(kHermes, answer)}) {
      EXPECT_EQ(parts.content, answer) << block;  // the whitespace around it too
      EXPECT_TRUE(parts.calls.empty());
    }
  }
}

TEST(ToolCallSplitTest, UnclosedBlockAtTheEnd) {
  // Qwen sometimes stops (its end token) before "</tool_call>": a whole call is still a call.
  const ToolCallSplit::Parts whole = FeedBytes(kHermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": true}}\n");
  ASSERT_EQ(whole.calls.size(), 1u);
  EXPECT_EQ(whole.calls[0].arguments, "{\"a\": true}");
  EXPECT_EQ(whole.content, "");
  // Cut inside its end marker: still the call.
  const ToolCallSplit::Parts in_marker = FeedBytes(kHermes, "<tool_call>\n{\"name\": \"f\"}\n</to");
  ASSERT_EQ(in_marker.calls.size(), 1u);
  EXPECT_EQ(in_marker.content, "");
  // Cut inside the JSON (max_tokens): the text as written.
  const ToolCallSplit::Parts cut = FeedBytes(kHermes, "Ok <tool_call>\n{\"name\": \"f\", \"argu");
  EXPECT_TRUE(cut.calls.empty());
  EXPECT_EQ(cut.content, "Ok <tool_call>\n{\"name\": \"f\", \"argu");
}

TEST(ToolCallSplitTest, TextOnBothSidesOfCallsStaysApart) {
  // Whitespace between calls goes; between content and content across calls, it stays.
  const std::string call = "<tool_call>{\"name\": \"f\"}</tool_call>";
  const std::string answer = "Hello\n" + call + "\n" + call + "\nbye\n";
  for (const auto& parts : {FeedPieces(kHermes, {answer}), FeedBytes(kHermes, answer)}) {
    EXPECT_EQ(parts.content, "Hello\nbye\n");
    EXPECT_EQ(parts.calls.size(), 2u);
  }
}

TEST(ToolCallSplitTest, WithoutParallelCallsOnlyTheFirstIsKept) {
  const std::string answer =
      "<tool_call>{\"name\": \"a\"}</tool_call>\n<tool_call>{\"name\": \"b\"}</tool_call>";
  EXPECT_EQ(FeedBytes(kHermes, answer, /*parallel_calls=*/true).calls.size(), 2u);
  const ToolCallSplit::Parts one = FeedBytes(kHermes, answer, /*parallel_calls=*/false);
  ASSERT_EQ(one.calls.size(), 1u);
  EXPECT_EQ(one.calls[0].name, "a");
  EXPECT_EQ(one.content, "");
}

TEST(ToolCallSplitTest, CallsComeAsTheirBlocksClose) {
  // Streaming: nothing of a block goes out before it closes; the content before it does.
  ToolCallSplit split(kHermes);
  ToolCallSplit::Parts first = split.Add("Sure. <tool_ca");
  EXPECT_EQ(first.content, "Sure.");
  EXPECT_TRUE(first.calls.empty());
  ToolCallSplit::Parts middle = split.Add("ll>{\"name\": \"f\", \"arguments\": {\"q\": \"x\"}}");
  EXPECT_EQ(middle.content, "");
  EXPECT_TRUE(middle.calls.empty());
  ToolCallSplit::Parts last = split.Add("</tool_call>");
  ASSERT_EQ(last.calls.size(), 1u);
  EXPECT_EQ(last.calls[0].name, "f");
  EXPECT_EQ(last.calls[0].arguments, "{\"q\": \"x\"}");
  EXPECT_TRUE(split.Finish().calls.empty());
}

TEST(ToolCallSplitTest, DeeplyNestedArgumentsAreNoCall) {
  // Nesting past a request body's bound is not parsed (the writer recurses): the text stays.
  const std::string deep = std::string(300, '[') + std::string(300, ']');
  const std::string answer = "<tool_call>{\"name\": \"f\", \"arguments\": " + deep + "}</tool_call>";
  const ToolCallSplit::Parts parts = FeedPieces(kHermes, {answer});
  EXPECT_TRUE(parts.calls.empty());
  EXPECT_EQ(parts.content, answer);
}

TEST(ToolCallSplitTest, Llama3JsonAnswerOfCalls) {
  constexpr ToolCallFormat kLlama = ToolCallFormat::kLlama3Json;
  // Llama 3.1's calls: "parameters" (or "arguments"), several separated by "; ".
  const std::string answer =
      "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\", \"note\": \"a } in a string\"}}; "
      "{\"name\": \"get_time\", \"arguments\": {}}";
  for (const auto& parts : {FeedPieces(kLlama, {answer}), FeedBytes(kLlama, answer)}) {
    EXPECT_EQ(parts.content, "");
    ASSERT_EQ(parts.calls.size(), 2u);
    EXPECT_EQ(parts.calls[0].name, "get_weather");
    EXPECT_EQ(parts.calls[0].arguments, "{\"city\": \"Oslo\", \"note\": \"a } in a string\"}");
    EXPECT_EQ(parts.calls[1].name, "get_time");
    EXPECT_EQ(parts.calls[1].arguments, "{}");
  }
  const ToolCallSplit::Parts one = FeedPieces(kLlama, {answer}, /*parallel_calls=*/false);
  EXPECT_EQ(one.calls.size(), 1u);
  // Leading whitespace is allowed; nothing is sent until the end.
  ToolCallSplit split(kLlama);
  EXPECT_TRUE(split.Add("\n{\"name\": \"f\", ").calls.empty());
  EXPECT_EQ(split.Add("\"parameters\": {}}").content, "");
  EXPECT_EQ(split.Finish().calls.size(), 1u);
}

TEST(ToolCallSplitTest, Llama3JsonOtherAnswersAreContent) {
  constexpr ToolCallFormat kLlama = ToolCallFormat::kLlama3Json;
  // Not starting with '{': content, streamed as it comes.
  ToolCallSplit prose(kLlama);
  EXPECT_EQ(prose.Add("  ").content, "");
  EXPECT_EQ(prose.Add("It is {sunny}.").content, "  It is {sunny}.");
  EXPECT_EQ(prose.Add(" Bye").content, " Bye");
  EXPECT_TRUE(prose.Finish().calls.empty());
  // JSON that opens with no call (JSON mode, a cut call): the answer as written.
  for (const std::string answer : {"{\"city\": \"Oslo\"}", "{\"name\": \"f\", \"parameters\": {", "{}", "{\"name\": 3}"}) {
    const ToolCallSplit::Parts parts = FeedBytes(kLlama, answer);
    EXPECT_TRUE(parts.calls.empty()) << answer;
    EXPECT_EQ(parts.content, answer);
  }
  // A run of calls, then other text: the calls, and the text as content (vLLM drops it).
  const std::string call = "{\"name\": \"f\", \"parameters\": {\"a\": 1}}";
  const std::vector<std::pair<std::string, std::string>> runs = {
      {call + " ; ", ""}, {call + ";", ""}, {call + " I called the tool.", "I called the tool."},
      {call + "; " + call + "; {\"x\": 1}", "{\"x\": 1}"}};
  for (const auto& [answer, content] : runs) {
    const ToolCallSplit::Parts parts = FeedBytes(kLlama, answer);
    EXPECT_FALSE(parts.calls.empty()) << answer;
    EXPECT_EQ(parts.content, content) << answer;
  }
  // Calls on lines of their own.
  EXPECT_EQ(FeedBytes(kLlama, call + "\n" + call).calls.size(), 2u);
}

TEST(ToolCallSplitTest, NamedFunctionStreamsItsArguments) {
  ToolCallSplit split(ToolCallFormat::kFunction, "get_weather");
  ToolCallSplit::Parts first = split.Add("{\"city\": ");
  ASSERT_EQ(first.calls.size(), 1u);
  EXPECT_EQ(first.calls[0].name, "get_weather");
  EXPECT_FALSE(first.calls[0].id.empty());
  EXPECT_EQ(first.calls[0].arguments, "{\"city\": ");
  ToolCallSplit::Parts next = split.Add("\"Oslo\"}");
  ASSERT_EQ(next.calls.size(), 1u);
  EXPECT_TRUE(next.calls[0].id.empty());
  EXPECT_EQ(next.calls[0].arguments, "\"Oslo\"}");
  EXPECT_TRUE(split.Finish().calls.empty());
  EXPECT_TRUE(split.called());
  // An empty answer is still the call, with empty arguments.
  const ToolCallSplit::Parts empty = FeedPieces(ToolCallFormat::kFunction, {}, true, "f");
  ASSERT_EQ(empty.calls.size(), 1u);
  EXPECT_EQ(empty.calls[0].arguments, "");
}

TEST(ToolCallSplitTest, RequiredListIsCallsAtTheEnd) {
  const std::string answer = "[{\"name\": \"a\", \"arguments\": {\"x\": 1}}, {\"name\":\"b\",\"arguments\":{}}]";
  ToolCallSplit split(ToolCallFormat::kRequired);
  EXPECT_TRUE(split.Add(answer).calls.empty());
  const ToolCallSplit::Parts parts = split.Finish();
  EXPECT_EQ(parts.content, "");
  ASSERT_EQ(parts.calls.size(), 2u);
  EXPECT_EQ(parts.calls[0].name, "a");
  EXPECT_EQ(parts.calls[0].arguments, "{\"x\": 1}");
  EXPECT_EQ(parts.calls[1].index, 1u);
  EXPECT_EQ(parts.calls[1].arguments, "{}");
  // Cut short: the text as it is.
  const ToolCallSplit::Parts cut = ToolCallSplit::Whole(ToolCallFormat::kRequired, "[{\"name\": \"a\", \"argum");
  EXPECT_TRUE(cut.calls.empty());
  EXPECT_EQ(cut.content, "[{\"name\": \"a\", \"argum");
}

}  // namespace
}  // namespace bmad::http
