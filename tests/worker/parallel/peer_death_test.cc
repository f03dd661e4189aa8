// A rank SIGKILLed mid-collective: the survivors' calls must end promptly, never hang. What
// ends them, as observed with Open MPI 4.1 (vader or tcp): about a second after the death
// mpirun sends SIGTERM to the survivors (our handler raises the abort flag: kCancelled), and
// about a second later SIGKILL. The transport itself reports nothing in that time, so
// kUnavailable is accepted but not expected. A call with a shorter timeout ends first with
// kDeadlineExceeded. The driver runs mpirun itself, because mpirun exits non-zero after a rank
// dies and the interesting part is what the survivors printed.
#include <chrono>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "tests/support/paths.h"
#include "tests/support/process.h"

namespace bmad::parallel {
namespace {

const std::map<std::string, std::string> kMpiEnvironment = {
    {"OMPI_ALLOW_RUN_AS_ROOT", "1"},   {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"},
    {"OMPI_MCA_btl", "self,vader"},    {"OMPI_MCA_pml", "ob1"},
    {"OMPI_MCA_rmaps_base_oversubscribe", "1"}, {"OPENBLAS_NUM_THREADS", "1"}};

struct SurvivorReport {
  std::string code;
  long elapsed_ms;
  std::string line;
};

// Runs 4 ranks of bmad_parallel_peer_death_rank (rank 1 dies) with `timeout_ms` on their
// all-reduce; returns each survivor's report by rank, and mpirun's output in `log`.
std::map<int, SurvivorReport> RunWithOneDeath(int timeout_ms, std::string* log) {
  const std::string dir = testing::MakeTempDir("bmad-peer-death-");
  testing::ChildProcess mpirun;
  EXPECT_TRUE(mpirun.Start({BMAD_MPIEXEC, "-n", "4", "--oversubscribe",
                            testing::BinaryPath("bmad_parallel_peer_death_rank"),
                            std::to_string(timeout_ms)},
                           dir + "/mpirun.log", kMpiEnvironment))
      << mpirun.error();
  const auto exit_status = mpirun.Wait(std::chrono::seconds(60));
  *log = mpirun.ReadLog();
  std::filesystem::remove_all(dir);
  EXPECT_TRUE(exit_status.has_value()) << "mpirun did not end within 60 s\n" << *log;
  if (exit_status) {
    EXPECT_NE(*exit_status, 0) << "mpirun should report the killed rank";
  }

  std::map<int, SurvivorReport> reports;
  const std::regex pattern(R"(survivor rank (\d+): ([A-Z_]+) after (\d+) ms)");
  std::istringstream lines(*log);
  for (std::string line; std::getline(lines, line);) {
    std::smatch match;
    if (!std::regex_search(line, match, pattern)) continue;
    reports[std::stoi(match[1])] = {match[2], std::stol(match[3]), line};
  }
  return reports;
}

std::set<int> Ranks(const std::map<int, SurvivorReport>& reports) {
  std::set<int> ranks;
  for (const auto& [rank, report] : reports) ranks.insert(rank);
  return ranks;
}

TEST(PeerDeathTest, SurvivorsAreCancelledPromptlyByMpirunsSigterm) {
  // The calls' own timeout (20 s) is far beyond the bound checked: the survivors must learn
  // of the death from mpirun or MPI, not by waiting it out.
  std::string log;
  const auto reports = RunWithOneDeath(20'000, &log);
  EXPECT_EQ(Ranks(reports), (std::set<int>{0, 2, 3})) << log;
  for (const auto& [rank, report] : reports) {
    EXPECT_TRUE(report.code == "CANCELLED" || report.code == "UNAVAILABLE") << report.line;
    EXPECT_LT(report.elapsed_ms, 10'000) << report.line;
  }
}

TEST(PeerDeathTest, SurvivorsWithAShortTimeoutTimeOut) {
  std::string log;
  const auto reports = RunWithOneDeath(300, &log);
  EXPECT_EQ(Ranks(reports), (std::set<int>{0, 2, 3})) << log;
  for (const auto& [rank, report] : reports) {
    EXPECT_TRUE(report.code == "DEADLINE_EXCEEDED" || report.code == "CANCELLED" ||
                report.code == "UNAVAILABLE")
        << report.line;
    EXPECT_GE(report.elapsed_ms, report.code == "DEADLINE_EXCEEDED" ? 300 : 0) << report.line;
    EXPECT_LT(report.elapsed_ms, 3'300) << report.line;
  }
}

}  // namespace
}  // namespace bmad::parallel
