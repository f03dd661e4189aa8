// The version of bmad this binary was built from (CMake's project version), for `--version`,
// the coordinator's /version and the bmad_build_info metric.
#pragma once

#include <string_view>

namespace bmad {

std::string_view Version();

}  // namespace bmad
