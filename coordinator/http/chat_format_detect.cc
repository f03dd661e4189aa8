#include "coordinator/http/chat_format_detect.h"

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace bmad::http {
namespace {

bool Contains(std::string_view text, std::string_view marker) {
  return text.find(marker) != std::string_view::npos;
}

// The Jinja string literal whose opening quote (' or ") is at `open`, with its escapes resolved
// (\n, \t, \r, \\, \', \"); nullopt when `open` is not a quote or the literal never closes.
// `end` (may be null) gets the offset just past its closing quote.
std::optional<std::string> ReadJinjaString(std::string_view jinja, size_t open, size_t* end = nullptr) {
  if (open >= jinja.size() || (jinja[open] != '\'' && jinja[open] != '"')) return std::nullopt;
  const char quote = jinja[open];
  std::string value;
  for (size_t i = open + 1; i < jinja.size(); ++i) {
    const char c = jinja[i];
    if (c == quote) {
      if (end != nullptr) *end = i + 1;
      return value;
    }
    if (c != '\\' || i + 1 == jinja.size()) {
      value += c;
      continue;
    }
    const char escaped = jinja[++i];
    switch (escaped) {
      case 'n': value += '\n'; break;
      case 't': value += '\t'; break;
      case 'r': value += '\r'; break;
      case '\\': case '\'': case '"': value += escaped; break;
      default: value += '\\'; value += escaped; break;  // Python keeps unknown escapes
    }
  }
  return std::nullopt;
}

// The literal assigned by the first `<name> = "..."` in the template whose value is not empty
// (Jinja `{% set name = "..." %}`), e.g. date_string; nullopt when there is none.
std::optional<std::string> AssignedLiteral(std::string_view jinja, std::string_view name) {
  const std::string assignment = std::string(name) + " = ";
  for (size_t at = jinja.find(assignment); at != std::string_view::npos;
       at = jinja.find(assignment, at + 1)) {
    std::optional<std::string> value = ReadJinjaString(jinja, at + assignment.size());
    if (value && !value->empty()) return value;
  }
  return std::nullopt;
}

// ChatML's fixed system prompt: the body of a literal that writes a whole system turn, as
// Qwen2's '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n'. A literal that only
// opens the turn (the caller's system message follows it) is not one.
std::optional<std::string> ChatMLDefaultSystem(std::string_view jinja) {
  constexpr std::string_view kOpen = "<|im_start|>system\n";
  constexpr std::string_view kClose = "<|im_end|>";
  for (size_t at = jinja.find("<|im_start|>system"); at != std::string_view::npos;
       at = jinja.find("<|im_start|>system", at + 1)) {
    if (at == 0) continue;
    const std::optional<std::string> literal = ReadJinjaString(jinja, at - 1);
    if (!literal || !literal->starts_with(kOpen)) continue;
    const size_t close = literal->find(kClose, kOpen.size());
    if (close == std::string::npos) continue;
    return literal->substr(kOpen.size(), close - kOpen.size());
  }
  return std::nullopt;
}

// Llama-3.1's values as its template states them. The cutoff is the text after "Cutting
// Knowledge Date: " up to the end of its line (an escaped or a real newline) or its literal.
ChatFormat Llama31Format(std::string_view jinja) {
  ChatFormat format(ChatTemplate::kLlama31);
  constexpr std::string_view kCutoff = "Cutting Knowledge Date: ";
  if (const size_t at = jinja.find(kCutoff); at != std::string_view::npos) {
    const size_t begin = at + kCutoff.size();
    const size_t end = jinja.find_first_of("\\\n'\"", begin);
    if (end != std::string_view::npos && end > begin) {
      format.knowledge_cutoff = std::string(jinja.substr(begin, end - begin));
    }
  }
  // A template that can call strftime_now prefers it to its fallback literal.
  if (Contains(jinja, "strftime_now")) {
    format.date.clear();
  } else if (std::optional<std::string> date = AssignedLiteral(jinja, "date_string")) {
    format.date = std::move(*date);
  }
  if (std::optional<std::string> system = AssignedLiteral(jinja, "system_message")) {
    format.default_system = std::move(*system);
  }
  // Meta's tool layout (tools in the first user message, JSON calls, ipython results).
  format.tools = Contains(jinja, "Given the following functions, please respond with a JSON for a function call") &&
                 Contains(jinja, "ipython");
  return format;
}

struct MistralDefaultSystem {
  std::string text;
  std::vector<size_t> date_at;  // where the request's date goes (ChatFormat::default_system_date_at)
};

// Mistral-v7-tekken's default system message: the expression assigned to default_system_message,
// string literals joined by +, where `today` stands for the date of each request when the
// template sets it to strftime_now("%Y-%m-%d"). Absent: empty; nullopt when the expression is
// anything else.
std::optional<MistralDefaultSystem> ReadMistralDefaultSystem(std::string_view jinja) {
  constexpr std::string_view kAssignment = "default_system_message = ";
  const size_t at = jinja.find(kAssignment);
  if (at == std::string_view::npos) return MistralDefaultSystem{};
  const bool today_is_a_date = Contains(jinja, "today = strftime_now(\"%Y-%m-%d\")") ||
                               Contains(jinja, "today = strftime_now('%Y-%m-%d')");
  MistralDefaultSystem out;
  size_t i = at + kAssignment.size();
  const auto skip_spaces = [&] {
    while (i < jinja.size() && (jinja[i] == ' ' || jinja[i] == '\n' || jinja[i] == '\t')) ++i;
  };
  for (;;) {
    skip_spaces();
    if (i < jinja.size() && (jinja[i] == '"' || jinja[i] == '\'')) {
      size_t end = 0;
      std::optional<std::string> literal = ReadJinjaString(jinja, i, &end);
      if (!literal) return std::nullopt;
      out.text += *literal;
      i = end;
    } else if (jinja.substr(i).starts_with("today") && today_is_a_date) {
      out.date_at.push_back(out.text.size());
      i += 5;
    } else {
      return std::nullopt;  // another variable, a filter, a call: not evaluated here
    }
    skip_spaces();
    if (i < jinja.size() && jinja[i] == '+') {
      ++i;
      continue;
    }
    // The end of the {% set %} statement, with or without whitespace control.
    if (jinja.substr(i).starts_with("%}") || jinja.substr(i).starts_with("-%}")) return out;
    return std::nullopt;
  }
}

}  // namespace

std::optional<ChatTemplate> DetectChatTemplate(std::string_view jinja) {
  if (Contains(jinja, "<|im_start|>")) return ChatTemplate::kChatML;
  if (Contains(jinja, "<|start_header_id|>")) {
    return Contains(jinja, "Cutting Knowledge Date") ? ChatTemplate::kLlama31 : ChatTemplate::kLlama3;
  }
  if (Contains(jinja, "<start_of_turn>")) return ChatTemplate::kGemma;
  if (Contains(jinja, "<\uFF5CUser\uFF5C>") && Contains(jinja, "<\uFF5CAssistant\uFF5C>")) return ChatTemplate::kDeepSeekR1;
  if (Contains(jinja, "[INST]")) {
    if (Contains(jinja, "<<SYS>>")) return ChatTemplate::kLlama2;
    // Mistral Small 3, 3.1 and their kind. The spaced "v7" of Mistral-Large-2411 is another layout.
    if (Contains(jinja, "[SYSTEM_PROMPT]") && !Contains(jinja, "[SYSTEM_PROMPT] ") &&
        !Contains(jinja, "'[INST] '") && !Contains(jinja, "\"[INST] \"")) {
      return ChatTemplate::kMistralV7Tekken;
    }
    if (Contains(jinja, "[AVAILABLE_TOOLS]") || Contains(jinja, "loop.last and system_message")) {
      return ChatTemplate::kMistralV3;
    }
    if (Contains(jinja, "'[INST] '") && !Contains(jinja, "system")) return ChatTemplate::kMistralLegacy;
    return ChatTemplate::kMistral;
  }
  if (Contains(jinja, "<|user|>")) {
    return Contains(jinja, "<|end|>") ? ChatTemplate::kPhi3 : ChatTemplate::kZephyr;
  }
  return std::nullopt;
}

std::optional<ChatFormat> DetectChatFormat(std::string_view jinja) {
  const std::optional<ChatTemplate> detected = DetectChatTemplate(jinja);
  if (!detected) return std::nullopt;
  if (*detected == ChatTemplate::kLlama31) return Llama31Format(jinja);
  ChatFormat format(*detected);
  if (*detected == ChatTemplate::kMistralV7Tekken) {
    // A default this reader cannot evaluate: the format without it (the caller warns), which is
    // nearer what the model was trained on than another format would be.
    if (std::optional<MistralDefaultSystem> system = ReadMistralDefaultSystem(jinja)) {
      format.default_system = std::move(system->text);
      format.default_system_date_at = std::move(system->date_at);
    } else {
      format.default_system_unread = true;
    }
  }
  if (*detected == ChatTemplate::kChatML) {
    if (std::optional<std::string> system = ChatMLDefaultSystem(jinja)) {
      format.default_system = std::move(*system);
    }
    format.reasoning_turns = Contains(jinja, "</think>") && Contains(jinja, "last_query_index");
    format.thinking_switch = Contains(jinja, "enable_thinking");
    // Qwen2.5's, Qwen3's and QwQ's tool layout (ChatTemplate::kChatML), recognised by its
    // instructions; other chatml templates get no tools rather than a layout they do not read.
    format.tools = Contains(jinja, "You may call one or more functions to assist with the user query.") &&
                   Contains(jinja, "For each function call, return a json object with function name and arguments "
                                   "within <tool_call></tool_call> XML tags") &&
                   Contains(jinja, "tool_response");
    format.tools_after_blank_line = Contains(jinja, "\\n\\n# Tools") || Contains(jinja, "\n\n# Tools");
    // QwQ's: every assistant turn split on "</think>" (Qwen3's rule, reasoning_turns, is another).
    format.strips_reasoning = !format.reasoning_turns && Contains(jinja, "split('</think>')[-1]");
    // QwQ and Qwen3's Thinking-2507 models: the generation prompt opens the reasoning block.
    format.opens_think = Contains(jinja, "<|im_start|>assistant\\n<think>\\n") ||
                         Contains(jinja, "<|im_start|>assistant\n<think>\n");
  }
  if (*detected == ChatTemplate::kMistralV3) {
    // The "tekken" templates (Mistral-Nemo, Ministral, Pixtral) write v3's turns without the
    // space after [INST]; some of them write the assistant's content as it is, with no space.
    format.mistral_tight_user = !Contains(jinja, "\"[INST] \"") && !Contains(jinja, "'[INST] '");
    format.mistral_stripped_assistant = Contains(jinja, "|trim + eos_token") || Contains(jinja, "| trim + eos_token");
  }
  if (*detected == ChatTemplate::kMistralLegacy && Contains(jinja, "eos_token + ' '")) {
    // Mistral-7B-Instruct v0.1's (not Mixtral's, nor v0.2's). (assign: GCC 12 takes `= " "` here
    // for a memcpy of 2^63 bytes, a -Wrestrict false positive.)
    format.mistral_after_eos.assign(1, ' ');
  }
  if (*detected == ChatTemplate::kDeepSeekR1) {
    // The first R1 templates opened the answer bare; later ones open a reasoning block.
    format.opens_think = Contains(jinja, "<\uFF5CAssistant\uFF5C><think>");
  }
  return format;
}

Result<ChatFormat> ChooseChatFormat(std::string_view configured_name, std::string_view jinja,
                                    bool* detected) {
  if (detected != nullptr) *detected = false;
  if (!configured_name.empty()) {
    BMAD_ASSIGN_OR_RETURN(ChatTemplate t, ChatTemplateByName(configured_name));
    return ChatFormat(t);
  }
  std::optional<ChatFormat> format = DetectChatFormat(jinja);
  if (!format) return ChatFormat(kDefaultChatTemplate);
  if (detected != nullptr) *detected = true;
  return std::move(*format);
}

}  // namespace bmad::http
