#include "common/version.h"

// Defined for this file only (common/CMakeLists.txt): a new version rebuilds one file.
#ifndef BMAD_VERSION_STRING
#error "BMAD_VERSION_STRING is set by common/CMakeLists.txt"
#endif

namespace bmad {

std::string_view Version() { return BMAD_VERSION_STRING; }

}  // namespace bmad
