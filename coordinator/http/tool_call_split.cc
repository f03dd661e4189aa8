#include "coordinator/http/tool_call_split.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
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

// A call object {"name": string, "arguments": value}: its name and its arguments' JSON text
// ({} when absent); false when `call` is not one.
bool ReadCall(const Json& call, std::string& name, std::string& arguments) {
  if (!call.is_object()) return false;
  const auto found = call.find("name");
  if (found == call.end() || !found->is_string() || found->get_ref<const std::string&>().empty()) return false;
  name = found->get<std::string>();
  const auto args = call.find("arguments");
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
        if (!HermesCall(held_, out)) {
          out.content += kOpen;
          out.content += held_;
        }
        in_block_ = false;
      } else if (!after_block_ || std::any_of(held_.begin(), held_.end(), [](char c) { return !IsSpace(c); })) {
        out.content += held_;
      }
      break;
    case ToolCallFormat::kFunction:
      if (calls_ == 0) {
        out.calls.push_back({0, NewCallId(), function_, ""});
        calls_ = 1;
      }
      break;
    case ToolCallFormat::kRequired:
      FinishRequired(out);
      break;
  }
  held_.clear();
  return out;
}

void ToolCallSplit::AddHermes(Parts& out) {
  while (true) {
    if (in_block_) {
      const size_t close = held_.find(kClose);
      if (close == std::string::npos) return;  // the block's text is held until it closes
      const std::string body = held_.substr(0, close);
      held_.erase(0, close + kClose.size());
      in_block_ = false;
      after_block_ = true;
      if (!HermesCall(body, out)) {
        out.content += kOpen;
        out.content += body;
        out.content += kClose;
      }
      continue;
    }
    if (after_block_) {  // whitespace after a block is dropped
      const auto text = std::find_if(held_.begin(), held_.end(), [](char c) { return !IsSpace(c); });
      held_.erase(held_.begin(), text);
      if (held_.empty()) return;
      after_block_ = false;
    }
    const size_t open = held_.find(kOpen);
    // Content up to the block, or up to what may begin one, less the whitespace before it
    // (dropped before a block, held back otherwise).
    const size_t end = open != std::string::npos ? open : held_.size() - PartialMarkerAtEnd(held_, kOpen);
    size_t text_end = end;
    while (text_end > 0 && IsSpace(held_[text_end - 1])) --text_end;
    out.content.append(held_, 0, text_end);
    if (open == std::string::npos) {
      held_.erase(0, text_end);
      return;
    }
    held_.erase(0, open + kOpen.size());
    in_block_ = true;
  }
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
