// The config as text: a whole config dumped as YAML, one value (`bmad config get`), the list of
// keys, and the Markdown reference of every key (`bmad config docs`, docs/configuration.md).
#include <yaml-cpp/yaml.h>

#include <charconv>
#include <string>
#include <system_error>
#include <type_traits>
#include <vector>

#include "common/config/config_fields.h"
#include "common/config/config_loader.h"
#include "common/config/number_text.h"

namespace bmad {

std::string config_text::ExactNumberText(double v) {
  char text[32];
  const auto [end, error] = std::to_chars(text, text + sizeof text, v);
  return error == std::errc() ? std::string(text, end) : FormatNumber(v);
}

namespace {

using config_text::ExactNumberText;
using config_text::FormatNumber;

class DumpVisitor {
 public:
  explicit DumpVisitor(YAML::Emitter& out) : out_(out) {}

  template <typename Body>
  void Section(std::string_view name, std::string_view /*doc*/, Body body) {
    out_ << YAML::Key << std::string(name) << YAML::Value << YAML::BeginMap;
    body();
    out_ << YAML::EndMap;
  }

  template <typename T>
  void Field(std::string_view key, const T& value, std::string_view /*doc*/, const Limits<T>&) {
    out_ << YAML::Key << std::string(key) << YAML::Value;
    Emit(value);
  }

 private:
  void Emit(int64_t v) { out_ << v; }
  void Emit(double v) { out_ << ExactNumberText(v); }
  void Emit(bool v) { out_ << (v ? "true" : "false"); }
  void Emit(const std::string& v) { out_ << YAML::DoubleQuoted << v; }
  void Emit(const std::vector<int64_t>& v) {
    out_ << YAML::Flow << YAML::BeginSeq;
    for (int64_t x : v) out_ << x;
    out_ << YAML::EndSeq;
  }
  template <typename E>
    requires std::is_enum_v<E>
  void Emit(E v) {
    out_ << std::string(EnumName(v));
  }

  YAML::Emitter& out_;
};

class KeyListVisitor {
 public:
  template <typename Body>
  void Section(std::string_view name, std::string_view, Body body) {
    section_ = std::string(name);
    body();
  }
  template <typename T>
  void Field(std::string_view key, const T&, std::string_view, const Limits<T>&) {
    keys.push_back(section_ + "." + std::string(key));
  }
  std::vector<std::string> keys;

 private:
  std::string section_;
};

class MarkdownVisitor {
 public:
  template <typename Body>
  void Section(std::string_view name, std::string_view doc, Body body) {
    section_ = std::string(name);
    out += "### `" + section_ + "`\n\n" + std::string(doc) + "\n\n";
    out += "| key | default | allowed | meaning |\n|---|---|---|---|\n";
    body();
    out += "\n";
  }

  template <typename T>
  void Field(std::string_view key, const T& value, std::string_view doc, const Limits<T>& limits) {
    out += "| `" + section_ + "." + std::string(key) + "` | " + Default(value) + " | " +
           Allowed(value, limits) + " | " + std::string(doc) + " |\n";
  }

  std::string out;

 private:
  static std::string Code(const std::string& s) { return "`" + s + "`"; }
  static std::string Default(int64_t v) { return Code(std::to_string(v)); }
  static std::string Default(double v) { return Code(FormatNumber(v)); }
  static std::string Default(bool v) { return Code(v ? "true" : "false"); }
  static std::string Default(const std::string& v) { return v.empty() ? "(empty)" : Code(v); }
  static std::string Default(const std::vector<int64_t>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return Code(s + "]");
  }
  template <typename E>
    requires std::is_enum_v<E>
  static std::string Default(E v) {
    return Code(std::string(EnumName(v)));
  }

  static std::string Allowed(int64_t, const Limits<int64_t>& l) {
    return FormatNumber(l.min) + " to " + FormatNumber(l.max);
  }
  static std::string Allowed(double, const Limits<double>& l) {
    return FormatNumber(l.min) + " to " + FormatNumber(l.max);
  }
  static std::string Allowed(bool, const Limits<bool>&) { return "`true`, `false`"; }
  static std::string Allowed(const std::string&, const Limits<std::string>& l) {
    if (l.endpoint) return "ZeroMQ endpoint (`tcp://`, `ipc://`)";
    if (!l.one_of.empty()) {
      std::string text = l.non_empty ? "" : "empty, ";
      for (size_t i = 0; i < l.one_of.size(); ++i) {
        text += (i == 0 ? "" : i + 1 == l.one_of.size() ? " or " : ", ") + Code(std::string(l.one_of[i]));
      }
      return text;
    }
    std::string text = l.non_empty ? "non-empty text" : "text";
    if (l.max_bytes > 0) text += ", at most " + std::to_string(l.max_bytes) + " bytes";
    return text;
  }
  static std::string Allowed(const std::vector<int64_t>&, const Limits<std::vector<int64_t>>& l) {
    return "list of integers, each " + FormatNumber(l.min) + " to " + FormatNumber(l.max);
  }
  template <typename E>
    requires std::is_enum_v<E>
  static std::string Allowed(E, const Limits<E>&) {
    std::string s;
    for (const auto& [v, name] : EnumNames<E>::kNames) s += (s.empty() ? "" : ", ") + Code(std::string(name));
    return s;
  }

  std::string section_;
};

class GetVisitor {
 public:
  explicit GetVisitor(std::string key) : key_(std::move(key)) {}
  template <typename Body>
  void Section(std::string_view name, std::string_view, Body body) {
    section_ = std::string(name);
    body();
  }
  template <typename T>
  void Field(std::string_view key, const T& value, std::string_view, const Limits<T>&) {
    if (section_ + "." + std::string(key) != key_) return;
    found = true;
    text = Text(value);
  }
  bool found = false;
  std::string text;

 private:
  static std::string Text(int64_t v) { return std::to_string(v); }
  static std::string Text(double v) { return ExactNumberText(v); }
  static std::string Text(bool v) { return v ? "true" : "false"; }
  static std::string Text(const std::string& v) { return v; }
  static std::string Text(const std::vector<int64_t>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
    return s;
  }
  template <typename E>
    requires std::is_enum_v<E>
  static std::string Text(E v) {
    return std::string(EnumName(v));
  }
  std::string key_;
  std::string section_;
};

}  // namespace

Result<std::string> GetConfigValue(const ServerConfig& config, const std::string& dotted_key) {
  ServerConfig copy = config;
  GetVisitor visitor(dotted_key);
  VisitConfig(copy, visitor);
  if (!visitor.found) return NotFound("unknown config key '" + dotted_key + "'");
  return visitor.text;
}

std::string ConfigReferenceMarkdown() {
  ServerConfig config;
  MarkdownVisitor visitor;
  VisitConfig(config, visitor);
  return visitor.out;
}

std::string DumpConfigYaml(const ServerConfig& config) {
  ServerConfig copy = config;  // VisitConfig takes a mutable reference; printing never mutates
  YAML::Emitter out;
  out << YAML::BeginMap;
  DumpVisitor visitor(out);
  VisitConfig(copy, visitor);
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::vector<std::string> ListConfigKeys() {
  ServerConfig config;
  KeyListVisitor visitor;
  VisitConfig(config, visitor);
  return visitor.keys;
}

}  // namespace bmad
