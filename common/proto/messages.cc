#include "common/proto/messages.h"

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

}  // namespace bmad::proto
