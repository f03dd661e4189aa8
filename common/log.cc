#include "common/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

#include "common/utf8.h"

namespace bmad::log {
namespace {

std::atomic<int> g_level{static_cast<int>(Level::kInfo)};
std::mutex g_sink_mutex;
Sink g_sink;  // guarded by g_sink_mutex

// What a value from a peer (a replica id, an error message) must not bring into a log line as
// it is: control bytes (C0, DEL), C1 controls (U+0080..U+009F: U+009B starts a terminal
// escape), line and paragraph separators and bidirectional overrides (U+2028..U+202E,
// U+2066..U+2069, which reorder what a terminal shows) and marks (U+200E, U+200F, U+061C, which
// move neutral characters such as digits around them), and bytes that are not UTF-8. Each of
// these is written escaped, byte by byte.
bool IsControl(char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7F; }

// The length of what must be escaped at the start of `v` (not empty), or 0 to copy its first
// character as it is; sets `*length` to that character's length.
size_t EscapedLength(std::string_view v, size_t* length) {
  const Utf8Scan scan = ScanUtf8(v);
  *length = scan.length;
  if (scan.status != Utf8Status::kComplete) return scan.length;  // not UTF-8
  if (scan.length == 1) return IsControl(v[0]) ? 1 : 0;
  const auto b = [&](size_t i) { return static_cast<unsigned char>(v[i]); };
  if (scan.length == 2 && b(0) == 0xC2 && b(1) <= 0x9F) return 2;  // C1
  if (scan.length == 2 && b(0) == 0xD8 && b(1) == 0x9C) return 2;  // ALM
  if (scan.length == 3 && b(0) == 0xE2 && b(1) == 0x80 && (b(2) == 0x8E || b(2) == 0x8F)) return 3;  // LRM, RLM
  if (scan.length == 3 && b(0) == 0xE2 && b(1) == 0x80 && b(2) >= 0xA8 && b(2) <= 0xAE) return 3;
  if (scan.length == 3 && b(0) == 0xE2 && b(1) == 0x81 && b(2) >= 0xA6 && b(2) <= 0xA9) return 3;
  return 0;
}

bool NeedsQuotes(std::string_view v) {
  if (v.empty()) return true;
  for (size_t i = 0, length = 0; i < v.size(); i += length) {
    const char c = v[i];
    if (c == ' ' || c == '"' || c == '=' || EscapedLength(v.substr(i), &length) > 0) return true;
  }
  return false;
}

void AppendValue(std::string& out, std::string_view v) {
  if (!NeedsQuotes(v)) {
    out += v;
    return;
  }
  out += '"';
  for (size_t i = 0, length = 0; i < v.size(); i += length) {
    const char c = v[i];
    const size_t escaped_bytes = EscapedLength(v.substr(i), &length);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (escaped_bytes > 0) {
      AppendHexEscaped(out, v.substr(i, escaped_bytes));
    } else {
      out.append(v.substr(i, length));
    }
  }
  out += '"';
}

}  // namespace

std::string_view LevelName(Level level) {
  switch (level) {
    case Level::kDebug: return "DEBUG";
    case Level::kInfo: return "INFO";
    case Level::kWarn: return "WARN";
    case Level::kError: return "ERROR";
    case Level::kOff: return "OFF";
  }
  return "?";
}

Result<Level> ParseLevel(std::string_view name) {
  std::string lower;
  for (char c : name) lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (lower == "debug") return Level::kDebug;
  if (lower == "info") return Level::kInfo;
  if (lower == "warn" || lower == "warning") return Level::kWarn;
  if (lower == "error") return Level::kError;
  if (lower == "off") return Level::kOff;
  return InvalidArgument("unknown log level '" + std::string(name) +
                         "' (expected debug, info, warn, error or off)");
}

void SetLevel(Level level) { g_level.store(static_cast<int>(level), std::memory_order_relaxed); }
Level GetLevel() { return static_cast<Level>(g_level.load(std::memory_order_relaxed)); }

Field::Field(std::string_view k, double v) : key(k) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  value = buf;
}

std::string FormatLine(Level level, std::string_view component, std::string_view message,
                       Fields fields) {
  using namespace std::chrono;
  const auto now = system_clock::now();
  const std::time_t secs = system_clock::to_time_t(now);
  const auto millis = duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char stamp[64];
  std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(millis));
  std::string line;
  line.reserve(96 + message.size());
  line += stamp;
  line += ' ';
  std::string_view name = LevelName(level);
  line += name;
  line.append(6 - name.size(), ' ');
  line += component;
  line += ": ";
  line += message;
  for (const Field& f : fields) {
    line += ' ';
    line += f.key;
    line += '=';
    AppendValue(line, f.value);
  }
  return line;
}

void Write(Level level, std::string_view component, std::string_view message, Fields fields) {
  if (!Enabled(level) || level == Level::kOff) return;
  std::string line = FormatLine(level, component, message, fields);
  std::lock_guard<std::mutex> lock(g_sink_mutex);
  if (g_sink) {
    g_sink(line);
    return;
  }
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stderr);
}

void SetSink(Sink sink) {
  std::lock_guard<std::mutex> lock(g_sink_mutex);
  g_sink = std::move(sink);
}

}  // namespace bmad::log
