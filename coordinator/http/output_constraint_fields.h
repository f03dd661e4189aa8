// The output constraint a request body asks for, from every field that can name one:
//   response_format     OpenAI's: {"type": "text"} (none), {"type": "json_object"}, or
//                       {"type": "json_schema", "json_schema": {"schema": ...}}
//   structured_outputs  vLLM's (v0.12 on): {"json": schema}, {"regex": pattern},
//                       {"choice": [strings]} or {"json_object": true}, with the options
//                       disable_fallback (any value: there is one backend, and no fallback) and
//                       disable_any_whitespace, disable_additional_properties (false only),
//                       whitespace_pattern (empty only); grammar and structural_tag are refused
//   guided_json, guided_regex, guided_choice   vLLM's older names for json, regex and choice
// One constraint at most: a second is refused, naming both. Empty values ("", [], {} for
// structured_outputs) ask for nothing, as null does. A choice becomes a regular expression: the
// alternation of its strings, escaped.
//
// Internal to bmad_http_api (it takes nlohmann::json).
#pragma once

#include <string>

#include "common/proto/messages.h"
#include "common/status.h"
#include "coordinator/http/json_fields.h"

namespace bmad::http::internal {

// Sets sampling.response_format, and json_schema or regex with it, and returns the field that
// held the schema or pattern ("structured_outputs.regex", "response_format.json_schema.schema"),
// for errors about its content; changes nothing and returns "" when the body asks for no
// constraint. kInvalidArgument naming the field for a bad value or a second constraint.
Result<std::string> ReadOutputConstraint(const JsonFields& body, proto::SamplingParams& sampling);

}  // namespace bmad::http::internal
