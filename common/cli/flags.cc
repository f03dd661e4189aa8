#include "common/cli/flags.h"

#include <charconv>

#include "common/byte_size.h"

namespace bmad::cli {
namespace {

// The shortest positional text that reads back as v (a range bound: 1000000, 0.5).
std::string FormatDouble(double v) {
  char buf[512];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  if (r.ec != std::errc()) r = std::to_chars(buf, buf + sizeof buf, v);  // too long positionally
  return std::string(buf, r.ptr);
}

}  // namespace

Flags::Flags(std::string usage) : usage_(std::move(usage)) {}

void Flags::AddString(std::string name, std::string* out, std::string help) {
  specs_.push_back({std::move(name), Kind::kString, out, std::move(help)});
}
void Flags::AddInt(std::string name, int64_t* out, std::string help) {
  specs_.push_back({std::move(name), Kind::kInt, out, std::move(help)});
}
void Flags::AddInt(std::string name, int64_t* out, std::string help, int64_t min, int64_t max) {
  Spec spec{std::move(name), Kind::kInt, out, std::move(help)};
  spec.bounded = true;
  spec.int_min = min;
  spec.int_max = max;
  specs_.push_back(std::move(spec));
}
void Flags::AddSize(std::string name, int64_t* out, std::string help, int64_t min, int64_t max) {
  AddInt(std::move(name), out, std::move(help), min, max);
  specs_.back().kind = Kind::kSize;
}
void Flags::AddDouble(std::string name, double* out, std::string help) {
  specs_.push_back({std::move(name), Kind::kDouble, out, std::move(help)});
}
void Flags::AddDouble(std::string name, double* out, std::string help, double min, double max) {
  Spec spec{std::move(name), Kind::kDouble, out, std::move(help)};
  spec.bounded = true;
  spec.double_min = min;
  spec.double_max = max;
  specs_.push_back(std::move(spec));
}
void Flags::AddBool(std::string name, bool* out, std::string help) {
  specs_.push_back({std::move(name), Kind::kBool, out, std::move(help)});
}
void Flags::AddList(std::string name, std::vector<std::string>* out, std::string help) {
  specs_.push_back({std::move(name), Kind::kList, out, std::move(help)});
}

Flags::Spec* Flags::Find(const std::string& name) {
  for (Spec& s : specs_) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

bool Flags::Seen(const std::string& name) const {
  for (const Spec& s : specs_) {
    if (s.name == name) return s.seen;
  }
  return false;
}

Status Flags::Assign(Spec& spec, const std::string& value) {
  spec.seen = true;
  switch (spec.kind) {
    case Kind::kString:
      *static_cast<std::string*>(spec.out) = value;
      return Status::Ok();
    case Kind::kList:
      static_cast<std::vector<std::string>*>(spec.out)->push_back(value);
      return Status::Ok();
    case Kind::kInt:
    case Kind::kSize: {
      int64_t scale = 1;
      const std::string_view signless = WithoutPlusSign(value);
      const std::string_view digits =
          spec.kind == Kind::kSize ? WithoutByteSizeSuffix(signless, &scale) : signless;
      int64_t v = 0;
      auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
      if (ec == std::errc() && scale != 1) {
        if (v > INT64_MAX / scale || v < INT64_MIN / scale) ec = std::errc::result_out_of_range;
        v *= ec == std::errc() ? scale : 1;
      }
      if (ec == std::errc::result_out_of_range && p == digits.data() + digits.size()) {
        return InvalidArgument("--" + spec.name + " is out of range: " + value + " is past what a 64-bit integer holds" +
                               (spec.bounded ? " (it must be in [" + std::to_string(spec.int_min) + ", " +
                                                   std::to_string(spec.int_max) + "])"
                                             : std::string()));
      }
      if (ec != std::errc() || p != digits.data() + digits.size() || digits.empty()) {
        return InvalidArgument("--" + spec.name + " expects an integer" +
                               (spec.kind == Kind::kSize ? " (optionally with KiB/MiB/GiB)" : "") + ", got '" +
                               value + "'");
      }
      if (spec.bounded && (v < spec.int_min || v > spec.int_max)) {
        return InvalidArgument("--" + spec.name + " must be in [" + std::to_string(spec.int_min) +
                               ", " + std::to_string(spec.int_max) + "], got " + value);
      }
      *static_cast<int64_t*>(spec.out) = v;
      return Status::Ok();
    }
    case Kind::kDouble: {
      double v = 0;
      const std::string_view number = WithoutPlusSign(value);
      auto [p, ec] = std::from_chars(number.data(), number.data() + number.size(), v);
      if (ec != std::errc() || p != number.data() + number.size() || number.empty()) {
        return InvalidArgument("--" + spec.name + " expects a number, got '" + value + "'");
      }
      if (spec.bounded && !(v >= spec.double_min && v <= spec.double_max)) {  // NaN fails too
        return InvalidArgument("--" + spec.name + " must be in [" + FormatDouble(spec.double_min) +
                               ", " + FormatDouble(spec.double_max) + "], got " + value);
      }
      *static_cast<double*>(spec.out) = v;
      return Status::Ok();
    }
    case Kind::kBool:
      if (value == "true" || value == "1") {
        *static_cast<bool*>(spec.out) = true;
      } else if (value == "false" || value == "0") {
        *static_cast<bool*>(spec.out) = false;
      } else {
        return InvalidArgument("--" + spec.name + " expects true or false, got '" + value + "'");
      }
      return Status::Ok();
  }
  return Internal("unreachable");
}

Status Flags::Parse(const std::vector<std::string>& args, std::vector<std::string>* positional) {
  bool flags_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (flags_done || arg.size() < 2 || arg[0] != '-' || arg == "-") {
      positional->push_back(arg);
      continue;
    }
    if (arg == "--") {
      flags_done = true;
      continue;
    }
    if (arg == "-h" || arg == "--help") {
      help_requested_ = true;
      continue;
    }
    if (!arg.starts_with("--")) return InvalidArgument("unknown flag " + arg + " (see --help)");
    std::string name = arg.substr(2);
    std::string value;
    bool has_value = false;
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    Spec* spec = Find(name);
    if (!spec) return InvalidArgument("unknown flag --" + name + " (see --help)");
    if (spec->kind == Kind::kBool && !has_value) {
      spec->seen = true;
      *static_cast<bool*>(spec->out) = true;
      continue;
    }
    if (!has_value) {
      if (i + 1 >= args.size()) return InvalidArgument("flag --" + name + " needs a value");
      // `--prompt --quiet` is a forgotten value far more often than a prompt "--quiet".
      const std::string& next = args[i + 1];
      if (next.starts_with("--") && next.size() > 2) {
        const std::string next_name = next.substr(2, next.find('=') - 2);
        if (Find(next_name) || next_name == "help") {
          return InvalidArgument("flag --" + name + " needs a value, but the next argument is the flag " +
                                 next + " (write --" + name + "=" + next +
                                 " if that is the value)");
        }
      }
      value = args[++i];
    }
    BMAD_RETURN_IF_ERROR(Assign(*spec, value));
  }
  return Status::Ok();
}

std::string Flags::Help() const {
  std::string out = "usage: " + usage_ + "\n";
  if (!specs_.empty()) out += "\nflags:\n";
  for (const Spec& s : specs_) {
    std::string left = "  --" + s.name;
    switch (s.kind) {
      case Kind::kString: left += " TEXT"; break;
      case Kind::kInt: left += " N"; break;
      case Kind::kSize: left += " BYTES"; break;
      case Kind::kDouble: left += " X"; break;
      case Kind::kList: left += " VALUE (repeatable)"; break;
      case Kind::kBool: break;
    }
    if (left.size() < 30) left.append(30 - left.size(), ' ');
    out += left + " " + s.help + "\n";
  }
  return out;
}

Result<std::vector<int64_t>> ParseIntList(const std::string& text, const std::string& what) {
  std::vector<int64_t> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(start, end - start);
    int64_t v = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec != std::errc() || p != item.data() + item.size() || item.empty()) {
      return InvalidArgument(what + " expects comma-separated integers, got '" + text + "'");
    }
    out.push_back(v);
    start = end + 1;
  }
  return out;
}

}  // namespace bmad::cli
