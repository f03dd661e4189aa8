#include "tests/support/paths.h"

#include <cstdlib>
#include <stdexcept>

namespace bmad::testing {

std::string BinaryPath(const std::string& name) {
  const char* dir = std::getenv("BMAD_BIN_DIR");
  if (dir && *dir) return std::string(dir) + "/" + name;
  return std::string(BMAD_BINARY_DIR) + "/bin/" + name;
}

std::string SharedModelsDir() {
  const char* env = std::getenv("BMAD_SHARED_MODELS");
  if (env && *env) return env;
  return std::string(BMAD_SOURCE_DIR) + "/../shared/models";
}

std::string MakeTempDir(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/" + prefix + "XXXXXX";
  if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed for " + pattern);
  return pattern;
}

}  // namespace bmad::testing
