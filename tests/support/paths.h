// Where tests find the project's binaries and the shared model files.
#pragma once

#include <mutex>
#include <ostream>
#include <string>
#include <vector>

namespace bmad::testing {

// The build's binary for `name` (e.g. "bmad"), from the build tree.
std::string BinaryPath(const std::string& name);
// ../shared/models beside the checkout, or $BMAD_SHARED_MODELS when set.
std::string SharedModelsDir();
// The two shared models most tests run: stories260K (a 512-token vocabulary) and
// llama-2-tiny-random (the Llama-2 32k vocabulary).
std::string StoriesModelPath();
std::string TinyRandomModelPath();
// A fresh directory under $TMPDIR (or /tmp) for one test's files. It is removed when the test
// program ends with every test passed, and kept (its path printed) when one failed.
std::string MakeTempDir(const std::string& prefix);

// True when BMAD_KEEP_TEST_DIRS=1: temporary directories are kept after a pass too, to read
// the logs of the processes a passing test ran.
bool KeepTestDirs();

// The directories a test program made, and what happens to them at its end.
class TempDirs {
 public:
  void Track(const std::string& dir);
  // Removes every tracked directory when all tests passed (unless KeepTestDirs()); otherwise
  // lists them on `log` and returns them. Either way it forgets them.
  std::vector<std::string> Finish(bool all_passed, std::ostream& log);

 private:
  std::mutex mu_;
  std::vector<std::string> dirs_;
};

}  // namespace bmad::testing
