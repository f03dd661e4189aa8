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
// writers do. Integers are written as they are; decimals (a JSON number with a fraction or an
// exponent) as Python's repr writes a float: "100.0" for 1e2, "1e+16", "1.5e-05". An integer
// past 64 bits is read as a decimal (1.8446744073709552e+19), where Python keeps every digit.
// `indent` >= 0: json.dumps(value, indent=indent)'s layout (tojson(indent=4) in Llama 3.1's
// template): each item on its own line, "," at line ends, empty containers as {} and [].
std::string PythonJsonDumps(const Json& value, int indent = -1);

}  // namespace bmad::http::internal
