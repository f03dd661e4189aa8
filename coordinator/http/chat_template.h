// Chat templates: a conversation of role-tagged messages becomes the prompt text a chat model
// was trained on.
//
// Models ship their template as Jinja text (GGUF `tokenizer.chat_template`). Running Jinja would
// mean an interpreter on the request path and hostile templates; instead the common formats are
// built in, recognised from their marker tokens, and reproduced exactly as their reference
// templates render them (each format's comment below shows its output). The BOS token is never
// written: the tokenizer adds it (Tokenize with add_special), so a format's text starts where
// the reference output continues after BOS. Other special tokens (e.g. "</s>" between Llama-2
// turns, "<|eot_id|>") are written as text; the coordinator tokenizes with parse_special, except
// in the spans that hold a client's message (ChatPrompt::client_spans): a message spelling
// "<|im_start|>system" must stay text, not open a system turn. (Markers that are plain text,
// as Llama-2's "[INST]", or user-defined tokens, stay what the tokenizer makes of them.)
//
// Thread-safety: pure functions.
#pragma once

#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace bmad::http {

// kTool: a tool's result (OpenAI's role "tool"), which only formats with tools write
// (ChatFormat::tools).
enum class ChatRole { kSystem, kUser, kAssistant, kTool };

// "system", "user", "assistant" or "tool".
std::string_view ChatRoleName(ChatRole role);

// A tool call an assistant turn made, as the template writes it back.
struct ChatToolCall {
  std::string name;
  // Its arguments as JSON text in the template's layout (`tojson`: Python's json.dumps).
  std::string arguments;
  friend bool operator==(const ChatToolCall&, const ChatToolCall&) = default;
};

struct ChatMessage {
  ChatRole role = ChatRole::kUser;
  std::string content;
  std::vector<ChatToolCall> tool_calls;  // assistant only
  friend bool operator==(const ChatMessage&, const ChatMessage&) = default;
};

// The built-in formats. Names (ChatTemplateByName) in parentheses; [gen] is what
// add_generation_prompt appends; s = system, u = user, a = assistant content.
enum class ChatTemplate {
  // (chatml) Qwen, Yi, Hermes, many fine-tunes. Any roles, any order.
  //   <|im_start|>system\ns<|im_end|>\n<|im_start|>user\nu<|im_end|>\n...
  //   [gen] <|im_start|>assistant\n
  // With tools (ChatPromptOptions::tools), as Qwen2.5's and Qwen3's templates write them: the
  // system turn (the first message's content, else the default system prompt, then "\n\n"; or
  // neither) goes on with "# Tools\n\nYou may call one or more functions ... <tools>", each
  // tool's JSON on its own line, and "</tools>\n\nFor each function call, return a json object
  // ... </tool_call>". An assistant turn's tool calls follow its content, each
  //   <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
  // after a "\n" (none before the first when the content is empty). Consecutive tool results
  // share one user turn: <|im_start|>user\n<tool_response>\nr1\n</tool_response>\n
  // <tool_response>\nr2\n</tool_response><|im_end|>\n
  kChatML,
  // (llama2) Llama-2-chat. System only first, folded into the first user turn; then
  // user/assistant alternate, starting with user. Contents are stripped of outer whitespace.
  //   [INST] <<SYS>>\ns\n<</SYS>>\n\nu1 [/INST] a1 </s><s>[INST] u2 [/INST]
  //   [gen] nothing (a user turn already ends in [/INST])
  kLlama2,
  // (llama3) Llama-3 instruct. Any roles, any order; contents are stripped of outer whitespace.
  //   <|start_header_id|>system<|end_header_id|>\n\ns<|eot_id|><|start_header_id|>user...
  //   [gen] <|start_header_id|>assistant<|end_header_id|>\n\n
  kLlama3,
  // (llama3.1) Llama-3.1, 3.2 and 3.3 instruct: llama3, except that the text always opens with a
  // system block holding the knowledge cutoff and a date, then the first message's content when
  // it is a system message (else the format's default system prompt, usually none):
  //   <|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n
  //   Today Date: 26 Jul 2024\n\ns<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nu...
  kLlama31,
  // (mistral) Mistral-7B-Instruct v0.1/v0.2 and Mixtral-8x7B ("tokenizer v1"). System only
  // first, prepended to the first user message with a blank line (as mistral-common does);
  // then user/assistant alternate, starting with user.
  //   " [INST] s\n\nu1 [/INST] a1</s> [INST] u2 [/INST]"
  //   [gen] nothing
  kMistral,
  // (mistral-v3) Mistral-7B-Instruct v0.3 ("tokenizer v3"): no spaces around the [INST] markers,
  // the system message (only first) prepended to the conversation's last message when that is a
  // user message, and left out otherwise, as the reference template does; assistant contents
  // stripped. User/assistant alternate, starting with user.
  //   "[INST] u1[/INST] a1</s>[INST] s\n\nu2[/INST]"
  //   [gen] nothing
  // Recognised, the tekken templates' variants of it too (ChatFormat::mistral_tight_user).
  kMistralV3,
  // (mistral-legacy) The first Hugging Face template of Mistral-7B-Instruct v0.1/v0.2 and
  // Mixtral-8x7B-Instruct, which older GGUF conversions carry. It refuses system messages; here a
  // first one is prepended to the first user message with a blank line. User/assistant
  // alternate, starting with user.
  //   "[INST] s\n\nu1 [/INST]a1</s>[INST] u2 [/INST]"   (v0.1's: "</s> [INST]")
  //   [gen] nothing
  kMistralLegacy,
  // (mistral-v7-tekken) Mistral Small 3 and its kind ("v7 tekken"). Any roles, any order, contents as
  // they are. A system block always opens the text: the first message's content when it is a
  // system message, else the template's default system message (ChatFormat::default_system;
  // none by name, as llama.cpp's built-in one), left out when that is empty. A later system
  // message gets a block where it stands.
  //   "[SYSTEM_PROMPT]s[/SYSTEM_PROMPT][INST]u1[/INST]a1</s>[INST]u2[/INST]"
  //   [gen] nothing
  kMistralV7Tekken,
  // (zephyr) HuggingFaceH4 Zephyr, TinyLlama-Chat. Any roles, any order; each turn ends with the
  // model's end-of-sentence token (ChatFormat::eos_text; "</s>" in these models).
  //   <|system|>\ns</s>\n<|user|>\nu</s>\n<|assistant|>\na</s>\n
  //   [gen] <|assistant|>\n
  kZephyr,
  // (phi3) Phi-3 instruct. Any roles, any order; a system message with no content writes no
  // turn. Without the generation prompt the text ends with the end-of-text token, as the
  // reference template does.
  //   <|system|>\ns<|end|>\n<|user|>\nu<|end|>\n<|assistant|>\na<|end|>\n
  //   [gen] <|assistant|>\n          [no gen] <|endoftext|>
  kPhi3,
  // (gemma) Gemma instruct. System only first, prepended to the first user turn with a blank
  // line (Gemma 3's rule; Gemma 1 and 2 reject system messages); then user/assistant alternate,
  // starting with user. The assistant's role is "model"; contents are stripped.
  //   <start_of_turn>user\ns\n\nu<end_of_turn>\n<start_of_turn>model\na<end_of_turn>\n
  //   [gen] <start_of_turn>model\n
  kGemma,
  // (deepseek-r1) DeepSeek-R1's distilled Llama models. Any roles, any order: the last system
  // message's content opens the text, written once; an assistant turn keeps only what follows its
  // last "</think>". (｜ is U+FF5C, ▁ U+2581: the vocabulary's special tokens.)
  //   s<｜User｜>u<｜Assistant｜>a<｜end▁of▁sentence｜><｜User｜>u2
  //   [gen] <｜Assistant｜><think>\n   (<｜Assistant｜> alone under the first R1 template)
  kDeepSeekR1,
  // (plain) For models without a chat format (base models): a labelled transcript.
  //   System: s\nUser: u\nAssistant: a\n
  //   [gen] Assistant:
  kPlain,
};

// The template used when none is configured and the model's own is not recognised.
inline constexpr ChatTemplate kDefaultChatTemplate = ChatTemplate::kChatML;

// A format and the fixed text its model's template writes besides the messages. Constructed from
// a ChatTemplate it holds that format's reference values; DetectChatFormat reads them from the
// model's own template instead.
struct ChatFormat {
  ChatFormat() = default;
  ChatFormat(ChatTemplate t);  // NOLINT(google-explicit-constructor): a format is its defaults

  ChatTemplate chat_template = kDefaultChatTemplate;
  // The system prompt written when the conversation does not open with a system message; empty
  // for none. chatml: Qwen2 and Qwen2.5 write theirs ("You are Qwen, created by Alibaba Cloud.
  // You are a helpful assistant."); llama3.1: some tool-calling variants; mistral-v7-tekken:
  // Mistral Small 3's.
  std::string default_system;
  // mistral-v7-tekken: offsets in default_system where the request's date goes ("2026-12-02",
  // UTC: where the template's default calls strftime_now("%Y-%m-%d")), in ascending order.
  std::vector<size_t> default_system_date_at;
  // The model's template has a default system message this reader could not evaluate (an
  // expression other than literals and the date): none is written (the coordinator warns).
  bool default_system_unread = false;
  // chatml: Qwen3's rule for reasoning in assistant turns. A turn before the last user message
  // loses its "<think>...</think>" part (the content after the last "</think>" is kept); a turn
  // after it keeps the reasoning as "<think>\nr\n</think>\n\n" before its content, and when it
  // is the conversation's last message it gets that block even with no reasoning.
  bool reasoning_turns = false;
  // chatml: the template reads chat_template_kwargs' enable_thinking (Qwen3's hybrid models): set
  // false, the generation prompt is followed by an empty reasoning block, "<think>\n\n</think>\n\n",
  // so the model answers without reasoning.
  bool thinking_switch = false;
  // mistral-v3: the "tekken" templates' layout (Mistral-Nemo, Ministral, Pixtral): no space
  // after [INST]; and whether an assistant turn is " " + its stripped content (v3's) or its
  // content as it is (Nemo's).
  bool mistral_tight_user = false;
  bool mistral_stripped_assistant = true;
  // mistral-legacy: what the template writes after an assistant turn's eos_token (Mistral-7B-
  // Instruct v0.1's " "; Mixtral's and v0.2's first template, nothing).
  std::string mistral_after_eos;
  // zephyr: the text its template's eos_token writes after every turn, the model's end-of-sentence
  // token (the coordinator sets it from the vocabulary).
  std::string eos_text = "</s>";
  // deepseek-r1, chatml: the generation prompt opens a reasoning block ("<think>\n"): R1's
  // later templates; QwQ's and Qwen3's Thinking-2507 models' ("<|im_start|>assistant\n<think>\n").
  bool opens_think = false;
  // chatml: the template renders tools, tool calls and tool results (Qwen2.5's, Qwen3's and
  // QwQ's write "<tools>" and "<tool_call>"); the built-in chatml does, as Qwen3's does.
  bool tools = false;
  // chatml with tools: the tool instructions always follow a blank line, after the system
  // message, the default system prompt or nothing (Qwen2.5's and QwQ's "\n\n# Tools"); else
  // the blank line only follows a system message or a default prompt (Qwen3's).
  bool tools_after_blank_line = false;
  // chatml: QwQ's rule for assistant turns: each keeps only what follows its last "</think>",
  // less the newlines in front (Qwen3's reasoning_turns rule is another).
  bool strips_reasoning = false;
  // llama3.1: the "Cutting Knowledge Date: " line's value ("December 2023").
  std::string knowledge_cutoff;
  // llama3.1: the "Today Date: " line's value. Empty means the date of each request (UTC,
  // "02 Dec 2026"), as the templates that call strftime_now (Llama-3.2, 3.3) render under
  // vLLM and transformers; Llama-3.1's own template fixes "26 Jul 2024".
  std::string date;

  friend bool operator==(const ChatFormat&, const ChatFormat&) = default;
};

// "chatml", "llama2", "llama3", "llama3.1", "mistral", "mistral-v3", "mistral-legacy",
// "mistral-v7-tekken", "zephyr", "phi3", "gemma", "deepseek-r1" or "plain".
std::string_view ChatTemplateName(ChatTemplate chat_template);

// The template of that name (exactly as ChatTemplateName spells it); kInvalidArgument naming
// the known ones otherwise.
Result<ChatTemplate> ChatTemplateByName(std::string_view name);
// Every name ChatTemplateByName takes, comma-separated.
std::string KnownChatTemplateNames();

// "26 Jul 2024": day, English month abbreviation, year of `when` in UTC (strftime's
// "%d %b %Y" in the C locale).
std::string ChatDateString(std::chrono::system_clock::time_point when);

// OK when `messages` fit the format: non-empty, and for llama2, the mistrals and gemma a system
// message only first, then user and assistant alternating from user (at least one user
// message). kInvalidArgument naming the first offending message ("'messages[2]': ...").
Status ValidateChatMessages(ChatTemplate chat_template, std::span<const ChatMessage> messages);

// A chat prompt: its text, and where in it the clients' message contents are.
struct ChatPrompt {
  std::string text;
  // [begin, begin + length) byte ranges of `text` holding message content (as the format writes
  // it: stripped, or with Qwen3's reasoning block). Non-empty, sorted, disjoint.
  struct Span {
    size_t begin = 0;
    size_t length = 0;
    friend bool operator==(const Span&, const Span&) = default;
  };
  std::vector<Span> client_spans;
};

// How a conversation is closed, as vLLM's request fields ask.
struct ChatPromptOptions {
  // The text ends with the format's opening of an assistant turn.
  bool add_generation_prompt = true;
  // vLLM's continue_final_message: the text ends right after the final message's content, its
  // turn left open (no end-of-turn marker), so the model continues it (a "prefill" of the
  // answer). As transformers does it: the conversation is rendered without the generation
  // prompt and cut after the final message's content as the format writes it (stripped, where
  // the format strips). Needs the final message to be the assistant's, with content the format
  // writes (not only whitespace, nor only reasoning where the format drops it), and
  // add_generation_prompt false.
  bool continue_final_message = false;
  // chat_template_kwargs' enable_thinking; only a format with a thinking_switch reads it, as a
  // Jinja template ignores a variable it does not use.
  std::optional<bool> enable_thinking;
  // The request's tools, each as the JSON text the template writes (`tojson` of
  // {"type": "function", "function": {...}}); empty: none. Only a format with ChatFormat::tools
  // takes them, or messages with tool calls or tool results.
  std::vector<std::string> tools;
};

// The prompt for `messages` (see each format above), closed as `options` say. `now` dates a
// llama3.1 format whose date is empty. Fails as ValidateChatMessages does, and with
// kInvalidArgument for options that cannot apply to these messages.
Result<ChatPrompt> RenderChatPrompt(const ChatFormat& format, std::span<const ChatMessage> messages,
                                    const ChatPromptOptions& options,
                                    std::chrono::system_clock::time_point now = std::chrono::system_clock::now());
// The same, with add_generation_prompt alone.
Result<ChatPrompt> RenderChatPrompt(const ChatFormat& format, std::span<const ChatMessage> messages,
                                    bool add_generation_prompt,
                                    std::chrono::system_clock::time_point now = std::chrono::system_clock::now());

// RenderChatPrompt's text alone.
Result<std::string> ApplyChatTemplate(const ChatFormat& format, std::span<const ChatMessage> messages,
                                      bool add_generation_prompt,
                                      std::chrono::system_clock::time_point now =
                                          std::chrono::system_clock::now());

}  // namespace bmad::http
