// How the formats that take tools (ChatFormat::tools) write them, their calls and their results:
// chatml as Qwen2.5's, Qwen3's and QwQ's templates do, llama3.1 as Meta's Llama 3.1, 3.2 and
// 3.3 templates do with their default tools_in_user_message. Each format's layout is in
// chat_template.h.
//
// Internal to bmad_http_api: the chat template writers' tool parts.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "coordinator/http/chat_template.h"
#include "coordinator/http/chat_text.h"

namespace bmad::http::internal {

// chatml: the system turn that lists the tools; returns whether it holds the first message (a
// system message), which the turns then skip.
bool AppendChatMLTools(ChatText& out, const ChatFormat& format, std::span<const ChatMessage> messages,
                       std::span<const std::string> tools);
// chatml: an assistant turn's tool calls, after its content (`has_content`: non-empty).
void AppendChatMLToolCalls(ChatText& out, std::span<const ChatToolCall> calls, bool has_content);

// llama3.1: the user turn that holds the tools, each as tojson(indent=4) writes it, then
// `first_message` (the first message after the system message, trimmed).
void AppendLlama31ToolsTurn(ChatText& out, std::span<const std::string> tools, std::string_view first_message);
// llama3.1: an assistant turn of one tool call, {"name": "f", "parameters": {...}} (its content
// is not written).
void AppendLlama31ToolCall(ChatText& out, const ChatToolCall& call);
// llama3.1: a tool's result, an ipython turn holding the content as a JSON string (the
// template's tojson, since Jinja takes a string for iterable).
void AppendLlama31ToolResult(ChatText& out, std::string_view content);

}  // namespace bmad::http::internal
