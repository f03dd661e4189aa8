// Numbers in config text: as error messages and the reference write them, and exactly (the
// shortest text that reads back as the same value) for dumps and `config get`.
#pragma once

#include <sstream>
#include <string>

namespace bmad::config_text {

template <typename T>
std::string FormatNumber(T v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// The shortest text that reads back as the same double (0.6, not 0.59999999999999998, nor six
// digits of 0.1234567891).
std::string ExactNumberText(double v);

}  // namespace bmad::config_text
