#include "tests/support/schema_verdict.h"

#include <algorithm>
#include <cmath>

namespace bmad::testing {
namespace {

using nlohmann::json;

bool HasType(const json& v, const std::string& type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  if (type == "number") return v.is_number();
  if (type == "integer") {
    if (v.is_number_integer()) return true;
    return v.is_number_float() && std::trunc(v.get<double>()) == v.get<double>();
  }
  return false;
}

class Validator {
 public:
  explicit Validator(const json& root) : root_(root) {}

  std::string Check(const json& v, const json& s, const std::string& at, int depth = 0) const {
    if (depth > 200) return at + ": recursion too deep";
    if (s.is_boolean()) return s.get<bool>() ? "" : at + ": schema false";
    if (s.contains("$ref")) {
      const std::string ref = s["$ref"].get<std::string>().substr(1);
      if (auto why = Check(v, root_.at(json::json_pointer(ref)), at, depth + 1); !why.empty()) return why;
    }
    if (s.contains("type")) {
      const json types = s["type"].is_array() ? s["type"] : json::array({s["type"]});
      if (std::none_of(types.begin(), types.end(), [&](const json& t) { return HasType(v, t.get<std::string>()); })) {
        return at + ": " + v.dump() + " is not of type " + s["type"].dump();
      }
    }
    if (s.contains("enum")) {
      const json& e = s["enum"];
      if (std::find(e.begin(), e.end(), v) == e.end()) return at + ": " + v.dump() + " not in enum";
    }
    if (s.contains("const") && s["const"] != v) return at + ": " + v.dump() + " is not the const";
    if (s.contains("anyOf") || s.contains("oneOf")) {
      const json& alts = s.contains("anyOf") ? s["anyOf"] : s["oneOf"];
      int valid = 0;
      for (const json& alt : alts) valid += Check(v, alt, at, depth + 1).empty() ? 1 : 0;
      if (valid == 0) return at + ": no alternative holds for " + v.dump();
      if (s.contains("oneOf") && valid > 1) return at + ": more than one alternative of oneOf holds";
    }
    if (s.contains("allOf")) {
      for (const json& part : s["allOf"]) {
        if (auto why = Check(v, part, at, depth + 1); !why.empty()) return why;
      }
    }
    if (v.is_object()) return CheckObject(v, s, at, depth);
    if (v.is_array()) return CheckArray(v, s, at, depth);
    if (v.is_string()) return CheckString(v.get<std::string>(), s, at);
    if (v.is_number()) return CheckNumber(v, s, at);
    return "";
  }

 private:
  // Length in code points (the text is valid UTF-8: nlohmann parsed it).
  static std::string CheckString(const std::string& text, const json& s, const std::string& at) {
    size_t length = 0;
    for (unsigned char c : text) length += (c & 0xC0) != 0x80 ? 1 : 0;
    if (s.contains("minLength") && length < s["minLength"].get<size_t>()) return at + ": string too short";
    if (s.contains("maxLength") && length > s["maxLength"].get<size_t>()) return at + ": string too long";
    return "";
  }

  // As a validator working in doubles (ajv, or Python's jsonschema with float bounds) compares.
  static std::string CheckNumber(const json& v, const json& s, const std::string& at) {
    const double x = v.get<double>();
    if (s.contains("minimum") && !(x >= s["minimum"].get<double>())) return at + ": " + v.dump() + " below minimum";
    if (s.contains("maximum") && !(x <= s["maximum"].get<double>())) return at + ": " + v.dump() + " above maximum";
    if (s.contains("exclusiveMinimum") && !(x > s["exclusiveMinimum"].get<double>())) {
      return at + ": " + v.dump() + " not above exclusiveMinimum";
    }
    if (s.contains("exclusiveMaximum") && !(x < s["exclusiveMaximum"].get<double>())) {
      return at + ": " + v.dump() + " not below exclusiveMaximum";
    }
    return "";
  }

  std::string CheckObject(const json& v, const json& s, const std::string& at, int depth) const {
    const json properties = s.value("properties", json::object());
    for (const json& name : s.value("required", json::array())) {
      if (!v.contains(name.get<std::string>())) return at + ": required '" + name.get<std::string>() + "' missing";
    }
    for (const auto& [key, value] : v.items()) {
      if (properties.contains(key)) {
        if (auto why = Check(value, properties[key], at + "/" + key, depth + 1); !why.empty()) return why;
      } else if (s.contains("additionalProperties")) {
        if (auto why = Check(value, s["additionalProperties"], at + "/" + key, depth + 1); !why.empty()) return why;
      }
    }
    return "";
  }

  std::string CheckArray(const json& v, const json& s, const std::string& at, int depth) const {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return at + ": too few items";
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return at + ": too many items";
    if (!s.contains("items")) return "";
    for (size_t i = 0; i < v.size(); ++i) {
      if (auto why = Check(v[i], s["items"], at + "/" + std::to_string(i), depth + 1); !why.empty()) return why;
    }
    return "";
  }

  const json& root_;
};

}  // namespace

std::string SchemaViolation(const nlohmann::json& value, const nlohmann::json& schema) {
  return Validator(schema).Check(value, schema, "");
}

}  // namespace bmad::testing
