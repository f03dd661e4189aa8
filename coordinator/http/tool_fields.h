// Chat's tool calling fields, as OpenAI and vLLM take them:
//   tools               an array of at most kMaxTools {"type": "function", "function": {"name",
//                       "description", "parameters", "strict"}}: name 1-64 of a-z A-Z 0-9 _ -,
//                       distinct; description a string; parameters a JSON Schema object (only
//                       rendered for the model, and held to with tool_choice "required" or a
//                       named function); strict a boolean. Other keys of "function" are kept.
//   tool_choice         "none", "auto" (the default with tools), "required", or
//                       {"type": "function", "function": {"name": one of the tools}}
//   parallel_tool_calls boolean, default true; false: at most one call
// and an assistant message's tool_calls, [{"id", "type": "function", "function": {"name",
// "arguments": JSON text}}] (arguments may also be the JSON object itself).
//
// tool_choice "required" holds the answer to a JSON array of calls (at least one, only one
// without parallel calls), each {"name": a tool's name, "arguments": that tool's parameters};
// a named function holds it to the function's parameters. Either is an output constraint like
// response_format's, and cannot be combined with one.
//
// Internal to bmad_http_api (it takes nlohmann::json).
#pragma once

#include <string>
#include <vector>

#include "coordinator/http/chat_template.h"
#include "coordinator/http/json_fields.h"
#include "coordinator/http/openai_request.h"

namespace bmad::http::internal {

// OpenAI's limit on tools per request, and a bound on one assistant message's calls.
inline constexpr size_t kMaxTools = 128;
inline constexpr size_t kMaxToolCallsPerMessage = 128;

// Reads the body's tool fields into request.tools. With tool_choice "required" or a function it
// sets request.sampling's JSON schema and returns the field errors about that schema name
// ("tools[1].function.parameters", or "tools" for several); "" otherwise. `constraint_field`: the
// field of an output constraint the body already asked for ("" for none), which those two
// choices refuse. kInvalidArgument naming the field for anything malformed.
Result<std::string> ReadTools(const JsonFields& body, const std::string& constraint_field,
                              CompletionRequest& request);

// An assistant message's "tool_calls" (absent, null or [] for none).
Result<std::vector<ChatToolCall>> ReadToolCalls(const JsonFields& message);

}  // namespace bmad::http::internal
