#include "tests/support/paths.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <stdexcept>
#include <string_view>
#include <utility>

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

std::string StoriesModelPath() { return SharedModelsDir() + "/stories260K.gguf"; }
std::string TinyRandomModelPath() { return SharedModelsDir() + "/llama-2-tiny-random.gguf"; }

bool KeepTestDirs() {
  const char* keep = std::getenv("BMAD_KEEP_TEST_DIRS");
  return keep != nullptr && std::string_view(keep) == "1";
}

void TempDirs::Track(const std::string& dir) {
  std::lock_guard lock(mu_);
  dirs_.push_back(dir);
}

std::vector<std::string> TempDirs::Finish(bool all_passed, std::ostream& log) {
  std::vector<std::string> dirs;
  {
    std::lock_guard lock(mu_);
    dirs.swap(dirs_);
  }
  if (!all_passed || KeepTestDirs()) {
    for (const std::string& dir : dirs) log << "kept for inspection: " << dir << "\n";
    return dirs;
  }
  for (const std::string& dir : dirs) {
    std::error_code ec;  // one already removed by its test is fine
    std::filesystem::remove_all(dir, ec);
  }
  return {};
}

namespace {

TempDirs& ProcessTempDirs() {
  static TempDirs* dirs = new TempDirs;  // never destroyed: the listener may outlive statics
  return *dirs;
}

// Every test binary runs one test per process under ctest, and a CI machine runs the suite
// again and again: directories left behind by passing tests would only pile up in /tmp.
class TempDirJanitor : public ::testing::EmptyTestEventListener {
 public:
  void OnTestProgramEnd(const ::testing::UnitTest& unit_test) override {
    ProcessTempDirs().Finish(unit_test.Passed(), std::cerr);
  }
};

void InstallJanitorOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    // gtest owns listeners once appended.
    ::testing::UnitTest::GetInstance()->listeners().Append(new TempDirJanitor);
  });
}

}  // namespace

std::string MakeTempDir(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/" + prefix + "XXXXXX";
  if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed for " + pattern);
  InstallJanitorOnce();
  ProcessTempDirs().Track(pattern);
  return pattern;
}

}  // namespace bmad::testing
