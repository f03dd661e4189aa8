// Recognising a model's chat format from the Jinja chat template its GGUF carries
// (`tokenizer.chat_template`): which built-in format it is (chat_template.h), and the fixed text
// it writes besides the messages, read from its string literals. Nothing is executed.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string_view>

#include "common/status.h"
#include "coordinator/http/chat_template.h"

namespace bmad::http {

// Recognises a GGUF `tokenizer.chat_template` (Jinja text) by its marker tokens:
//   <|im_start|>                      chatml
//   <|start_header_id|> with "Cutting Knowledge Date"   llama3.1
//   <|start_header_id|>               llama3
//   <start_of_turn>                   gemma
//   <｜User｜> with <｜Assistant｜>    deepseek-r1
//   [INST] with <<SYS>>               llama2
//   [INST] with [SYSTEM_PROMPT], never followed by a space, and no '[INST] '   mistral-v7-tekken
//   [INST] with [AVAILABLE_TOOLS], or "loop.last and system_message"    mistral-v3
//   [INST] with '[INST] ' and no "system"                              mistral-legacy
//   other [INST]                      mistral
//   <|user|> with <|end|>             phi3
//   <|user|> without <|end|>          zephyr
// checked in that order (a template naming several formats gets the first). Empty or
// unrecognised text gives nullopt (the caller falls back to kDefaultChatTemplate, and says so).
std::optional<ChatTemplate> DetectChatTemplate(std::string_view jinja_from_gguf);

// DetectChatTemplate, plus the fixed text read from the template's string literals: chatml's
// default system prompt (a literal holding "<|im_start|>system\n...<|im_end|>") and its
// reasoning rule (a template that splits on "</think>" around ns.last_query_index) and whether its
// generation prompt opens a reasoning block ("<|im_start|>assistant\n<think>\n": QwQ,
// Qwen3-Thinking-2507); llama3.1's
// knowledge cutoff, date ("date_string" literal; none when the template calls strftime_now) and
// default system message ("system_message" literal); mistral-v7-tekken's default system message
// ("default_system_message": literals joined by +, and `today` where the template sets it to
// strftime_now("%Y-%m-%d")). What is not found keeps its reference value. A mistral-v7-tekken
// template whose default system message is some other expression gets none, and
// ChatFormat::default_system_unread says so.
std::optional<ChatFormat> DetectChatFormat(std::string_view jinja_from_gguf);

// The format chat requests use: `configured_name` when set (its reference values; an unknown
// name is kInvalidArgument), else the model's template when DetectChatFormat recognises it,
// else kDefaultChatTemplate. `detected` (may be null) says whether the model's own was used.
Result<ChatFormat> ChooseChatFormat(std::string_view configured_name, std::string_view jinja_from_gguf,
                                    bool* detected);

}  // namespace bmad::http
