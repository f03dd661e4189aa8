// Reading JSON request bodies: bounded parsing, then typed, range-checked reads of an object's
// fields with OpenAI-style errors that name the field and show what arrived:
// "'max_tokens' must be a positive integer, got -5".
//
// Internal to bmad_http_api (it exposes nlohmann::json, which stays out of public headers).
// OpenAI clients send null for "not set", so every reader treats a null field as an absent one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace bmad::http::internal {

// Ordered: a body's objects keep their keys in the order sent (a JSON schema's properties are
// written in the order it declares them).
using Json = nlohmann::ordered_json;

// Real requests nest four levels deep (body, messages, message, content parts), a JSON schema
// deeper: the bound is the schema compiler's own (272 levels of schema text, which names the
// schema when it refuses) plus the body's three around it (response_format, json_schema,
// schema), and keeps hostile "[[[[..." bodies from costing more than a scan. (It was 64, which
// refused a schema of 31 nested objects as a body nested too deep.)
inline constexpr size_t kMaxJsonDepth = 275;

// A request body as a JSON object. kInvalidArgument, worded for the client, when the body is
// over `max_body_bytes` (checked before anything else), empty, nested deeper than kMaxJsonDepth,
// not JSON (nlohmann's message, shortened), or JSON but not an object.
Result<Json> ParseJsonObject(std::string_view body, size_t max_body_bytes);

// Every error message names its field first, quoted: "'<name>' ...". ErrorJson relies on it to
// fill OpenAI's "param".
std::string Quoted(std::string_view name);

// A short rendering of a value for an error message, always valid UTF-8: numbers and booleans
// as JSON writes them, strings quoted and cut to about 40 bytes, "an array", "an object", "null".
std::string DescribeJsonValue(const Json& value);

// kInvalidArgument "'<name>' must be <what>, got <value>".
Status MustBe(std::string_view name, std::string_view what, const Json& got);

// The value as an int64 when it is an integer: a JSON integer, or a number with no fractional
// part (5.0, as OpenAI's own validation accepts) within int64's range. nullopt otherwise
// (fractions, strings, booleans, ...).
std::optional<int64_t> AsInteger(const Json& value);

// A numeric interval for JsonFields::Number; non-finite values are always outside.
struct NumberRange {
  double min = 0;
  double max = 0;
  bool min_exclusive = false;  // (min, max] instead of [min, max]
  bool Contains(double value) const;
};

// Reads one object's fields. `path` prefixes the names in errors: "" for the body,
// "messages[2]." for a message. The object must outlive the reader.
class JsonFields {
 public:
  JsonFields(const Json& object, std::string path);

  // The field's value; nullptr when absent or null.
  const Json* Find(std::string_view key) const;
  // path + key, unquoted: "messages[2].role".
  std::string Name(std::string_view key) const;

  // Each returns nullopt when the field is absent or null, and kInvalidArgument "'name' must be
  // <what>, got <value>" when it has the wrong type or lies outside the range.
  Result<std::optional<bool>> Bool(std::string_view key) const;
  Result<std::optional<std::string>> String(std::string_view key) const;
  Result<std::optional<int64_t>> Integer(std::string_view key, int64_t min, int64_t max,
                                         std::string_view what) const;
  Result<std::optional<double>> Number(std::string_view key, NumberRange range,
                                       std::string_view what) const;

 private:
  const Json& object_;
  std::string path_;
};

}  // namespace bmad::http::internal
