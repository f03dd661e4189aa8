#include "coordinator/http/chat_template.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/http/chat_text.h"
#include "coordinator/http/chat_tool_turns.h"

namespace bmad::http {

using internal::ChatText;
using internal::MessageName;
using internal::Strip;
using internal::StripNewlines;

namespace {

struct NamedTemplate {
  std::string_view name;
  ChatTemplate chat_template;
};

constexpr std::array<NamedTemplate, 13> kTemplates = {{
    {"chatml", ChatTemplate::kChatML},
    {"llama2", ChatTemplate::kLlama2},
    {"llama3", ChatTemplate::kLlama3},
    {"llama3.1", ChatTemplate::kLlama31},
    {"mistral", ChatTemplate::kMistral},
    {"mistral-v3", ChatTemplate::kMistralV3},
    {"mistral-legacy", ChatTemplate::kMistralLegacy},
    {"mistral-v7-tekken", ChatTemplate::kMistralV7Tekken},
    {"zephyr", ChatTemplate::kZephyr},
    {"phi3", ChatTemplate::kPhi3},
    {"gemma", ChatTemplate::kGemma},
    {"deepseek-r1", ChatTemplate::kDeepSeekR1},
    {"plain", ChatTemplate::kPlain},
}};

// Llama-3.1's reference values (its template on Hugging Face and in its GGUF conversions).
constexpr std::string_view kLlama31KnowledgeCutoff = "December 2023";
constexpr std::string_view kLlama31Date = "26 Jul 2024";


// Formats that take a system message only first and then strictly alternate user/assistant.
bool RequiresAlternation(ChatTemplate chat_template) {
  return chat_template == ChatTemplate::kLlama2 || chat_template == ChatTemplate::kMistral ||
         chat_template == ChatTemplate::kMistralV3 || chat_template == ChatTemplate::kMistralLegacy ||
         chat_template == ChatTemplate::kGemma;
}

// Each format's own writer. The formats that alternate take the leading system message apart
// (`system`, null when there is none) from the user/assistant `turns`, validated to alternate
// from a user message; the others take every message in order.
using Messages = std::span<const ChatMessage>;

// An assistant turn's content under Qwen3's reasoning rule (ChatFormat::reasoning_turns), as its
// template splits it: the reasoning is what precedes the first "</think>", after its last
// "<think>"; the answer is what follows the last "</think>". The block's markers are the
// template's text, the reasoning and the answer the client's. Returns whether the answer (the
// template's `content` after the split) is non-empty.
bool AppendReasoningTurn(ChatText& out, std::string_view content, bool after_last_query, bool last) {
  std::string_view reasoning;
  const size_t first_close = content.find("</think>");
  if (first_close != std::string_view::npos) {
    reasoning = StripNewlines(content.substr(0, first_close), false, true);
    if (const size_t open = reasoning.rfind("<think>"); open != std::string_view::npos) {
      reasoning = reasoning.substr(open + 7);
    }
    reasoning = StripNewlines(reasoning, true, false);
    content = StripNewlines(content.substr(content.rfind("</think>") + 8), true, false);
  }
  if (!after_last_query || (!last && reasoning.empty())) {
    out.Client(content);
    return !content.empty();
  }
  out += "<think>\n";
  out.Client(StripNewlines(reasoning, true, true));
  out += "\n</think>\n\n";
  out.Client(StripNewlines(content, true, false));
  return !content.empty();
}

// Qwen3's last_query_index: the last user message that is not a tool result the client wrapped
// itself ("<tool_response>...</tool_response>"), else the last message.
size_t LastQuery(Messages messages) {
  for (size_t i = messages.size(); i-- > 0;) {
    const std::string_view content = messages[i].content;
    if (messages[i].role == ChatRole::kUser &&
        !(content.starts_with("<tool_response>") && content.ends_with("</tool_response>"))) {
      return i;
    }
  }
  return messages.size() - 1;
}

ChatText RenderChatMLWithDefaultSystem(const ChatFormat& format, Messages messages,
                                       const ChatPromptOptions& options) {
  const bool add_generation_prompt = options.add_generation_prompt;
  ChatText out;
  size_t first = 0;  // the first message the turns write
  if (!options.tools.empty()) {
    first = internal::AppendChatMLTools(out, format, messages, options.tools) ? 1 : 0;
  } else if (!format.default_system.empty() && messages[0].role != ChatRole::kSystem) {
    out += "<|im_start|>system\n";
    out += format.default_system;  // the model's template's own text
    out += "<|im_end|>\n";
  }
  const size_t last_query = LastQuery(messages);
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == ChatRole::kTool) {  // consecutive results share one user turn
      if (i == 0 || messages[i - 1].role != ChatRole::kTool) out += "<|im_start|>user";
      out += "\n<tool_response>\n";
      out.Client(m.content);
      out += "\n</tool_response>";
      if (i + 1 == messages.size() || messages[i + 1].role != ChatRole::kTool) out += "<|im_end|>\n";
      continue;
    }
    out += "<|im_start|>";
    out += ChatRoleName(m.role);
    out += '\n';
    if (m.role == ChatRole::kAssistant) {
      bool has_content = !m.content.empty();
      if (format.reasoning_turns) {
        has_content = AppendReasoningTurn(out, m.content, i > last_query, i + 1 == messages.size());
      } else if (format.strips_reasoning) {
        // QwQ's: the answer after the reasoning; its test for a newline before the tool calls
        // reads the whole content.
        std::string_view answer = m.content;
        if (const size_t close = answer.rfind("</think>"); close != std::string_view::npos) {
          answer = answer.substr(close + 8);
        }
        out.Client(StripNewlines(answer, true, false));
      } else {
        out.Client(m.content);
      }
      internal::AppendChatMLToolCalls(out, m.tool_calls, has_content);
    } else {
      out.Client(m.content);
    }
    out += "<|im_end|>\n";
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  // Qwen3's hybrid templates: with enable_thinking false the answer opens with an empty
  // reasoning block.
  const bool no_thinking = add_generation_prompt && format.thinking_switch && options.enable_thinking == false;
  if (no_thinking) out += "<think>\n\n</think>\n\n";
  // QwQ's and Qwen3-Thinking-2507's: the answer always opens in a reasoning block.
  if (add_generation_prompt && format.opens_think && !no_thinking) out += "<think>\n";
  return out;
}

ChatText RenderLlama3(Messages messages, bool add_generation_prompt) {
  ChatText out;
  for (const ChatMessage& m : messages) {
    out += "<|start_header_id|>";
    out += ChatRoleName(m.role);
    out += "<|end_header_id|>\n\n";
    out.Client(Strip(m.content));
    out += "<|eot_id|>";
  }
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// The system block always comes first; a leading system message is its last part, and the
// remaining messages follow as llama3 writes them. With tools, the system block opens with
// "Environment: ipython" and the next message holds them (chat_tool_turns.h); tool calls and
// tool results have turns of their own.
ChatText RenderLlama31(const ChatFormat& format, Messages messages, const ChatPromptOptions& options,
                       std::chrono::system_clock::time_point now) {
  ChatText out;
  out += "<|start_header_id|>system<|end_header_id|>\n\n";
  if (!options.tools.empty()) out += "Environment: ipython\n";
  out += "Cutting Knowledge Date: ";
  out += format.knowledge_cutoff;
  out += "\nToday Date: ";
  out += format.date.empty() ? ChatDateString(now) : format.date;
  out += "\n\n";
  if (messages[0].role == ChatRole::kSystem) {
    out.Client(Strip(messages[0].content));
    messages = messages.subspan(1);
  } else {
    out += format.default_system;
  }
  out += "<|eot_id|>";
  if (!options.tools.empty()) {  // CheckToolsFit: a message follows
    internal::AppendLlama31ToolsTurn(out, options.tools, Strip(messages[0].content));
    messages = messages.subspan(1);
  }
  for (const ChatMessage& m : messages) {
    if (m.role == ChatRole::kTool) {
      internal::AppendLlama31ToolResult(out, m.content);
    } else if (!m.tool_calls.empty()) {
      internal::AppendLlama31ToolCall(out, m.tool_calls[0]);  // CheckToolsFit: one
    } else {
      out += RenderLlama3(std::span(&m, 1), false);
    }
  }
  if (options.add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// Zephyr and Phi-3 differ only in the end-of-turn token (and Phi-3's closing end-of-text).
// `skip_empty_system`: Phi-3's template writes no turn for a system message with no content.
ChatText RenderPipeTagged(Messages messages, std::string_view end_of_turn, bool skip_empty_system) {
  ChatText out;
  for (const ChatMessage& m : messages) {
    if (skip_empty_system && m.role == ChatRole::kSystem && m.content.empty()) continue;
    out += "<|";
    out += ChatRoleName(m.role);
    out += "|>\n";
    out.Client(m.content);
    out += end_of_turn;
    out += '\n';
  }
  return out;
}

ChatText RenderPlain(Messages messages, bool add_generation_prompt) {
  ChatText out;
  for (const ChatMessage& m : messages) {
    switch (m.role) {
      case ChatRole::kSystem: out += "System: "; break;
      case ChatRole::kUser: out += "User: "; break;
      case ChatRole::kAssistant: out += "Assistant: "; break;
      case ChatRole::kTool: out += "Tool: "; break;  // not reached: only formats with tools take them
    }
    out.Client(m.content);
    out += '\n';
  }
  if (add_generation_prompt) out += "Assistant:";
  return out;
}

ChatText RenderLlama2(const ChatMessage* system, Messages turns) {
  ChatText out;
  for (size_t i = 0; i < turns.size(); ++i) {
    const ChatMessage& m = turns[i];
    if (m.role == ChatRole::kUser) {
      ChatText content;
      if (i == 0 && system != nullptr) {
        content += "<<SYS>>\n";
        content.Client(system->content);
        content += "\n<</SYS>>\n\n";
      }
      content.Client(m.content);
      // The first BOS is the tokenizer's; later user turns open with their own.
      if (i != 0) out += "<s>";
      out += "[INST] ";
      out.AppendStripped(content);
      out += " [/INST]";
    } else {
      out += ' ';
      out.Client(Strip(m.content));
      out += " </s>";
    }
  }
  return out;
}

// The Mistral templates differ in their spacing, where the system prompt goes, and whether
// assistant contents are stripped.
struct MistralLayout {
  std::string_view open_user;
  std::string_view close_user;
  bool system_on_last_message;  // v3: on the last message, when it is a user's; else the first
  std::string_view open_assistant;
  bool strip_assistant;
  std::string_view after_eos = "";
};
constexpr MistralLayout kMistralV1Layout{" [INST] ", " [/INST]", false, " ", false};

MistralLayout MistralV3Layout(const ChatFormat& format) {
  return format.mistral_tight_user ? MistralLayout{"[INST]", "[/INST]", true, format.mistral_stripped_assistant ? " " : "",
                                                   format.mistral_stripped_assistant}
                                   : MistralLayout{"[INST] ", "[/INST]", true, format.mistral_stripped_assistant ? " " : "",
                                                   format.mistral_stripped_assistant};
}

MistralLayout MistralLegacyLayout(const ChatFormat& format) {
  return MistralLayout{"[INST] ", " [/INST]", false, "", false, format.mistral_after_eos};
}

ChatText RenderMistral(const ChatMessage* system, Messages turns, const MistralLayout& layout) {
  ChatText out;
  for (size_t i = 0; i < turns.size(); ++i) {
    const ChatMessage& m = turns[i];
    if (m.role == ChatRole::kUser) {
      out += layout.open_user;
      if (system != nullptr && (layout.system_on_last_message ? i + 1 == turns.size() : i == 0)) {
        out.Client(system->content);
        out += "\n\n";
      }
      out.Client(m.content);
      out += layout.close_user;
    } else {
      out += layout.open_assistant;
      out.Client(layout.strip_assistant ? Strip(m.content) : std::string_view(m.content));
      out += "</s>";
      out += layout.after_eos;
    }
  }
  return out;
}

// The UTC day of `when`, and a day or month number in two digits: strftime's %Y, %m, %d.
std::chrono::year_month_day UtcDay(std::chrono::system_clock::time_point when) {
  return std::chrono::year_month_day{std::chrono::floor<std::chrono::days>(when)};
}
std::string TwoDigits(unsigned value) { return std::string(value < 10 ? "0" : "") + std::to_string(value); }

// "2026-12-02": strftime's "%Y-%m-%d" of `when` in UTC.
std::string IsoDateString(std::chrono::system_clock::time_point when) {
  const std::chrono::year_month_day day = UtcDay(when);
  return std::to_string(static_cast<int>(day.year())) + "-" + TwoDigits(static_cast<unsigned>(day.month())) + "-" +
         TwoDigits(static_cast<unsigned>(day.day()));
}

ChatText RenderMistralV7Tekken(const ChatFormat& format, Messages messages,
                               std::chrono::system_clock::time_point now) {
  ChatText out;
  const bool given = messages[0].role == ChatRole::kSystem;
  if (!given && !format.default_system.empty()) {
    // The template's own text, with the request's date where it calls strftime_now.
    std::string system;
    size_t from = 0;
    const std::string date = IsoDateString(now);
    for (const size_t at : format.default_system_date_at) {
      const size_t to = std::min(at, format.default_system.size());
      system.append(format.default_system, from, to - from);
      system += date;
      from = to;
    }
    system.append(format.default_system, std::min(from, format.default_system.size()));
    out += "[SYSTEM_PROMPT]";
    out += system;
    out += "[/SYSTEM_PROMPT]";
  }
  for (const ChatMessage& m : messages) {
    if (m.role == ChatRole::kAssistant) {
      out.Client(m.content);
      out += format.eos_text;
      continue;
    }
    const bool system = m.role == ChatRole::kSystem;
    out += system ? "[SYSTEM_PROMPT]" : "[INST]";
    out.Client(m.content);
    out += system ? "[/SYSTEM_PROMPT]" : "[/INST]";
  }
  return out;
}

ChatText RenderDeepSeekR1(const ChatFormat& format, Messages messages, bool add_generation_prompt) {
  ChatText out;
  // The last system message's content, once, before the conversation.
  const ChatMessage* system = nullptr;
  for (const ChatMessage& m : messages) {
    if (m.role == ChatRole::kSystem) system = &m;
  }
  if (system != nullptr) out.Client(system->content);
  for (const ChatMessage& m : messages) {
    if (m.role == ChatRole::kUser) {
      out += "<\uFF5CUser\uFF5C>";
      out.Client(m.content);
    } else if (m.role == ChatRole::kAssistant) {
      // Earlier reasoning is dropped: only what follows the last "</think>" is kept.
      std::string_view content = m.content;
      if (const size_t think_end = content.rfind("</think>"); think_end != std::string_view::npos) {
        content.remove_prefix(think_end + std::string_view("</think>").size());
      }
      out += "<\uFF5CAssistant\uFF5C>";
      out.Client(content);
      out += "<\uFF5Cend\u2581of\u2581sentence\uFF5C>";
    }
  }
  if (add_generation_prompt) out += format.opens_think ? "<\uFF5CAssistant\uFF5C><think>\n" : "<\uFF5CAssistant\uFF5C>";
  return out;
}

ChatText RenderGemma(const ChatMessage* system, Messages turns, bool add_generation_prompt) {
  ChatText out;
  for (size_t i = 0; i < turns.size(); ++i) {
    const ChatMessage& m = turns[i];
    out += m.role == ChatRole::kUser ? "<start_of_turn>user\n" : "<start_of_turn>model\n";
    if (i == 0 && system != nullptr) {
      out.Client(system->content);
      out += "\n\n";
    }
    out.Client(Strip(m.content));
    out += "<end_of_turn>\n";
  }
  if (add_generation_prompt) out += "<start_of_turn>model\n";
  return out;
}

}  // namespace

ChatFormat::ChatFormat(ChatTemplate t) : chat_template(t) {
  if (t == ChatTemplate::kLlama31) {
    knowledge_cutoff = kLlama31KnowledgeCutoff;
    date = kLlama31Date;
  }
  opens_think = t == ChatTemplate::kDeepSeekR1;
  // As Qwen3's and Llama 3.1's templates write them.
  tools = t == ChatTemplate::kChatML || t == ChatTemplate::kLlama31;
}

std::string_view ChatRoleName(ChatRole role) {
  switch (role) {
    case ChatRole::kSystem: return "system";
    case ChatRole::kUser: return "user";
    case ChatRole::kAssistant: return "assistant";
    case ChatRole::kTool: return "tool";
  }
  return "user";
}

std::string_view ChatTemplateName(ChatTemplate chat_template) {
  for (const NamedTemplate& t : kTemplates) {
    if (t.chat_template == chat_template) return t.name;
  }
  return "chatml";
}

Result<ChatTemplate> ChatTemplateByName(std::string_view name) {
  for (const NamedTemplate& t : kTemplates) {
    if (t.name == name) return t.chat_template;
  }
  return InvalidArgument("unknown chat template '" + std::string(name) + "'; known: " + KnownChatTemplateNames());
}

std::string KnownChatTemplateNames() {
  std::string known;
  for (const NamedTemplate& t : kTemplates) {
    if (!known.empty()) known += ", ";
    known += t.name;
  }
  return known;
}

std::string ChatDateString(std::chrono::system_clock::time_point when) {
  static constexpr std::array<const char*, 12> kMonths = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                          "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const std::chrono::year_month_day day = UtcDay(when);
  std::string out = TwoDigits(static_cast<unsigned>(day.day()));
  out += ' ';
  out += kMonths[static_cast<unsigned>(day.month()) - 1];
  out += ' ';
  out += std::to_string(static_cast<int>(day.year()));
  return out;
}

Status ValidateChatMessages(ChatTemplate chat_template, std::span<const ChatMessage> messages) {
  if (messages.empty()) return InvalidArgument("'messages' must be a non-empty array");
  if (!RequiresAlternation(chat_template)) return Status::Ok();

  const std::string_view name = ChatTemplateName(chat_template);
  const size_t first_turn = messages[0].role == ChatRole::kSystem ? 1 : 0;
  if (first_turn == messages.size()) {
    return InvalidArgument("'messages' holds only a system message; the " + std::string(name) +
                           " chat template needs a user message after it");
  }
  for (size_t i = first_turn; i < messages.size(); ++i) {
    const ChatRole role = messages[i].role;
    if (role == ChatRole::kSystem) {
      return InvalidArgument(MessageName(i) + ": the " + std::string(name) +
                             " chat template accepts a system message only as the first message");
    }
    const ChatRole expected = (i - first_turn) % 2 == 0 ? ChatRole::kUser : ChatRole::kAssistant;
    if (role != expected) {
      return InvalidArgument(MessageName(i) + " has role '" + std::string(ChatRoleName(role)) +
                             "' where '" + std::string(ChatRoleName(expected)) +
                             "' is expected: the " + std::string(name) +
                             " chat template needs user and assistant messages to alternate, "
                             "starting with user (after an optional first system message)");
    }
  }
  return Status::Ok();
}

namespace {

// Tools, tool calls and tool results only where the format writes them; a continued final
// message only when it holds no tool calls (the continuation would follow them).
Status CheckToolsFit(const ChatFormat& format, Messages messages, const ChatPromptOptions& options) {
  const std::string where =
      format.chat_template == ChatTemplate::kChatML || format.chat_template == ChatTemplate::kLlama31
          ? "the model's chat template (" + std::string(ChatTemplateName(format.chat_template)) +
                ") is not one whose tool layout bmad knows (Qwen2.5's, Qwen3's; Llama 3.1's)"
          : "bmad renders tools in the chatml chat template (as Qwen2.5 and Qwen3 write them) and llama3.1's "
            "(as Llama 3.1 to 3.3 write them), and this model's is " +
                std::string(ChatTemplateName(format.chat_template));
  if (!format.tools && !options.tools.empty()) return InvalidArgument("'tools' cannot be given to the model: " + where);
  for (size_t i = 0; i < messages.size(); ++i) {
    if (format.tools) break;
    if (messages[i].role == ChatRole::kTool) {
      return InvalidArgument(MessageName(i) + " has role 'tool', which cannot be given to the model: " + where);
    }
    if (!messages[i].tool_calls.empty()) {
      return InvalidArgument(MessageName(i) + " has tool_calls, which cannot be given to the model: " + where);
    }
  }
  if (format.chat_template == ChatTemplate::kLlama31) {
    // Llama 3.1's template calls one tool per turn, and puts the tools into the message after
    // the system message, as a user turn.
    for (size_t i = 0; i < messages.size(); ++i) {
      if (messages[i].tool_calls.size() > 1) {
        return InvalidArgument(MessageName(i) + " has " + std::to_string(messages[i].tool_calls.size()) +
                               " tool_calls; the llama3.1 chat template takes one per assistant message");
      }
    }
    const size_t first = messages[0].role == ChatRole::kSystem ? 1 : 0;
    if (!options.tools.empty() && first == messages.size()) {
      return InvalidArgument("'tools': the llama3.1 chat template writes the tools into the first message after the "
                             "system message, and there is none");
    }
    if (!options.tools.empty() && (messages[first].role == ChatRole::kTool || !messages[first].tool_calls.empty())) {
      return InvalidArgument(MessageName(first) + ": the llama3.1 chat template writes the tools into the first message "
                             "after the system message, as a user turn, and this one is a tool result or has tool_calls");
    }
  }
  if (options.continue_final_message && !messages.back().tool_calls.empty()) {
    return InvalidArgument("'continue_final_message': the final message, " + MessageName(messages.size() - 1) +
                           ", has tool_calls; only an answer's content can be continued");
  }
  return Status::Ok();
}

Result<ChatText> Render(const ChatFormat& format, std::span<const ChatMessage> messages,
                        const ChatPromptOptions& options, std::chrono::system_clock::time_point now) {
  const ChatTemplate chat_template = format.chat_template;
  const bool add_generation_prompt = options.add_generation_prompt;
  // The alternating formats fold a leading system message into the first user turn.
  const ChatMessage* system = nullptr;
  Messages turns = messages;
  if (RequiresAlternation(chat_template) && messages[0].role == ChatRole::kSystem) {
    system = &messages[0];
    turns = messages.subspan(1);
  }
  switch (chat_template) {
    case ChatTemplate::kChatML: return RenderChatMLWithDefaultSystem(format, messages, options);
    case ChatTemplate::kLlama2: return RenderLlama2(system, turns);
    case ChatTemplate::kLlama3: return RenderLlama3(messages, add_generation_prompt);
    case ChatTemplate::kLlama31: return RenderLlama31(format, messages, options, now);
    case ChatTemplate::kMistral: return RenderMistral(system, turns, kMistralV1Layout);
    case ChatTemplate::kMistralV3: return RenderMistral(system, turns, MistralV3Layout(format));
    case ChatTemplate::kMistralLegacy: return RenderMistral(system, turns, MistralLegacyLayout(format));
    case ChatTemplate::kMistralV7Tekken: return RenderMistralV7Tekken(format, messages, now);
    case ChatTemplate::kZephyr: {
      ChatText out = RenderPipeTagged(messages, format.eos_text, /*skip_empty_system=*/false);
      if (add_generation_prompt) out += "<|assistant|>\n";
      return out;
    }
    case ChatTemplate::kPhi3: {
      ChatText out = RenderPipeTagged(messages, "<|end|>", /*skip_empty_system=*/true);
      out += add_generation_prompt ? "<|assistant|>\n" : "<|endoftext|>";
      return out;
    }
    case ChatTemplate::kGemma: return RenderGemma(system, turns, add_generation_prompt);
    case ChatTemplate::kDeepSeekR1: return RenderDeepSeekR1(format, messages, add_generation_prompt);
    case ChatTemplate::kPlain: return RenderPlain(messages, add_generation_prompt);
  }
  return Internal("unknown chat template " + std::to_string(static_cast<int>(chat_template)));
}

}  // namespace

Result<ChatPrompt> RenderChatPrompt(const ChatFormat& format, std::span<const ChatMessage> messages,
                                    const ChatPromptOptions& options, std::chrono::system_clock::time_point now) {
  if (messages.empty()) return InvalidArgument("'messages' must be a non-empty array");
  BMAD_RETURN_IF_ERROR(CheckToolsFit(format, messages, options));
  BMAD_RETURN_IF_ERROR(ValidateChatMessages(format.chat_template, messages));
  if (!options.continue_final_message) {
    BMAD_ASSIGN_OR_RETURN(ChatText text, Render(format, messages, options, now));
    return std::move(text).Take();
  }
  if (options.add_generation_prompt) {
    return InvalidArgument("'continue_final_message' and 'add_generation_prompt' cannot both be true: "
                           "the one continues the final message, the other opens a new one");
  }
  const ChatMessage& final = messages.back();
  const std::string final_name = MessageName(messages.size() - 1);
  if (final.role != ChatRole::kAssistant) {
    return InvalidArgument("'continue_final_message' continues the assistant's answer, but the final message, " +
                           final_name + ", has role '" + std::string(ChatRoleName(final.role)) + "'");
  }
  BMAD_ASSIGN_OR_RETURN(ChatText text, Render(format, messages, options, now));
  // Rendered as a finished turn, then cut after the content as the format wrote it.
  if (!text.CutAfterLastClientTextOf(final.content)) {
    return InvalidArgument("'continue_final_message': the final message, " + final_name +
                           ", has no content the " + std::string(ChatTemplateName(format.chat_template)) +
                           " chat template writes (it is empty, only whitespace, or only reasoning "
                           "the template drops), so there is nothing to continue");
  }
  ChatPrompt prompt = std::move(text).Take();
  std::vector<ChatPrompt::Span>& spans = prompt.client_spans;
  while (!spans.empty() && spans.back().begin >= prompt.text.size()) spans.pop_back();
  if (!spans.empty()) spans.back().length = std::min(spans.back().length, prompt.text.size() - spans.back().begin);
  return prompt;
}

Result<ChatPrompt> RenderChatPrompt(const ChatFormat& format, std::span<const ChatMessage> messages,
                                    bool add_generation_prompt, std::chrono::system_clock::time_point now) {
  ChatPromptOptions options;
  options.add_generation_prompt = add_generation_prompt;
  return RenderChatPrompt(format, messages, options, now);
}

Result<std::string> ApplyChatTemplate(const ChatFormat& format, std::span<const ChatMessage> messages,
                                      bool add_generation_prompt,
                                      std::chrono::system_clock::time_point now) {
  BMAD_ASSIGN_OR_RETURN(ChatPrompt prompt, RenderChatPrompt(format, messages, add_generation_prompt, now));
  return std::move(prompt.text);
}

}  // namespace bmad::http
