#include "coordinator/http/python_json.h"

#include <array>
#include <charconv>
#include <string_view>
#include <system_error>

namespace bmad::http::internal {
namespace {

// A double as Python's repr writes it: the shortest digits that read back the same, in fixed
// notation with at least one decimal ("100.0", "0.0001") for exponents -4 to 15, else in
// scientific notation with a signed exponent of at least two digits ("1e+16", "1.5e-05").
std::string PythonFloat(double value) {
  std::array<char, 64> buffer{};
  const auto [end, error] = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value,
                                          std::chars_format::scientific);
  if (error != std::errc()) return Json(value).dump();
  const std::string_view text(buffer.data(), static_cast<size_t>(end - buffer.data()));  // "-1.5e+00"
  const size_t e = text.find('e');
  std::string_view mantissa = text.substr(0, e);
  const int exponent = std::stoi(std::string(text.substr(e + 1)));
  std::string out;
  if (mantissa.front() == '-') {
    out += '-';
    mantissa.remove_prefix(1);
  }
  std::string digits;
  for (const char c : mantissa) {
    if (c != '.') digits += c;
  }
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0.";
      out.append(static_cast<size_t>(-exponent - 1), '0');
      out += digits;
      return out;
    }
    const auto whole = static_cast<size_t>(exponent) + 1;
    if (digits.size() < whole) digits.append(whole - digits.size(), '0');
    out.append(digits, 0, whole);
    out += '.';
    out += digits.size() > whole ? digits.substr(whole) : "0";
    return out;
  }
  out += digits[0];
  if (digits.size() > 1) {
    out += '.';
    out.append(digits, 1);
  }
  out += exponent < 0 ? "e-" : "e+";
  const int magnitude = exponent < 0 ? -exponent : exponent;
  if (magnitude < 10) out += '0';
  out += std::to_string(magnitude);
  return out;
}

// `indent` < 0: one line, ", " between items; else each item on its own line, `indent` spaces
// deeper per level, "," at line ends (Python's separators when indent is given).
void Write(const Json& value, std::string& out, int indent, int level) {
  const bool container = value.is_object() || value.is_array();
  if (container && value.empty()) {
    out += value.is_object() ? "{}" : "[]";
    return;
  }
  if (container) {
    const auto line = [&](int depth) {
      out += '\n';
      out.append(static_cast<size_t>(indent * depth), ' ');
    };
    out += value.is_object() ? '{' : '[';
    bool first = true;
    const auto next = [&] {
      if (!first) out += indent < 0 ? ", " : ",";
      first = false;
      if (indent >= 0) line(level + 1);
    };
    if (value.is_object()) {
      for (const auto& [key, item] : value.items()) {
        next();
        out += Json(key).dump();
        out += ": ";
        Write(item, out, indent, level + 1);
      }
    } else {
      for (const Json& item : value) {
        next();
        Write(item, out, indent, level + 1);
      }
    }
    if (indent >= 0) line(level);
    out += value.is_object() ? '}' : ']';
    return;
  }
  if (value.is_number_float()) {
    out += PythonFloat(value.get<double>());
    return;
  }
  // Other scalars: nlohmann's escapes are Python's with ensure_ascii=False, its integers
  // Python's. Text arrives parsed from a request body, so it is valid UTF-8; replace guards
  // anything else.
  out += value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace

std::string PythonJsonDumps(const Json& value, int indent) {
  std::string out;
  Write(value, out, indent, 0);
  return out;
}

}  // namespace bmad::http::internal
