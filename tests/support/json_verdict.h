// An independent judge of JSON text for the tests of constrained decoding: nlohmann's parser.
#pragma once

#include <cstddef>
#include <string_view>

namespace bmad::testing {

enum class JsonVerdict {
  kWhole,    // one whole JSON value
  kPrefix,   // the parser failed only at the end of the input: text more could complete
  kInvalid,  // the parser failed before the end
};

// `failed_at`, for kInvalid: the 0-based index of the byte where the parser gave up (at or
// after the first byte no JSON text can have there: nlohmann checks some things late, e.g. a
// lone surrogate escape only at its last digit).
JsonVerdict JudgeJson(std::string_view text, size_t* failed_at = nullptr);

}  // namespace bmad::testing
