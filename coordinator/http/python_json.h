// JSON written as Python's json.dumps writes it with its defaults and ensure_ascii=False: ", "
// between items, ": " after keys, keys in their order, non-ASCII text as it is. That is what a
// Jinja chat template's `tojson` filter writes under transformers and vLLM, so a prompt that
// holds a client's JSON (tool definitions, earlier tool calls' arguments) comes out as the model
// saw it in training.
//
// Internal to bmad_http_api (it takes nlohmann::json).
#pragma once

#include <string>

#include "coordinator/http/json_fields.h"

namespace bmad::http::internal {

// Strings escape '"', '\\' and control characters (\n, \t, ... and \u00XX, lowercase) as both
// writers do. Numbers are nlohmann's shortest round-trip form, which is Python's for integers
// and for most doubles (Python writes 1e+16 where nlohmann writes 1e+16 too, but 1e16 read as
// an integer stays 10000000000000000 in both).
std::string PythonJsonDumps(const Json& value);

}  // namespace bmad::http::internal
