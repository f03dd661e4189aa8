// The tool calls in a chat answer, split off its content as vLLM's tool call parsers give them.
//
//   kHermes    tool_choice "auto" under model.tool_call_parser "hermes" (Qwen2.5, Qwen3, QwQ,
//              Hermes): each "<tool_call>{"name": ..., "arguments": {...}}</tool_call>" block is
//              a call, its arguments written back as JSON text (Python's json.dumps layout, as
//              vLLM writes them). The content is the text outside the blocks, less the
//              whitespace next to a block. A block whose JSON is not a call (no "name" string)
//              stays in the content as the model wrote it; so does an unclosed one at the end,
//              unless what it holds is a whole call. Without parallel calls only the first call
//              is kept (vLLM's rule), and later blocks are dropped.
//   kFunction  tool_choice naming a function: the whole answer is that call's arguments (the
//              replica held it to the function's parameters), streamed as it comes.
//   kRequired  tool_choice "required": the answer is a JSON list [{"name", "arguments"}, ...]
//              (held to it by the replica); each entry is a call, at the end. An answer cut
//              short (max_tokens) is no list: it is returned as content.
//
// Text comes as the stream's chunks come; text that may begin a marker is held back until the
// next chunk or the end tells. Calls come whole (kHermes, kRequired) or in pieces (kFunction):
// the first piece of a call carries its id and name, the others only more of its arguments, as
// OpenAI's streamed tool_calls deltas do.
//
// Thread-safety: an instance is one choice's, used by one thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace bmad::http {

enum class ToolCallFormat { kHermes, kFunction, kRequired };

// A tool call, or a piece of one.
struct ToolCallPiece {
  uint32_t index = 0;     // which of the answer's calls, from 0
  std::string id;         // the call's first piece: "call_" and 24 random letters and digits
  std::string name;       // the call's first piece: the function's name
  std::string arguments;  // JSON text, or this piece of it
  friend bool operator==(const ToolCallPiece&, const ToolCallPiece&) = default;
};

class ToolCallSplit {
 public:
  // `function`: kFunction's name. `parallel_calls` false: kHermes keeps the first call only.
  explicit ToolCallSplit(ToolCallFormat format, std::string function = {}, bool parallel_calls = true);

  struct Parts {
    std::string content;
    std::vector<ToolCallPiece> calls;
  };

  // The next content of the answer (after any reasoning): what of it, and of the text held back
  // before, is now known to be content or calls.
  Parts Add(std::string_view text);
  // The answer has ended: the text held back, as content or a last call.
  Parts Finish();

  // Calls were found (kFunction: always, once the answer ended or began).
  bool called() const { return calls_ > 0; }

  // A whole answer's parts, each call in one piece.
  static Parts Whole(ToolCallFormat format, std::string_view answer, std::string function = {},
                     bool parallel_calls = true);

 private:
  void AddHermes(Parts& out);
  // A call from a hermes block's text, appended to `out`; false when the text is not one.
  bool HermesCall(std::string_view body, Parts& out);
  void FinishRequired(Parts& out);

  ToolCallFormat format_;
  std::string function_;
  bool parallel_calls_;
  std::string held_;         // text not yet known to be content or a call
  bool in_block_ = false;    // kHermes: inside a <tool_call> block
  bool after_block_ = false; // kHermes: a block ended, and only whitespace came since
  uint32_t calls_ = 0;       // calls begun
};

}  // namespace bmad::http
