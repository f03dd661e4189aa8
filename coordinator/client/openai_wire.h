// The parts of the OpenAI-compatible HTTP API a load generator speaks, as understood by vLLM,
// llama.cpp's llama-server and OpenAI itself: streaming request bodies, the streamed chunks
// (completions and chat), the model list, and error bodies. JSON stays inside openai_wire.cc.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace bmad::client {

enum class OpenAiApi { kCompletions, kChat };

// The request path under the server's base path ("/v1/completions", "/v1/chat/completions").
std::string_view ApiPath(OpenAiApi api);

// A streaming request that asks for exactly `max_tokens` tokens: greedy, ignore_eos, with the
// usage reported in the last chunk (stream_options.include_usage). Completions take the prompt
// as token ids (every server above accepts an array of ids), chat takes text.
std::string CompletionsRequestBody(const std::string& model, const std::vector<uint32_t>& prompt,
                                   int64_t max_tokens);
std::string ChatRequestBody(const std::string& model, const std::string& prompt,
                            int64_t max_tokens);

// What one `data:` payload of the stream says.
struct StreamDelta {
  bool done = false;              // the "[DONE]" sentinel
  std::string content;            // generated text (choice text, or delta content/reasoning)
  std::string finish_reason;      // set on a choice's last chunk
  bool has_usage = false;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};

// kDataLoss for a payload that is not a JSON object (a malformed stream); kInternal carrying
// the server's message for an {"error": ...} event.
Result<StreamDelta> ParseStreamData(std::string_view data);

// The first model id of a GET /v1/models answer; kDataLoss for anything else, kNotFound for an
// empty list.
Result<std::string> FirstModelId(std::string_view body);

// A short human-readable message from an error response body: error.message when the body is
// OpenAI-style JSON (or the shapes vLLM, FastAPI and llama.cpp use), else the body's first line
// (at most 200 bytes).
std::string ErrorBodyMessage(std::string_view body);

}  // namespace bmad::client
