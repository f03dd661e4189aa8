// Chat templates: a conversation of role-tagged messages becomes the prompt text a chat model
// was trained on.
//
// Models ship their template as Jinja text (GGUF `tokenizer.chat_template`). Running Jinja would
// mean an interpreter on the request path and hostile templates; instead the common formats are
// built in, recognised from their marker tokens, and reproduced exactly as their reference
// templates render them (each format's comment below shows its output). The BOS token is never
// written: the tokenizer adds it (Tokenize with add_special), so a format's text starts where
// the reference output continues after BOS. Other special tokens (e.g. "</s>" between Llama-2
// turns, "<|eot_id|>") are written as text; the coordinator tokenizes with parse_special.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"

namespace bmad::http {

enum class ChatRole { kSystem, kUser, kAssistant };

// "system", "user" or "assistant".
std::string_view ChatRoleName(ChatRole role);

struct ChatMessage {
  ChatRole role = ChatRole::kUser;
  std::string content;
  friend bool operator==(const ChatMessage&, const ChatMessage&) = default;
};

// The built-in formats. Names (ChatTemplateByName) in parentheses; [gen] is what
// add_generation_prompt appends; s = system, u = user, a = assistant content.
enum class ChatTemplate {
  // (chatml) Qwen, Yi, Hermes, many fine-tunes. Any roles, any order.
  //   <|im_start|>system\ns<|im_end|>\n<|im_start|>user\nu<|im_end|>\n...
  //   [gen] <|im_start|>assistant\n
  kChatML,
  // (llama2) Llama-2-chat. System only first, folded into the first user turn; then
  // user/assistant alternate, starting with user. Contents are stripped of outer whitespace.
  //   [INST] <<SYS>>\ns\n<</SYS>>\n\nu1 [/INST] a1 </s><s>[INST] u2 [/INST]
  //   [gen] nothing (a user turn already ends in [/INST])
  kLlama2,
  // (llama3) Llama-3 and 3.x instruct (3.1's dated system header is not added). Any roles, any
  // order; contents are stripped of outer whitespace.
  //   <|start_header_id|>system<|end_header_id|>\n\ns<|eot_id|><|start_header_id|>user...
  //   [gen] <|start_header_id|>assistant<|end_header_id|>\n\n
  kLlama3,
  // (mistral) Mistral-7B-Instruct v0.1/v0.2 and Mixtral-8x7B ("tokenizer v1"). System only
  // first, prepended to the first user message with a blank line (as mistral-common does);
  // then user/assistant alternate, starting with user.
  //   " [INST] s\n\nu1 [/INST] a1</s> [INST] u2 [/INST]"
  //   [gen] nothing
  kMistral,
  // (zephyr) HuggingFaceH4 Zephyr. Any roles, any order.
  //   <|system|>\ns</s>\n<|user|>\nu</s>\n<|assistant|>\na</s>\n
  //   [gen] <|assistant|>\n
  kZephyr,
  // (phi3) Phi-3 instruct. Any roles, any order. Without the generation prompt the text ends
  // with the end-of-text token, as the reference template does.
  //   <|system|>\ns<|end|>\n<|user|>\nu<|end|>\n<|assistant|>\na<|end|>\n
  //   [gen] <|assistant|>\n          [no gen] <|endoftext|>
  kPhi3,
  // (gemma) Gemma instruct. System only first, prepended to the first user turn with a blank
  // line (Gemma 3's rule; Gemma 1 and 2 reject system messages); then user/assistant alternate,
  // starting with user. The assistant's role is "model"; contents are stripped.
  //   <start_of_turn>user\ns\n\nu<end_of_turn>\n<start_of_turn>model\na<end_of_turn>\n
  //   [gen] <start_of_turn>model\n
  kGemma,
  // (plain) For models without a chat format (base models): a labelled transcript.
  //   System: s\nUser: u\nAssistant: a\n
  //   [gen] Assistant:
  kPlain,
};

// The template used when none is configured and the model's own is not recognised.
inline constexpr ChatTemplate kDefaultChatTemplate = ChatTemplate::kChatML;

// "chatml", "llama2", "llama3", "mistral", "zephyr", "phi3", "gemma" or "plain".
std::string_view ChatTemplateName(ChatTemplate chat_template);

// The template of that name (exactly as ChatTemplateName spells it); kInvalidArgument naming
// the known ones otherwise.
Result<ChatTemplate> ChatTemplateByName(std::string_view name);
// Every name ChatTemplateByName takes, comma-separated.
std::string KnownChatTemplateNames();

// Recognises a GGUF `tokenizer.chat_template` (Jinja text) by its marker tokens:
//   <|im_start|>                      chatml
//   <|start_header_id|>               llama3
//   <start_of_turn>                   gemma
//   [INST] with <<SYS>>               llama2
//   [INST] without <<SYS>>            mistral
//   <|user|> with <|end|>             phi3
//   <|user|> without <|end|>          zephyr
// checked in that order (a template naming several formats gets the first). Empty or
// unrecognised text gives nullopt (the caller falls back to kDefaultChatTemplate, and says so).
std::optional<ChatTemplate> DetectChatTemplate(std::string_view jinja_from_gguf);

// OK when `messages` fit the format: non-empty, and for llama2, mistral and gemma a system
// message only first, then user and assistant alternating from user (at least one user
// message). kInvalidArgument naming the first offending message ("'messages[2]': ...").
Status ValidateChatMessages(ChatTemplate chat_template, std::span<const ChatMessage> messages);

// The prompt text for `messages` (see each format above). When add_generation_prompt, the text
// ends with the format's opening of an assistant turn. Fails as ValidateChatMessages does.
Result<std::string> ApplyChatTemplate(ChatTemplate chat_template,
                                      std::span<const ChatMessage> messages,
                                      bool add_generation_prompt);

}  // namespace bmad::http
