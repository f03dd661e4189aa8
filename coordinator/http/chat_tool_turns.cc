#include "coordinator/http/chat_tool_turns.h"

#include "coordinator/http/json_fields.h"
#include "coordinator/http/python_json.h"

namespace bmad::http::internal {
namespace {

// Qwen2.5's and Qwen3's tool instructions, around the tools' JSON lines.
constexpr std::string_view kChatMLToolsHead =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided "
    "with function signatures within <tools></tools> XML tags:\n<tools>";
constexpr std::string_view kChatMLToolsTail =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call><|im_end|>\n";

}  // namespace

bool AppendChatMLTools(ChatText& out, const ChatFormat& format, std::span<const ChatMessage> messages,
                       std::span<const std::string> tools) {
  out += "<|im_start|>system\n";
  const bool system_first = messages[0].role == ChatRole::kSystem;
  if (system_first) {
    out.Client(messages[0].content);
    out += "\n\n";
  } else if (!format.default_system.empty()) {
    out += format.default_system;  // Qwen2.5's; Qwen3 has none
    out += "\n\n";
  } else if (format.tools_after_blank_line) {
    out += "\n\n";  // QwQ's: an empty default
  }
  out += kChatMLToolsHead;
  for (const std::string& tool : tools) {
    out += '\n';
    out.Client(tool);
  }
  out += kChatMLToolsTail;
  return system_first;
}

void AppendChatMLToolCalls(ChatText& out, std::span<const ChatToolCall> calls, bool has_content) {
  for (size_t i = 0; i < calls.size(); ++i) {
    if (i > 0 || has_content) out += '\n';
    out += "<tool_call>\n{\"name\": \"";
    out.Client(calls[i].name);
    out += "\", \"arguments\": ";
    out.Client(calls[i].arguments);
    out += "}\n</tool_call>";
  }
}

namespace {

// Llama 3.1's guidance before the tools (its template's literals, joined as it writes them).
constexpr std::string_view kLlama31ToolsHead =
    "<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a JSON for a "
    "function call with its proper arguments that best answers the given prompt.\n\nRespond in the format "
    "{\"name\": function name, \"parameters\": dictionary of argument name and its value}.Do not use "
    "variables.\n\n";

}  // namespace

void AppendLlama31ToolsTurn(ChatText& out, std::span<const std::string> tools, std::string_view first_message) {
  out += kLlama31ToolsHead;
  for (const std::string& tool : tools) {
    // The tool as the request gave it (json.dumps' compact layout, ParseTools), laid out again.
    const Json parsed = Json::parse(tool, nullptr, /*allow_exceptions=*/false);
    out.Client(parsed.is_discarded() ? tool : PythonJsonDumps(parsed, 4));
    out += "\n\n";
  }
  out.Client(first_message);
  out += "<|eot_id|>";
}

void AppendLlama31ToolCall(ChatText& out, const ChatToolCall& call) {
  out += "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"";
  out.Client(call.name);
  out += "\", \"parameters\": ";
  out.Client(call.arguments);
  out += "}<|eot_id|>";
}

void AppendLlama31ToolResult(ChatText& out, std::string_view content) {
  out += "<|start_header_id|>ipython<|end_header_id|>\n\n";
  out.Client(PythonJsonDumps(Json(std::string(content))));
  out += "<|eot_id|>";
}

}  // namespace bmad::http::internal
