// Structured logging: one line per event, "TIME LEVEL component: message key=value ...".
//
// Lines go to stderr (or a sink a test installs). The level is process-wide, set from config
// (`log.level`) or a `--log-level` flag. Cheap when filtered: fields are only formatted for
// lines that are written.
#pragma once

#include <concepts>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>

#include "common/status.h"

namespace bmad::log {

enum class Level : int { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

std::string_view LevelName(Level level);
// Accepts debug, info, warn (warning), error, off; case-insensitive.
Result<Level> ParseLevel(std::string_view name);

void SetLevel(Level level);
Level GetLevel();
inline bool Enabled(Level level) { return level >= GetLevel(); }

// One key=value pair. Values that contain spaces, quotes or '=' are quoted when written.
struct Field {
  Field(std::string_view k, std::string_view v) : key(k), value(v) {}
  Field(std::string_view k, const char* v) : key(k), value(v ? v : "") {}
  Field(std::string_view k, const std::string& v) : key(k), value(v) {}
  Field(std::string_view k, bool v) : key(k), value(v ? "true" : "false") {}
  template <std::integral T>
  Field(std::string_view k, T v) : key(k), value(std::to_string(v)) {}
  Field(std::string_view k, double v);
  Field(std::string_view k, const Status& s) : key(k), value(s.ToString()) {}

  std::string_view key;
  std::string value;
};

using Fields = std::initializer_list<Field>;

// Formats one line (no trailing newline); exposed for tests.
std::string FormatLine(Level level, std::string_view component, std::string_view message,
                       Fields fields);

void Write(Level level, std::string_view component, std::string_view message, Fields fields = {});

inline void Debug(std::string_view c, std::string_view m, Fields f = {}) {
  if (Enabled(Level::kDebug)) Write(Level::kDebug, c, m, f);
}
inline void Info(std::string_view c, std::string_view m, Fields f = {}) {
  if (Enabled(Level::kInfo)) Write(Level::kInfo, c, m, f);
}
inline void Warn(std::string_view c, std::string_view m, Fields f = {}) {
  if (Enabled(Level::kWarn)) Write(Level::kWarn, c, m, f);
}
inline void Error(std::string_view c, std::string_view m, Fields f = {}) {
  if (Enabled(Level::kError)) Write(Level::kError, c, m, f);
}

// Replaces where lines go (nullptr restores stderr). Thread-safe; used by tests.
using Sink = std::function<void(std::string_view line)>;
void SetSink(Sink sink);

}  // namespace bmad::log
