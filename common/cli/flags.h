// Command-line flags for bmad's subcommands: --name VALUE, --name=VALUE, boolean --name,
// repeatable list flags, positional arguments. Bad input is a Status naming the flag.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace bmad::cli {

class Flags {
 public:
  // `usage` is the first line of --help, e.g. "bmad config check FILE [flags]".
  explicit Flags(std::string usage);

  void AddString(std::string name, std::string* out, std::string help);
  void AddInt(std::string name, int64_t* out, std::string help);
  // The same, refusing values outside [min, max] with an error that names the flag and the range
  // (a value past what the consumer takes must never wrap or be clamped on the way).
  void AddInt(std::string name, int64_t* out, std::string help, int64_t min, int64_t max);
  // A byte count in [min, max], as an integer or with a size suffix (64MiB, 2G: common/byte_size.h).
  void AddSize(std::string name, int64_t* out, std::string help, int64_t min, int64_t max);
  void AddDouble(std::string name, double* out, std::string help);
  // The same, refusing NaN and values outside [min, max].
  void AddDouble(std::string name, double* out, std::string help, double min, double max);
  void AddBool(std::string name, bool* out, std::string help);  // presence sets true
  void AddList(std::string name, std::vector<std::string>* out, std::string help);  // repeatable

  // Parses args (without the program and subcommand names). Positional arguments go to
  // `positional`; "--" ends flags. Sets help_requested() for -h/--help.
  Status Parse(const std::vector<std::string>& args, std::vector<std::string>* positional);
  bool help_requested() const { return help_requested_; }
  // True when the flag appeared on the command line.
  bool Seen(const std::string& name) const;

  std::string Help() const;

 private:
  enum class Kind { kString, kInt, kSize, kDouble, kBool, kList };
  struct Spec {
    std::string name;
    Kind kind;
    void* out;
    std::string help;
    bool seen = false;
    bool bounded = false;
    int64_t int_min = 0, int_max = 0;
    double double_min = 0, double_max = 0;
  };
  Spec* Find(const std::string& name);
  Status Assign(Spec& spec, const std::string& value);

  std::string usage_;
  std::vector<Spec> specs_;
  bool help_requested_ = false;
};

// Splits "1,8,32" into integers; InvalidArgument naming `what` on bad input.
Result<std::vector<int64_t>> ParseIntList(const std::string& text, const std::string& what);

}  // namespace bmad::cli
