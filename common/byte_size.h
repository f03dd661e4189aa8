// Sizes in bytes as config keys (`*_bytes`) and flags (--kv-bytes) take them: an integer with an
// optional suffix KiB/MiB/GiB/TiB or K/M/G/T, all powers of 1024.
#pragma once

#include <cstdint>
#include <string_view>

namespace bmad {

// `text` without its size suffix; the suffix's factor in `*scale` (1 when there is none).
std::string_view WithoutByteSizeSuffix(std::string_view text, int64_t* scale);

}  // namespace bmad
