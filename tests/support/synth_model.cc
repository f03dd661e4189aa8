#include "tests/support/synth_model.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>

#include "tests/support/paths.h"
#include "tests/support/process.h"

namespace bmad::testing {
namespace {

std::mutex mutex;
std::map<std::string, std::string>& Made() {
  static std::map<std::string, std::string> made;  // file name -> path
  return made;
}

// The folder every synthetic model of this program goes to, removed at exit. The handler is
// registered after the string is made, so it runs before the string is destroyed.
const std::string& Folder() {
  static const std::string dir = MakeTempDir("bmad-synth-");
  static const bool cleanup = std::atexit([] { std::filesystem::remove_all(dir); }) == 0;
  (void)cleanup;
  return dir;
}

}  // namespace

std::string SynthModel(const std::string& file_name, const std::vector<std::string>& flags) {
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = Made().find(file_name); it != Made().end()) return it->second;
  const std::string path = Folder() + "/" + file_name;
  std::vector<std::string> argv = {BinaryPath("bmad"), "model", "synth", "--out", path};
  argv.insert(argv.end(), flags.begin(), flags.end());
  ChildProcess synth;
  if (!synth.Start(argv, path + ".log")) {
    ADD_FAILURE() << "cannot start bmad model synth";
    return "";
  }
  const std::optional<int> status = synth.Wait(std::chrono::seconds(60));
  if (status != 0) {
    ADD_FAILURE() << "bmad model synth exited with " << status.value_or(-1)
                  << " (-1: still running after 60 s): " << synth.ReadLog();
    return "";
  }
  Made()[file_name] = path;
  return path;
}

}  // namespace bmad::testing
