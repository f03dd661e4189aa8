// ReadLaunchInfo reads only the environment (no MPI is initialised here).
#include <stdlib.h>

#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "worker/parallel/mpi_session.h"

namespace bmad::parallel {
namespace {

const std::vector<std::string> kLauncherVariables = {
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "PMI_RANK",             "PMI_SIZE",             "PMIX_RANK",
    "MPI_LOCALRANKID"};

// Clears the launcher's variables for the test and restores them afterwards.
class LaunchInfoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const auto& name : kLauncherVariables) {
      const char* value = getenv(name.c_str());
      saved_.push_back(value ? std::optional<std::string>(value) : std::nullopt);
      unsetenv(name.c_str());
    }
  }
  void TearDown() override {
    for (size_t i = 0; i < kLauncherVariables.size(); ++i) {
      if (saved_[i]) {
        setenv(kLauncherVariables[i].c_str(), saved_[i]->c_str(), 1);
      } else {
        unsetenv(kLauncherVariables[i].c_str());
      }
    }
  }
  std::vector<std::optional<std::string>> saved_;
};

TEST_F(LaunchInfoTest, WithoutALauncherItIsRankZeroOfOne) {
  const LaunchInfo info = ReadLaunchInfo();
  EXPECT_FALSE(info.launched);
  EXPECT_EQ(info.world_rank, 0);
  EXPECT_EQ(info.world_size, 1);
  EXPECT_EQ(info.local_rank, 0);
}

TEST_F(LaunchInfoTest, ReadsOpenMpisVariables) {
  setenv("OMPI_COMM_WORLD_RANK", "5", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "8", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
  const LaunchInfo info = ReadLaunchInfo();
  EXPECT_TRUE(info.launched);
  EXPECT_EQ(info.world_rank, 5);
  EXPECT_EQ(info.world_size, 8);
  EXPECT_EQ(info.local_rank, 1);
}

TEST_F(LaunchInfoTest, FallsBackToPmi) {
  setenv("PMI_RANK", "2", 1);
  setenv("PMI_SIZE", "3", 1);
  const LaunchInfo info = ReadLaunchInfo();
  EXPECT_TRUE(info.launched);
  EXPECT_EQ(info.world_rank, 2);
  EXPECT_EQ(info.world_size, 3);
}

TEST_F(LaunchInfoTest, IgnoresGarbageAndKeepsTheRankInsideTheWorld) {
  setenv("OMPI_COMM_WORLD_RANK", "seven", 1);
  setenv("PMIX_RANK", "4", 1);  // no size with it
  const LaunchInfo info = ReadLaunchInfo();
  EXPECT_TRUE(info.launched);
  EXPECT_EQ(info.world_rank, 4);
  EXPECT_EQ(info.world_size, 5);
}

}  // namespace
}  // namespace bmad::parallel
