#include "common/config/config_loader.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "common/bounded_file.h"
#include "common/byte_size.h"
#include "common/config/config_fields.h"
#include "common/config/number_text.h"
#include "common/config/endpoint.h"

namespace bmad {
namespace {

std::string Quote(std::string_view s) { return "'" + std::string(s) + "'"; }

// A web origin as browsers send it: http:// or https://, a host, an optional port, nothing else.
bool IsWebOrigin(std::string_view s) {
  std::string_view rest;
  if (s.starts_with("https://")) {
    rest = s.substr(8);
  } else if (s.starts_with("http://")) {
    rest = s.substr(7);
  } else {
    return false;
  }
  if (rest.empty() || rest.front() == ':') return false;
  for (const char ch : rest) {
    const auto u = static_cast<unsigned char>(ch);
    if (!(std::isalnum(u) || ch == '.' || ch == '-' || ch == ':' || ch == '[' || ch == ']')) return false;
  }
  return true;
}

template <typename E>
std::string EnumChoices() {
  std::string out;
  for (const auto& [v, name] : EnumNames<E>::kNames) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

// Strict integer parsing; keys ending in _bytes also take KiB/MiB/GiB/TiB (and K/M/G/T) suffixes.
bool ParseInt64(std::string_view text, bool allow_size_suffix, int64_t* out) {
  text = WithoutPlusSign(text);
  int64_t scale = 1;
  if (allow_size_suffix) text = WithoutByteSizeSuffix(text, &scale);
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || text.empty()) return false;
  if (scale != 1) {
    if (value > INT64_MAX / scale || value < INT64_MIN / scale) return false;
    value *= scale;
  }
  *out = value;
  return true;
}

bool ParseDouble(std::string_view text, double* out) {
  text = WithoutPlusSign(text);
  double value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || text.empty()) return false;
  *out = value;
  return true;
}

using config_text::FormatNumber;

// Applies YAML nodes onto a ServerConfig, collecting every error with its position.
class LoadVisitor {
 public:
  LoadVisitor(std::string source, std::vector<ConfigError>* errors)
      : source_(std::move(source)), errors_(errors) {}

  // Load a whole document (root must be a map or empty).
  void LoadDocument(const YAML::Node& root, ServerConfig& config) {
    if (root && !root.IsNull() && !root.IsMap()) {
      Fail("", root.Mark(), "the top level must be a mapping of sections");
      return;
    }
    root_.reset(root);  // reset rebinds; yaml-cpp's operator= would copy into the tree
    VisitConfig(config, *this);
    if (!root_ || root_.IsNull()) return;
    std::set<std::string> seen;
    for (auto it = root_.begin(); it != root_.end(); ++it) {
      const std::string name = it->first.Scalar();
      if (!seen.insert(name).second) {
        // yaml-cpp keeps both and lookups find the first: the second would be silently ignored.
        Fail(name, it->first.Mark(), "section " + Quote(name) + " appears twice");
      } else if (!known_sections_.count(name)) {
        Fail(name, it->first.Mark(), "unknown section " + Quote(name) + SuggestSection());
      }
    }
  }

  // Load one "section.key" value (override form): `raw` is the text after '='.
  void LoadOne(std::string_view dotted_key, std::string_view raw, ServerConfig& config) {
    const size_t dot = dotted_key.find('.');
    if (dot == std::string_view::npos) {
      Fail(std::string(dotted_key), YAML::Mark::null_mark(), "an override must name section.key");
      return;
    }
    only_section_ = std::string(dotted_key.substr(0, dot));
    only_key_ = std::string(dotted_key.substr(dot + 1));
    only_raw_ = std::string(raw);
    VisitConfig(config, *this);
    if (!matched_) {
      if (!known_sections_.count(only_section_)) {
        Fail(std::string(dotted_key), YAML::Mark::null_mark(),
             "unknown section " + Quote(only_section_) + SuggestSection());
      } else {
        Fail(std::string(dotted_key), YAML::Mark::null_mark(),
             "unknown key (known keys: " + override_section_keys_ + ")");
      }
    }
  }

  template <typename Body>
  void Section(std::string_view name, std::string_view /*doc*/, Body body) {
    section_ = std::string(name);
    known_sections_.insert(section_);
    known_keys_.clear();
    known_keys_order_.clear();
    if (!only_section_.empty()) {  // override mode
      if (name == only_section_) {
        body();
        override_section_keys_ = KnownKeysList();
      }
      return;
    }
    // Lookups go through const references (yaml-cpp's non-const operator[] inserts keys), and
    // nodes are rebound with reset() (its operator= copies into the tree).
    const YAML::Node& root = root_;
    if (!root || !root.IsMap()) return;
    const YAML::Node found = root[section_];
    if (!found || found.IsNull()) return;
    node_.reset(found);
    if (!node_.IsMap()) {
      Fail(section_, node_.Mark(), "expected a mapping of keys");
      return;
    }
    body();
    std::set<std::string> seen;
    for (auto it = node_.begin(); it != node_.end(); ++it) {
      const std::string key = it->first.Scalar();
      if (!seen.insert(key).second) {
        Fail(section_ + "." + key, it->first.Mark(), "key " + Quote(key) + " appears twice");
      } else if (!known_keys_.count(key)) {
        Fail(section_ + "." + key, it->first.Mark(),
             "unknown key (known keys: " + KnownKeysList() + ")");
      }
    }
  }

  template <typename T>
  void Field(std::string_view key, T& value, std::string_view /*doc*/, const Limits<T>& limits) {
    known_keys_.insert(std::string(key));
    known_keys_order_.push_back(std::string(key));
    const std::string path = section_ + "." + std::string(key);
    if (!only_section_.empty()) {
      if (key != only_key_) return;
      matched_ = true;
      if constexpr (std::is_same_v<T, std::string>) {
        // Text as it is: a path may hold '#' (a YAML comment) or ': '. Quoted, it is YAML.
        if (!only_raw_.empty() && only_raw_[0] != '\'' && only_raw_[0] != '"') {
          Convert(path, YAML::Node(only_raw_), value, limits);
          return;
        }
      }
      YAML::Node parsed;
      try {
        parsed = YAML::Load(only_raw_);
      } catch (const YAML::Exception& e) {
        Fail(path, YAML::Mark::null_mark(), "bad value: " + e.msg);
        return;
      }
      if (!parsed) parsed = YAML::Node(YAML::NodeType::Null);
      Convert(path, parsed, value, limits);
      return;
    }
    const YAML::Node& section = node_;
    const YAML::Node n = section[std::string(key)];
    if (!n) return;
    // yaml-cpp marks an empty value where the next token starts (the next key's line): the key's
    // own mark says where the value is missing.
    key_mark_ = YAML::Mark::null_mark();
    if (n.IsNull() && section.IsMap()) {
      for (auto it = section.begin(); it != section.end(); ++it) {
        if (it->first.IsScalar() && it->first.Scalar() == key) key_mark_ = it->first.Mark();
      }
    }
    Convert(path, n, value, limits);
    key_mark_ = YAML::Mark::null_mark();
  }

 private:
  void Fail(std::string key, const YAML::Mark& mark, std::string message) {
    ConfigError e;
    e.source = source_;
    e.key = std::move(key);
    if (mark.line >= 0) {
      e.line = mark.line + 1;
      e.column = mark.column + 1;
    }
    e.message = std::move(message);
    errors_->push_back(std::move(e));
  }

  std::string KnownKeysList() const {
    std::string out;
    for (const auto& k : known_keys_order_) {
      if (!out.empty()) out += ", ";
      out += k;
    }
    return out;
  }

  std::string SuggestSection() const {
    std::string out = " (known sections:";
    for (const auto& s : known_sections_) out += " " + s;
    return out + ")";
  }

  bool RequireScalar(const std::string& path, const YAML::Node& n, const char* what) {
    if (n.IsScalar()) return true;
    Fail(path, n.IsNull() && key_mark_.line >= 0 ? key_mark_ : n.Mark(), std::string("expected ") + what + ", got a " +
                             (n.IsMap() ? "mapping" : n.IsSequence() ? "list" : "null value"));
    return false;
  }

  void Convert(const std::string& path, const YAML::Node& n, int64_t& value,
               const Limits<int64_t>& limits) {
    if (!RequireScalar(path, n, "an integer")) return;
    int64_t v = 0;
    const bool bytes = path.ends_with("_bytes");
    if (!ParseInt64(n.Scalar(), bytes, &v)) {
      int64_t scale = 1;
      const std::string_view text = bytes ? WithoutByteSizeSuffix(n.Scalar(), &scale) : std::string_view(n.Scalar());
      const size_t digits_from = !text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0;

      if (text.size() > digits_from &&
          text.find_first_not_of("0123456789", digits_from) == std::string::npos) {
        // Digits (and a size) past what 64 bits hold: out of range, not "not an integer".
        Fail(path, n.Mark(), "must be between " + FormatNumber(limits.min) + " and " +
                                 FormatNumber(limits.max) + ", got " + n.Scalar());
        return;
      }
      Fail(path, n.Mark(),
           std::string("expected an integer") + (bytes ? " (optionally with KiB/MiB/GiB)" : "") +
               ", got " + Quote(n.Scalar()));
      return;
    }
    if (v < limits.min || v > limits.max) {
      Fail(path, n.Mark(), "must be between " + FormatNumber(limits.min) + " and " +
                               FormatNumber(limits.max) + ", got " + FormatNumber(v));
      return;
    }
    value = v;
  }

  void Convert(const std::string& path, const YAML::Node& n, double& value,
               const Limits<double>& limits) {
    if (!RequireScalar(path, n, "a number")) return;
    double v = 0;
    if (!ParseDouble(n.Scalar(), &v)) {
      Fail(path, n.Mark(), "expected a number, got " + Quote(n.Scalar()));
      return;
    }
    if (!(v >= limits.min && v <= limits.max)) {
      Fail(path, n.Mark(), "must be between " + FormatNumber(limits.min) + " and " +
                               FormatNumber(limits.max) + ", got " + FormatNumber(v));
      return;
    }
    value = v;
  }

  void Convert(const std::string& path, const YAML::Node& n, bool& value, const Limits<bool>&) {
    if (!RequireScalar(path, n, "true or false")) return;
    const std::string& s = n.Scalar();
    if (s == "true") {
      value = true;
    } else if (s == "false") {
      value = false;
    } else {
      Fail(path, n.Mark(), "expected true or false, got " + Quote(s));
    }
  }

  void Convert(const std::string& path, const YAML::Node& n, std::string& value,
               const Limits<std::string>& limits) {
    std::string s;
    if (!n.IsNull()) {
      if (!RequireScalar(path, n, "a string")) return;
      s = n.Scalar();
    }
    if (limits.non_empty && s.empty()) {
      Fail(path, n.Mark(), "must not be empty");
      return;
    }
    if (limits.max_bytes > 0 && s.size() > limits.max_bytes) {
      Fail(path, n.Mark(), "is " + std::to_string(s.size()) + " bytes long, at most " +
                               std::to_string(limits.max_bytes) + " allowed");
      return;
    }
    if (!limits.one_of.empty() && !s.empty() &&
        std::find(limits.one_of.begin(), limits.one_of.end(), s) == limits.one_of.end()) {
      std::string known;
      for (std::string_view name : limits.one_of) known += (known.empty() ? "" : ", ") + std::string(name);
      Fail(path, n.Mark(), "is " + Quote(s) + ", not one of " + known);
      return;
    }
    if (limits.endpoint) {
      const std::string problem = EndpointProblem(s);
      if (!problem.empty()) {
        Fail(path, n.Mark(), problem + ", got " + Quote(s));
        return;
      }
    }
    value = std::move(s);
  }

  void Convert(const std::string& path, const YAML::Node& n, std::vector<int64_t>& value,
               const Limits<std::vector<int64_t>>& limits) {
    if (n.IsNull()) {
      value.clear();
      return;
    }
    if (!n.IsSequence()) {
      Fail(path, n.Mark(), "expected a list of integers");
      return;
    }
    std::vector<int64_t> out;
    bool good = true;
    for (size_t i = 0; i < n.size(); ++i) {
      const YAML::Node item = n[i];
      const std::string item_path = path + "[" + std::to_string(i) + "]";
      int64_t v = 0;
      if (!item.IsScalar() || !ParseInt64(item.Scalar(), false, &v)) {
        Fail(item_path, item.Mark(), "expected an integer");
        good = false;
      } else if (v < limits.min || v > limits.max) {
        Fail(item_path, item.Mark(), "must be between " + FormatNumber(limits.min) + " and " +
                                         FormatNumber(limits.max) + ", got " + FormatNumber(v));
        good = false;
      } else {
        out.push_back(v);
      }
    }
    if (good) value = std::move(out);
  }

  template <typename E>
    requires std::is_enum_v<E>
  void Convert(const std::string& path, const YAML::Node& n, E& value, const Limits<E>&) {
    if (!RequireScalar(path, n, "one of " + EnumChoices<E>())) return;
    if (!EnumFromName(n.Scalar(), &value)) {
      Fail(path, n.Mark(), "expected one of " + EnumChoices<E>() + ", got " + Quote(n.Scalar()));
    }
  }
  bool RequireScalar(const std::string& path, const YAML::Node& n, const std::string& what) {
    return RequireScalar(path, n, what.c_str());
  }

  std::string source_;
  std::vector<ConfigError>* errors_;
  YAML::Node root_;
  YAML::Node node_;
  std::string section_;
  // Where the key of the value being converted sits, for an empty value (null: none known).
  YAML::Mark key_mark_ = YAML::Mark::null_mark();
  std::set<std::string> known_sections_;
  std::set<std::string> known_keys_;
  std::vector<std::string> known_keys_order_;
  // Override mode.
  std::string only_section_;
  std::string only_key_;
  std::string only_raw_;
  bool matched_ = false;
  std::string override_section_keys_;  // the override's section's keys, for its error
};

void ApplyOverrides(const std::vector<std::string>& overrides, ServerConfig& config,
                    std::vector<ConfigError>* errors) {
  for (const std::string& o : overrides) {
    const size_t eq = o.find('=');
    if (eq == std::string::npos) {
      errors->push_back({"<override>", o, 0, 0, "expected section.key=value"});
      continue;
    }
    const size_t before = errors->size();
    LoadVisitor visitor("<override>", errors);
    visitor.LoadOne(o.substr(0, eq), std::string_view(o).substr(eq + 1), config);
    // The value was parsed alone: a position in it (always 1:1) says nothing.
    for (size_t i = before; i < errors->size(); ++i) (*errors)[i].line = (*errors)[i].column = 0;
  }
}

// Finds where a dotted key sits in the document, for cross-key errors.
YAML::Mark FindMark(const YAML::Node& root, const std::string& dotted) {
  const size_t dot = dotted.find('.');
  if (!root || !root.IsMap() || dot == std::string::npos) return YAML::Mark::null_mark();
  const YAML::Node section = root[dotted.substr(0, dot)];
  if (!section || !section.IsMap()) return YAML::Mark::null_mark();
  const YAML::Node key = section[dotted.substr(dot + 1)];
  return key ? key.Mark() : YAML::Mark::null_mark();
}

}  // namespace

std::string ConfigError::ToString() const {
  std::string out = source;
  if (line > 0) out += ":" + std::to_string(line) + ":" + std::to_string(column);
  out += ": ";
  if (!key.empty()) out += key + ": ";
  out += message;
  return out;
}

// A heartbeat's size besides its request lists: the replica id and load figures.
constexpr int64_t kHeartbeatOverheadBytes = 4096;

std::vector<ConfigError> ValidateConfig(const ServerConfig& c) {
  std::vector<ConfigError> errors;
  auto fail = [&](std::string key, std::string message) {
    errors.push_back({"", std::move(key), 0, 0, std::move(message)});
  };
  if (c.router.weight_queue + c.router.weight_memory + c.router.weight_utilization <= 0) {
    fail("router.weight_queue", "the three router weights must not all be 0");
  }
  if (!c.parallel.stage_layers.empty() &&
      static_cast<int64_t>(c.parallel.stage_layers.size()) != c.parallel.pp) {
    fail("parallel.stage_layers", "has " + std::to_string(c.parallel.stage_layers.size()) +
                                      " entries but parallel.pp is " +
                                      std::to_string(c.parallel.pp) + " (one entry per stage)");
  }
  if (c.scheduler.max_seqs > c.scheduler.max_batch_tokens) {
    fail("scheduler.max_seqs", "is " + std::to_string(c.scheduler.max_seqs) +
                                   ", more than scheduler.max_batch_tokens (" +
                                   std::to_string(c.scheduler.max_batch_tokens) +
                                   "): every sequence needs at least one token per step");
  }
  if (c.coordinator.liveness_timeout_ms < 2 * c.worker.heartbeat_ms) {
    // With less, one late heartbeat (a busy machine) makes a healthy replica dead, and its
    // requests move.
    fail("coordinator.liveness_timeout_ms",
         "is " + std::to_string(c.coordinator.liveness_timeout_ms) +
             ", less than twice worker.heartbeat_ms (" + std::to_string(c.worker.heartbeat_ms) +
             "): replicas would be declared dead between two heartbeats");
  }
  if (const std::string& origin = c.coordinator.http_cors_origin; !origin.empty() && origin != "*" &&
                                                                   !IsWebOrigin(origin)) {
    fail("coordinator.http_cors_origin",
         "must be empty (no CORS), \"*\" (any origin) or one origin such as "
         "https://chat.example.com (scheme and host, no path), got " + Quote(origin));
  }
  // A replica's heartbeat lists every request it holds (8 bytes of id, 4 of assignment each):
  // up to max_seqs running and max_waiting waiting. One larger than the limit would be refused
  // and the replica taken for dead under load.
  const int64_t heartbeat_bytes = 12 * (c.scheduler.max_seqs + c.scheduler.max_waiting) + kHeartbeatOverheadBytes;
  if (c.coordinator.max_message_bytes < heartbeat_bytes) {
    fail("coordinator.max_message_bytes",
         "is " + std::to_string(c.coordinator.max_message_bytes) + ", less than a replica's heartbeat may need (" +
             std::to_string(heartbeat_bytes) + " bytes: 12 per request held, up to scheduler.max_seqs " +
             std::to_string(c.scheduler.max_seqs) + " + scheduler.max_waiting " +
             std::to_string(c.scheduler.max_waiting) + ", and " + std::to_string(kHeartbeatOverheadBytes) +
             " more)");
  }
  // (tcp:// ones are compared by port below: two of port * bind two free ports)
  if (c.coordinator.client_endpoint.starts_with("ipc://") &&
      c.coordinator.client_endpoint == c.coordinator.worker_endpoint) {
    fail("coordinator.worker_endpoint", "must differ from coordinator.client_endpoint");
  }
  const int64_t replicas = c.cluster.normal_replicas + c.cluster.long_tail_replicas;
  if (replicas < 1) fail("cluster.normal_replicas", "the cluster needs at least one replica");
  if (c.metrics.worker_port != 0 && c.metrics.worker_port + replicas - 1 > kMaxPort) {
    fail("metrics.worker_port", "worker_port + replicas - 1 exceeds 65535");
  }
  // What the coordinator listens on, always on one host: two on the same port and host (or a
  // wildcard host) would fail at start with "address in use", naming neither key. Workers may
  // run elsewhere (Kubernetes), so their ports are not compared with these.
  struct Listener {
    std::string key;
    std::string host;
    int64_t port;
  };
  std::vector<Listener> listeners = {{"coordinator.http_port", c.coordinator.http_host, c.coordinator.http_port},
                                     {"metrics.coordinator_port", c.metrics.host, c.metrics.coordinator_port}};
  for (const auto& [key, endpoint] : {std::pair{"coordinator.client_endpoint", &c.coordinator.client_endpoint},
                                      std::pair{"coordinator.worker_endpoint", &c.coordinator.worker_endpoint}}) {
    if (const std::optional<TcpAddress> address = TcpAddressOf(*endpoint)) {
      listeners.push_back({key, address->host, address->port});
    }
  }
  for (size_t i = 0; i < listeners.size(); ++i) {
    for (size_t j = i + 1; j < listeners.size(); ++j) {
      const Listener& a = listeners[i];
      const Listener& b = listeners[j];
      if (ListenAddressesClash(a.host, a.port, b.host, b.port)) {
        fail(b.key, "port " + std::to_string(b.port) + " is " + a.key + "'s too (the coordinator listens on both, on " +
                        (a.host == b.host ? "host " + a.host : "hosts " + a.host + " and " + b.host) + ")");
      }
    }
  }
  return errors;
}

ConfigLoad LoadConfigText(std::string_view yaml, std::string_view source_name,
                          const std::vector<std::string>& overrides) {
  ConfigLoad load;
  const std::string source(source_name);
  YAML::Node root;
  try {
    // All of them: YAML::Load reads the first document and drops any after a '---' unseen.
    std::vector<YAML::Node> documents = YAML::LoadAll(std::string(yaml));
    if (!documents.empty()) root = documents.front();
    for (size_t i = 1; i < documents.size(); ++i) {
      if (documents[i].IsNull()) continue;  // an empty one (a trailing '---') says nothing
      const YAML::Mark mark = documents[i].Mark();
      ConfigError err{source, "", 0, 0,
                      "a config file holds one YAML document; found another after a '---' line"};
      if (mark.line >= 0) {
        err.line = mark.line + 1;
        err.column = mark.column + 1;
      }
      load.errors.push_back(std::move(err));
      return load;
    }
  } catch (const YAML::Exception& e) {
    // yaml-cpp words nesting past its depth limit "bad file".
    const bool too_deep = dynamic_cast<const YAML::DeepRecursion*>(&e) != nullptr;
    ConfigError err{source, "", 0, 0,
                    too_deep ? "YAML nested too deeply (" + std::to_string(static_cast<const YAML::DeepRecursion&>(e).depth()) +
                                   " levels) for a config"
                             : "YAML syntax error: " + e.msg};
    if (e.mark.line >= 0) {
      err.line = e.mark.line + 1;
      err.column = e.mark.column + 1;
    }
    load.errors.push_back(std::move(err));
    return load;
  }
  LoadVisitor visitor(source, &load.errors);
  visitor.LoadDocument(root, load.config);
  ApplyOverrides(overrides, load.config, &load.errors);
  if (load.errors.empty()) {
    for (ConfigError& e : ValidateConfig(load.config)) {
      // A value an override set is not where the file has that key (if it has it at all).
      const bool overridden = std::any_of(overrides.begin(), overrides.end(), [&](const std::string& o) {
        return o.substr(0, o.find('=')) == e.key;
      });
      if (overridden) {
        e.source = "<override>";
        load.errors.push_back(std::move(e));
        continue;
      }
      e.source = source;
      const YAML::Mark mark = FindMark(root, e.key);
      if (mark.line >= 0) {
        e.line = mark.line + 1;
        e.column = mark.column + 1;
      }
      load.errors.push_back(std::move(e));
    }
  }
  return load;
}

ConfigLoad LoadConfigFile(const std::string& path, const std::vector<std::string>& overrides) {
  // A config is a few KiB; the bound keeps a wrong path (/dev/zero, a model) out of memory.
  constexpr size_t kMaxConfigBytes = 1 << 20;
  Result<std::string> text = ReadFileUpTo(path, kMaxConfigBytes);
  if (!text.ok()) {
    ConfigLoad load;
    load.errors.push_back({path, "", 0, 0, text.status().message()});
    return load;
  }
  return LoadConfigText(*text, path, overrides);
}

Result<ServerConfig> ReadConfigFile(const std::string& path,
                                    const std::vector<std::string>& overrides) {
  ConfigLoad load = LoadConfigFile(path, overrides);
  if (load.ok()) return std::move(load.config);
  std::string message = "invalid configuration:";
  for (const ConfigError& e : load.errors) message += "\n  " + e.ToString();
  return InvalidArgument(std::move(message));
}

}  // namespace bmad
