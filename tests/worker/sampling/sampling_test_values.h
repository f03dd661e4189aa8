// Values the sampling tests share.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace bmad::testing {

inline constexpr float kInf = std::numeric_limits<float>::infinity();
inline const std::vector<int32_t> kNoTokens;  // no prompt, no output yet

}  // namespace bmad::testing
