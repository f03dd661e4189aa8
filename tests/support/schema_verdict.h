// An independent judge of JSON values against a JSON Schema, for the tests of constrained
// decoding: the keywords JsonSchema enforces, validated the way the JSON Schema specification
// (2020-12, the validation vocabulary) says, with none of the compiler's shortcuts (key order,
// first bytes, compact enums).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace bmad::testing {

// "" when `value` is valid under `schema` (resolving "$ref" against `schema` as the document),
// else where and why it is not.
std::string SchemaViolation(const nlohmann::json& value, const nlohmann::json& schema);

}  // namespace bmad::testing
