// Where tests find the project's binaries and the shared model files.
#pragma once

#include <string>

namespace bmad::testing {

// The build's binary for `name` (e.g. "bmad"), from the build tree.
std::string BinaryPath(const std::string& name);
// ../shared/models beside the checkout, or $BMAD_SHARED_MODELS when set.
std::string SharedModelsDir();
// A fresh directory under $TMPDIR (or /tmp) for one test's files.
std::string MakeTempDir(const std::string& prefix);

}  // namespace bmad::testing
