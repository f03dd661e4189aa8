// A reasoning model's chat answer, split into its reasoning and its content, as vLLM's reasoning
// parsers (deepseek_r1, qwen3) give them: the reasoning is the text of the "<think>...</think>"
// block the answer opens with, the content is what follows "</think>". The markers themselves
// are in neither; nothing is stripped (Qwen3's reasoning starts and ends with "\n", its content
// opens with "\n\n", as under vLLM).
//
// How the answer starts (ReasoningStart): inside the block when the prompt opened it (DeepSeek-R1's
// later templates, QwQ's and Qwen3-Thinking-2507's generation prompts end with "<think>\n"), or
// as vLLM's deepseek_r1 parser assumes of every answer; then everything up to "</think>" is
// reasoning, an answer cut before it (max_tokens) all reasoning, and a "<think>" the model
// writes again at the start is dropped. Otherwise the answer may open the block itself (Qwen3's
// hybrid models write "<think>" first, after whitespace at most); an answer that does not is all
// content.
//
// Text comes as the stream's chunks come; whatever may still turn out to be part of a marker
// ("</thi" at a chunk's end) is held back until the next chunk or the end tells.
//
// Thread-safety: an instance is one choice's, used by one thread.
#pragma once

#include <string>
#include <string_view>

#include "coordinator/http/chat_template.h"

namespace bmad::http {

// Whether `prompt` leaves a reasoning block open for the model: a "<think>" with no "</think>"
// after it in the template's text after the last message (the generation prompt), or, when the
// prompt continues its final message (continue_final_message), in that message's text too.
bool PromptOpensReasoning(const ChatPrompt& prompt, bool continues_final_message);

enum class ReasoningStart {
  kOpen,           // the answer starts inside the block
  kMayOpen,        // the answer may open the block: "<think>" first, after whitespace at most
  kMayOpenAtOnce,  // the same, "<think>" its very first text (what a replica's ReasoningGate
                   // takes for an opening: the marker as the first token)
};

class ReasoningSplit {
 public:
  explicit ReasoningSplit(ReasoningStart start);

  struct Parts {
    std::string reasoning;
    std::string content;
  };

  // The next text of the answer: what of it, and of the text held back before, is now known to
  // be reasoning or content.
  Parts Add(std::string_view text);
  // The answer has ended: the text held back, as what it would have been without a marker.
  Parts Finish();

  // A whole answer's parts.
  static Parts Whole(ReasoningStart start, std::string_view answer);

 private:
  enum class State {
    kBeforeMarker,  // nothing yet but what may lead to "<think>" (see start_)
    kReasoning,     // inside the block, until "</think>"
    kContent,       // after the block, or an answer that opened none: all content from here
  };
  ReasoningStart start_;
  State state_ = State::kBeforeMarker;
  std::string held_;
};

}  // namespace bmad::http
