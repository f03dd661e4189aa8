#include "common/proto/messages.h"

#include <algorithm>

namespace bmad::proto {

std::string_view FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return "";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
  }
  return "";
}

std::string_view ResponseFormatName(ResponseFormat format) {
  switch (format) {
    case ResponseFormat::kText: return "text";
    case ResponseFormat::kJsonObject: return "json_object";
    case ResponseFormat::kJsonSchema: return "json_schema";
    case ResponseFormat::kRegex: return "regex";
  }
  return "";
}

std::string_view MessageName(const Message& message) {
  static constexpr std::string_view kNames[] = {
      "submit",     "cancel",       "accepted",  "token_chunk", "error",
      "status_query", "cluster_status", "register", "register_ack", "heartbeat",
      "assign",     "worker_cancel", "drain",    "shutdown",    "step_plan",
      "heartbeat_ack"};
  static_assert(std::size(kNames) == std::variant_size_v<Message>);
  return kNames[message.index()];
}

void AppendPromptLogprobs(TokenChunk& into, const TokenChunk& from) {
  if (from.prompt_logprobs.empty()) return;
  if (into.prompt_logprobs.empty()) into.prompt_logprob_offset = from.prompt_logprob_offset;
  into.prompt_logprobs.insert(into.prompt_logprobs.end(), from.prompt_logprobs.begin(), from.prompt_logprobs.end());
  into.prompt_ranks.insert(into.prompt_ranks.end(), from.prompt_ranks.begin(), from.prompt_ranks.end());
  into.prompt_top_token_ids.insert(into.prompt_top_token_ids.end(), from.prompt_top_token_ids.begin(),
                                   from.prompt_top_token_ids.end());
  into.prompt_top_logprobs.insert(into.prompt_top_logprobs.end(), from.prompt_top_logprobs.begin(),
                                  from.prompt_top_logprobs.end());
}

void DropPromptLogprobsBefore(TokenChunk& chunk, uint32_t first) {
  const size_t count = chunk.prompt_logprobs.size();
  if (count == 0 || chunk.prompt_logprob_offset >= first) return;
  const size_t drop = std::min<size_t>(first - chunk.prompt_logprob_offset, count);
  const size_t per = chunk.prompt_top_token_ids.size() / count;  // alternatives per position
  const auto cut = [](auto& list, size_t n) { list.erase(list.begin(), list.begin() + static_cast<long>(std::min(n, list.size()))); };
  cut(chunk.prompt_logprobs, drop);
  cut(chunk.prompt_ranks, drop);
  cut(chunk.prompt_top_token_ids, drop * per);
  cut(chunk.prompt_top_logprobs, drop * per);
  chunk.prompt_logprob_offset = chunk.prompt_logprobs.empty() ? 0 : first;
}

}  // namespace bmad::proto
