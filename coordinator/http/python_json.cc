#include "coordinator/http/python_json.h"

namespace bmad::http::internal {
namespace {

void Write(const Json& value, std::string& out) {
  if (value.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [key, item] : value.items()) {
      if (!first) out += ", ";
      first = false;
      out += Json(key).dump();
      out += ": ";
      Write(item, out);
    }
    out += '}';
    return;
  }
  if (value.is_array()) {
    out += '[';
    for (size_t i = 0; i < value.size(); ++i) {
      if (i > 0) out += ", ";
      Write(value[i], out);
    }
    out += ']';
    return;
  }
  // Scalars: nlohmann's escapes are Python's with ensure_ascii=False. Text arrives parsed from a
  // request body, so it is valid UTF-8; replace guards anything else.
  out += value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace

std::string PythonJsonDumps(const Json& value) {
  std::string out;
  Write(value, out);
  return out;
}

}  // namespace bmad::http::internal
