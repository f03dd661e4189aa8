#include "tests/support/paths.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace bmad::testing {
namespace {

std::string MadeDirWithFile(const std::string& prefix) {
  const std::string dir = MakeTempDir(prefix);
  std::ofstream(dir + "/log.txt") << "something a test wrote\n";
  return dir;
}

TEST(TempDirsTest, AfterEveryTestPassedTheDirectoriesAreGone) {
  TempDirs dirs;
  const std::string a = MadeDirWithFile("bmad-paths-a-");
  const std::string b = MadeDirWithFile("bmad-paths-b-");
  dirs.Track(a);
  dirs.Track(b);
  std::ostringstream log;
  EXPECT_TRUE(dirs.Finish(/*all_passed=*/true, log).empty());
  EXPECT_FALSE(std::filesystem::exists(a));
  EXPECT_FALSE(std::filesystem::exists(b));
  EXPECT_EQ(log.str(), "");
}

TEST(TempDirsTest, AfterAFailureTheyAreKeptAndNamed) {
  TempDirs dirs;
  const std::string a = MadeDirWithFile("bmad-paths-kept-");
  dirs.Track(a);
  std::ostringstream log;
  const std::vector<std::string> kept = dirs.Finish(/*all_passed=*/false, log);
  ASSERT_EQ(kept, std::vector<std::string>{a});
  EXPECT_TRUE(std::filesystem::exists(a + "/log.txt"));
  EXPECT_NE(log.str().find(a), std::string::npos) << log.str();
  std::filesystem::remove_all(a);
}

TEST(TempDirsTest, ADirectoryItsTestAlreadyRemovedIsNoError) {
  TempDirs dirs;
  const std::string a = MadeDirWithFile("bmad-paths-gone-");
  dirs.Track(a);
  std::filesystem::remove_all(a);
  std::ostringstream log;
  EXPECT_TRUE(dirs.Finish(/*all_passed=*/true, log).empty());
  // Finished directories are forgotten: a second end removes nothing twice.
  EXPECT_TRUE(dirs.Finish(/*all_passed=*/false, log).empty());
}

}  // namespace
}  // namespace bmad::testing
