#include "tests/support/json_verdict.h"

#include <cctype>
#include <string>

#include <nlohmann/json.hpp>

namespace bmad::testing {
namespace {

// The text with every exponent's digits made zeros: the grammar is the same, and nlohmann no
// longer refuses a number beyond a double's range (JSON's grammar allows any).
std::string TameExponents(std::string_view text) {
  std::string out(text);
  for (size_t i = 1; i < out.size(); ++i) {
    if ((out[i] != 'e' && out[i] != 'E') || !std::isdigit(static_cast<unsigned char>(out[i - 1]))) continue;
    size_t j = i + 1;
    if (j < out.size() && (out[j] == '+' || out[j] == '-')) ++j;
    for (; j < out.size() && std::isdigit(static_cast<unsigned char>(out[j])); ++j) out[j] = '0';
  }
  return out;
}

}  // namespace

JsonVerdict JudgeJson(std::string_view text, size_t* failed_at) {
  try {
    const nlohmann::json parsed = nlohmann::json::parse(TameExponents(text));
    (void)parsed;
    return JsonVerdict::kWhole;
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is 1-based; one past the last byte means the input ran out.
    if (e.byte > text.size()) return JsonVerdict::kPrefix;
    if (failed_at) *failed_at = e.byte == 0 ? 0 : e.byte - 1;
    return JsonVerdict::kInvalid;
  }
}

}  // namespace bmad::testing
