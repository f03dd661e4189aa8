#include "common/byte_size.h"

#include <cctype>
#include <utility>

namespace bmad {

std::string_view WithoutPlusSign(std::string_view text) {
  if (text.size() >= 2 && text[0] == '+' && (std::isdigit(static_cast<unsigned char>(text[1])) || text[1] == '.')) {
    text.remove_prefix(1);
  }
  return text;
}

std::string_view WithoutByteSizeSuffix(std::string_view text, int64_t* scale) {
  static const std::pair<std::string_view, int64_t> kSuffixes[] = {
      {"KiB", 1ll << 10}, {"MiB", 1ll << 20}, {"GiB", 1ll << 30}, {"TiB", 1ll << 40},
      {"K", 1ll << 10},   {"M", 1ll << 20},   {"G", 1ll << 30},   {"T", 1ll << 40}};
  *scale = 1;
  for (const auto& [suffix, factor] : kSuffixes) {
    if (text.size() > suffix.size() && text.ends_with(suffix)) {
      *scale = factor;
      return text.substr(0, text.size() - suffix.size());
    }
  }
  return text;
}

}  // namespace bmad
