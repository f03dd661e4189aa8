#include "coordinator/http/tool_call_split.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <vector>
#include <utility>

#include "common/json_nesting.h"
#include "coordinator/http/json_fields.h"
#include "coordinator/http/python_json.h"

namespace bmad::http {
namespace {

using internal::Json;

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// The longest end of `text` that begins `marker` (shorter than the marker).
size_t PartialMarkerAtEnd(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (marker.starts_with(text.substr(text.size() - n))) return n;
  }
  return 0;
}

// OpenAI's call ids: "call_" and 24 letters and digits.
std::string NewCallId() {
  static constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 random{std::random_device{}()};
  std::string id = "call_";
  std::uniform_int_distribution<size_t> pick(0, kAlphabet.size() - 1);
  for (int i = 0; i < 24; ++i) id += kAlphabet[pick(random)];
  return id;
}

// A call object {"name": string, "arguments": value} (or `arguments_key`: Llama's "parameters",
// when "arguments" is absent): its name and its arguments' JSON text ({} when absent); false
// when `call` is not one.
bool ReadCall(const Json& call, std::string& name, std::string& arguments, const char* arguments_key = "arguments") {
  if (!call.is_object()) return false;
  const auto found = call.find("name");
  if (found == call.end() || !found->is_string() || found->get_ref<const std::string&>().empty()) return false;
  name = found->get<std::string>();
  auto args = call.find("arguments");
  if (args == call.end()) args = call.find(arguments_key);
  arguments = args == call.end() ? "{}" : internal::PythonJsonDumps(*args);
  return true;
}

// JSON text the model wrote, parsed with a request body's bound on nesting (the writer above
// recurses); nullopt when it is not JSON.
std::optional<Json> ParseModelJson(std::string_view text) {
  if (JsonNestingDepth(text) > internal::kMaxJsonDepth) return std::nullopt;
  Json parsed = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return std::nullopt;
  return parsed;
}

}  // namespace

ToolCallSplit::ToolCallSplit(ToolCallFormat format, std::string function, bool parallel_calls)
    : format_(format), function_(std::move(function)), parallel_calls_(parallel_calls) {}

ToolCallSplit::Parts ToolCallSplit::Add(std::string_view text) {
  Parts out;
  switch (format_) {
    case ToolCallFormat::kHermes:
      held_ += text;
      AddHermes(out);
      break;
    case ToolCallFormat::kFunction:
      if (text.empty()) break;
      if (calls_ == 0) {
        out.calls.push_back({0, NewCallId(), function_, std::string(text)});
        calls_ = 1;
      } else {
        out.calls.push_back({0, "", "", std::string(text)});
      }
      break;
    case ToolCallFormat::kLlama3Json:
      held_ += text;
      AddLlama3Json(out);
      break;
    case ToolCallFormat::kRequired:
      held_ += text;
      break;
  }
  return out;
}

ToolCallSplit::Parts ToolCallSplit::Finish() {
  Parts out;
  switch (format_) {
    case ToolCallFormat::kHermes:
      if (in_block_) {
        // Cut before its end (the end token, max_tokens): a call if it holds a whole one,
        // maybe with part of "</tool_call>" after it.
        const std::string_view body = std::string_view(held_).substr(0, held_.size() - PartialMarkerAtEnd(held_, kClose));
        EndBlock(body, /*closed=*/false, out);
        in_block_ = false;
      } else if (std::any_of(held_.begin(), held_.end(), [](char c) { return !IsSpace(c); })) {
        AddContent(held_, out);
      } else if (!after_call_) {
        out.content += held_;  // the answer's own trailing whitespace
      }
      break;
    case ToolCallFormat::kFunction:
      if (calls_ == 0) {
        out.calls.push_back({0, NewCallId(), function_, ""});
        calls_ = 1;
      }
      break;
    case ToolCallFormat::kLlama3Json:
      FinishLlama3Json(out);
      break;
    case ToolCallFormat::kRequired:
      FinishRequired(out);
      break;
  }
  held_.clear();
  return out;
}

void ToolCallSplit::AddLlama3Json(Parts& out) {
  if (llama3_answer_ == Llama3Answer::kUndecided) {
    const auto first = std::find_if(held_.begin(), held_.end(), [](char c) { return !IsSpace(c); });
    if (first == held_.end()) return;  // only whitespace yet
    llama3_answer_ = *first == '{' ? Llama3Answer::kCalls : Llama3Answer::kContent;
  }
  if (llama3_answer_ == Llama3Answer::kContent) {
    out.content += held_;
    held_.clear();
  }
}

void ToolCallSplit::FinishLlama3Json(Parts& out) {
  if (llama3_answer_ != Llama3Answer::kCalls) {
    out.content += held_;
    return;
  }
  // The run of calls the answer opens with, separated by ';' (vLLM's "; ") or whitespace; what
  // follows it is content.
  std::vector<ToolCallPiece> calls;
  std::string_view rest = held_;
  const auto skip_space = [&] {
    while (!rest.empty() && IsSpace(rest.front())) rest.remove_prefix(1);
  };
  skip_space();
  while (!rest.empty() && rest.front() == '{') {
    const size_t end = JsonContainerEnd(rest);
    const std::optional<Json> call = end == std::string_view::npos ? std::nullopt : ParseModelJson(rest.substr(0, end));
    std::string name, arguments;
    if (!call || !ReadCall(*call, name, arguments, "parameters")) break;
    if (parallel_calls_ || calls.empty()) {
      calls.push_back({static_cast<uint32_t>(calls.size()), NewCallId(), std::move(name), std::move(arguments)});
    }
    rest.remove_prefix(end);
    skip_space();
    if (!rest.empty() && rest.front() == ';') {
      rest.remove_prefix(1);
      skip_space();
    }
  }
  if (calls.empty()) {  // JSON that is no call (an answer in JSON mode): content as written
    out.content += held_;
    return;
  }
  calls_ = static_cast<uint32_t>(calls.size());
  out.calls = std::move(calls);
  out.content += rest;
}

void ToolCallSplit::AddHermes(Parts& out) {
  while (true) {
    if (in_block_) {
      // Only the text not searched before, and a marker that may straddle it.
      const size_t from = close_searched_ >= kClose.size() ? close_searched_ - (kClose.size() - 1) : 0;
      const size_t close = held_.find(kClose, from);
      if (close == std::string::npos) {  // the block's text is held until it closes
        close_searched_ = held_.size();
        return;
      }
      const std::string body = held_.substr(0, close);
      held_.erase(0, close + kClose.size());
      in_block_ = false;
      close_searched_ = 0;
      EndBlock(body, /*closed=*/true, out);
      continue;
    }
    const size_t open = held_.find(kOpen);
    // Text up to the block, or up to what may begin one; the whitespace before that is held
    // (dropped before a call, kept before anything else).
    const size_t end = open != std::string::npos ? open : held_.size() - PartialMarkerAtEnd(held_, kOpen);
    size_t text_end = end;
    while (text_end > 0 && IsSpace(held_[text_end - 1])) --text_end;
    if (text_end > 0) AddContent(std::string_view(held_).substr(0, text_end), out);
    if (open == std::string::npos) {
      held_.erase(0, text_end);
      return;
    }
    space_before_block_ = held_.substr(text_end, open - text_end);
    held_.erase(0, open + kOpen.size());
    in_block_ = true;
  }
}

void ToolCallSplit::AddContent(std::string_view text, Parts& out) {
  if (after_call_) {
    // Whitespace between a call and more text separates that text from the content before
    // the call; with no content before, it is dropped.
    if (!content_sent_) {
      while (!text.empty() && IsSpace(text.front())) text.remove_prefix(1);
    }
    after_call_ = false;
  }
  out.content += text;
  content_sent_ = content_sent_ || std::any_of(text.begin(), text.end(), [](char c) { return !IsSpace(c); });
}

void ToolCallSplit::EndBlock(std::string_view body, bool closed, Parts& out) {
  if (HermesCall(body, out)) {
    space_before_block_.clear();
    after_call_ = true;
    return;
  }
  // Not a call: the text as the model wrote it, the whitespace before it included.
  std::string text = std::move(space_before_block_);
  space_before_block_.clear();
  text += kOpen;
  text += closed ? body : std::string_view(held_);
  if (closed) text += kClose;
  AddContent(text, out);
}

bool ToolCallSplit::HermesCall(std::string_view body, Parts& out) {
  const std::optional<Json> call = ParseModelJson(body);
  std::string name, arguments;
  if (!call || !ReadCall(*call, name, arguments)) return false;
  if (calls_ > 0 && !parallel_calls_) return true;  // one call only: the others are dropped
  out.calls.push_back({calls_++, NewCallId(), std::move(name), std::move(arguments)});
  return true;
}

void ToolCallSplit::FinishRequired(Parts& out) {
  const std::optional<Json> list = ParseModelJson(held_);
  std::vector<ToolCallPiece> calls;
  bool whole = list && list->is_array() && !list->empty();
  for (size_t i = 0; whole && i < list->size(); ++i) {
    ToolCallPiece& piece = calls.emplace_back();
    whole = ReadCall((*list)[i], piece.name, piece.arguments);
    piece.index = static_cast<uint32_t>(i);
    piece.id = NewCallId();
  }
  if (!whole) {  // cut short: what was written, as it is
    out.content += held_;
    return;
  }
  calls_ = static_cast<uint32_t>(calls.size());
  out.calls = std::move(calls);
}

ToolCallSplit::Parts ToolCallSplit::Whole(ToolCallFormat format, std::string_view answer, std::string function,
                                          bool parallel_calls) {
  ToolCallSplit split(format, std::move(function), parallel_calls);
  Parts parts = split.Add(answer);
  Parts rest = split.Finish();
  parts.content += rest.content;
  for (ToolCallPiece& piece : rest.calls) {
    if (!parts.calls.empty() && piece.index == parts.calls.back().index) {
      parts.calls.back().arguments += piece.arguments;
    } else {
      parts.calls.push_back(std::move(piece));
    }
  }
  return parts;
}

}  // namespace bmad::http
