// The tool calls in a chat answer, split off its content as vLLM's tool call parsers give them.
//
//   kHermes    tool_choice "auto" under model.tool_call_parser "hermes" (Qwen2.5, Qwen3, QwQ,
//              Hermes): each "<tool_call>{"name": ..., "arguments": {...}}</tool_call>" block is
//              a call, its arguments written back as JSON text (Python's json.dumps layout, as
//              vLLM writes them). The content is the text outside the calls, less the
//              whitespace next to them (whitespace between a call and text after it stays when
//              content came before the call: it separates the two). A block whose JSON is not a
//              call (no "name" string) stays in the content as the model wrote it, with the
//              whitespace around it; so does an unclosed one at the end, unless what it holds
//              is a whole call (part of "</tool_call>" after it is allowed). Without parallel
//              calls only the first call is kept (vLLM's rule), and later ones are dropped.
//   kLlama3Json  tool_choice "auto" under model.tool_call_parser "llama3_json" (Llama 3.1 to
//              3.3): an answer that starts (after whitespace) with "{" is held until the end and
//              read as a run of calls, JSON objects {"name": ..., "parameters": {...}}
//              ("arguments" is taken too) separated by ";" or whitespace; the text after the
//              run is content (vLLM drops it). When the first object is no call, the answer is
//              content as written. Any other answer is content, streamed as it comes.
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

enum class ToolCallFormat { kHermes, kLlama3Json, kFunction, kRequired };

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
  // Content outside the blocks (after a call, its leading whitespace only separates it from
  // earlier content).
  void AddContent(std::string_view text, Parts& out);
  // A hermes block has ended (`closed`: at its marker, else with the answer): a call, or
  // content as written.
  void EndBlock(std::string_view body, bool closed, Parts& out);
  // A call from a hermes block's text, appended to `out`; false when the text is not one.
  bool HermesCall(std::string_view body, Parts& out);
  void FinishRequired(Parts& out);
  void AddLlama3Json(Parts& out);
  void FinishLlama3Json(Parts& out);

  ToolCallFormat format_;
  std::string function_;
  bool parallel_calls_;
  std::string held_;         // text not yet known to be content or a call
  // kHermes:
  bool in_block_ = false;           // inside a <tool_call> block
  size_t close_searched_ = 0;       // in a block: bytes of held_ searched for its end
  std::string space_before_block_;  // the whitespace before the block
  bool after_call_ = false;         // a call came last (whitespace since is held)
  bool content_sent_ = false;       // content other than whitespace has been sent
  // kLlama3Json: what the answer is, once its first character other than whitespace came.
  enum class Llama3Answer { kUndecided, kCalls, kContent };
  Llama3Answer llama3_answer_ = Llama3Answer::kUndecided;
  uint32_t calls_ = 0;       // calls begun
};

}  // namespace bmad::http
