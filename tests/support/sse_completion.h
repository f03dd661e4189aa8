// An OpenAI streaming completion from a test: POSTs `body` (with "stream": true) to a server on
// 127.0.0.1 and reads the server-sent events until [DONE], the connection closes, or the caller
// asks to disconnect.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace bmad::testing {

struct SseCompletion {
  std::string text;                // the choices' text, concatenated
  std::map<int64_t, std::string> texts;           // by choice index
  // chat under a reasoning parser: each choice's "reasoning" deltas joined, and whether every
  // delta's "reasoning_content" was the same text.
  std::map<int64_t, std::string> reasonings;
  bool reasoning_content_alike = true;
  // chat with tools: each choice's calls, their pieces joined ({"id", "type", "function": {"name",
  // "arguments"}}), and whether every piece came for a call begun or the next one.
  std::map<int64_t, std::vector<nlohmann::json>> tool_calls;
  bool tool_calls_in_order = true;
  std::map<int64_t, std::string> finish_reasons;  // by choice index
  std::map<int64_t, int> role_chunks;             // chat: role chunks seen, by choice index
  int usage_chunks = 0;            // chunks with a usage object and no choice (include_usage)
  int64_t completion_tokens = -1;  // from the usage chunk, when the server sent one
  nlohmann::json usage;            // that chunk's usage object, or null
  // continuous_usage_stats: every usage object a choice's chunks carried, in order, by choice.
  std::map<int64_t, std::vector<nlohmann::json>> usage_so_far;
  std::string finish_reason;
  std::vector<int64_t> text_offsets;  // completions with logprobs: every token's, in order
  // return_token_ids: every chunk's token_ids, concatenated, by choice; and each non-null
  // prompt_token_ids seen (a completions choice's, or a chat chunk's top-level one), by choice.
  std::map<int64_t, std::vector<int64_t>> token_ids;
  std::map<int64_t, std::vector<nlohmann::json>> prompt_token_ids;
  std::string error;               // an error event's JSON, if any
  int events = 0;                  // data events other than [DONE]
  bool done = false;               // [DONE] arrived
};

// `events_seen` (optional) counts events as they arrive, for another thread to watch; after
// `disconnect_after` events (> 0) the client drops the connection.
SseCompletion StreamCompletion(int port, const std::string& path, const nlohmann::json& body,
                               std::atomic<int>* events_seen = nullptr, int disconnect_after = -1,
                               int read_timeout_s = 60);

}  // namespace bmad::testing
