#include "coordinator/http/json_fields.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/json_nesting.h"

namespace bmad::http::internal {
namespace {

constexpr size_t kMaxDescribedStringBytes = 40;
// A parse error quotes the offending token, which may be a whole (huge) string.
constexpr size_t kMaxParseErrorBytes = 240;

// The longest prefix of `text` of at most `max_bytes` that does not end inside a UTF-8
// character (strings from the parser are valid UTF-8).
std::string_view Utf8Prefix(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t end = max_bytes;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

// nlohmann's message without its "[json.exception.parse_error.101] " tag, cut to a bounded
// length (ErrorJson repairs a cut inside a UTF-8 character).
std::string ParseErrorText(std::string_view what) {
  if (!what.empty() && what.front() == '[') {
    const size_t tag_end = what.find("] ");
    if (tag_end != std::string_view::npos) what.remove_prefix(tag_end + 2);
  }
  if (what.size() > kMaxParseErrorBytes) {
    return std::string(what.substr(0, kMaxParseErrorBytes)) + "...";
  }
  return std::string(what);
}

}  // namespace

Result<Json> ParseJsonObject(std::string_view body, size_t max_body_bytes) {
  if (body.size() > max_body_bytes) {
    return InvalidArgument("body is " + std::to_string(body.size()) + " bytes; at most " +
                           std::to_string(max_body_bytes) + " are allowed");
  }
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return InvalidArgument("body is empty; expected a JSON object");
  }
  if (JsonNestingDepth(body) > kMaxJsonDepth) {
    return InvalidArgument("body nests arrays and objects deeper than " +
                           std::to_string(kMaxJsonDepth) + " levels");
  }
  Json json;
  try {
    json = Json::parse(body);
  } catch (const Json::exception& e) {  // parse_error, or out_of_range for numbers like 1e999
    return InvalidArgument("body is not valid JSON: " + ParseErrorText(e.what()));
  }
  // Not MustBe: "body" is no parameter, and ErrorJson must not report it as one.
  if (!json.is_object()) {
    return InvalidArgument("body must be a JSON object, got " + DescribeJsonValue(json));
  }
  return json;
}

std::string Quoted(std::string_view name) {
  std::string out = "'";
  out += name;
  out += "'";
  return out;
}

std::string DescribeJsonValue(const Json& value) {
  switch (value.type()) {
    case Json::value_t::array: return "an array";
    case Json::value_t::object: return "an object";
    case Json::value_t::string: {
      const std::string& text = value.get_ref<const std::string&>();
      const std::string_view prefix = Utf8Prefix(text, kMaxDescribedStringBytes);
      // Dumping escapes quotes and control characters; replace keeps it total even for bytes
      // that are not UTF-8 (the parser never produces those, but a caller might).
      std::string out =
          Json(std::string(prefix)).dump(-1, ' ', false, Json::error_handler_t::replace);
      if (prefix.size() < text.size()) out += "...";
      return out;
    }
    default: return value.dump(-1, ' ', false, Json::error_handler_t::replace);
  }
}

Status MustBe(std::string_view name, std::string_view what, const Json& got) {
  return InvalidArgument(Quoted(name) + " must be " + std::string(what) + ", got " +
                         DescribeJsonValue(got));
}

std::optional<int64_t> AsInteger(const Json& value) {
  switch (value.type()) {
    case Json::value_t::number_integer: return value.get<int64_t>();
    case Json::value_t::number_unsigned: {
      const uint64_t u = value.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
      return static_cast<int64_t>(u);
    }
    case Json::value_t::number_float: {
      const double d = value.get<double>();
      // 2^63 is exactly representable; converting anything outside [-2^63, 2^63) would be UB.
      constexpr double kTwoTo63 = 9223372036854775808.0;
      if (!std::isfinite(d) || std::trunc(d) != d || d < -kTwoTo63 || d >= kTwoTo63) {
        return std::nullopt;
      }
      return static_cast<int64_t>(d);
    }
    default: return std::nullopt;
  }
}

bool NumberRange::Contains(double value) const {
  if (!std::isfinite(value) || value > max) return false;
  return min_exclusive ? value > min : value >= min;
}

JsonFields::JsonFields(const Json& object, std::string path)
    : object_(object), path_(std::move(path)) {}

const Json* JsonFields::Find(std::string_view key) const {
  if (!object_.is_object()) return nullptr;
  const auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string JsonFields::Name(std::string_view key) const { return path_ + std::string(key); }

Result<std::optional<bool>> JsonFields::Bool(std::string_view key) const {
  const Json* value = Find(key);
  if (value == nullptr) return std::optional<bool>();
  if (!value->is_boolean()) return MustBe(Name(key), "a boolean", *value);
  return std::optional<bool>(value->get<bool>());
}

Result<std::optional<std::string>> JsonFields::String(std::string_view key) const {
  const Json* value = Find(key);
  if (value == nullptr) return std::optional<std::string>();
  if (!value->is_string()) return MustBe(Name(key), "a string", *value);
  return std::optional<std::string>(value->get<std::string>());
}

Result<std::optional<int64_t>> JsonFields::Integer(std::string_view key, int64_t min, int64_t max,
                                                   std::string_view what) const {
  const Json* value = Find(key);
  if (value == nullptr) return std::optional<int64_t>();
  const std::optional<int64_t> integer = AsInteger(*value);
  if (!integer || *integer < min || *integer > max) return MustBe(Name(key), what, *value);
  return integer;
}

Result<std::optional<double>> JsonFields::Number(std::string_view key, NumberRange range,
                                                 std::string_view what) const {
  const Json* value = Find(key);
  if (value == nullptr) return std::optional<double>();
  if (!value->is_number() || !range.Contains(value->get<double>())) {
    return MustBe(Name(key), what, *value);
  }
  return std::optional<double>(value->get<double>());
}

}  // namespace bmad::http::internal
