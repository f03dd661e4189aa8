// Numbers as config keys and flags spell them: an optional '+' before the digits, and for sizes
// in bytes (`*_bytes` keys, --kv-bytes) an optional suffix KiB/MiB/GiB/TiB or K/M/G/T, all
// powers of 1024.
#pragma once

#include <cstdint>
#include <string_view>

namespace bmad {

// `text` without one leading '+' before a digit or a point (YAML 1.2's core schema and strtod
// allow it; from_chars does not).
std::string_view WithoutPlusSign(std::string_view text);

// `text` without its size suffix; the suffix's factor in `*scale` (1 when there is none).
std::string_view WithoutByteSizeSuffix(std::string_view text, int64_t* scale);

}  // namespace bmad
