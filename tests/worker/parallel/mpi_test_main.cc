// main() for GoogleTest programs that run under mpirun (or alone, as a world of one).
//
// Every rank runs every test in the same order, so the tests' collectives match. Rank 0 prints
// GoogleTest's usual output; the other ranks print only their failures, prefixed with their
// rank. Each rank exits with its own result, and mpirun fails when any rank does.
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <gtest/gtest.h>

#include "worker/parallel/mpi_session.h"

namespace {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}

  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.message());
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed()) {
      std::fprintf(stderr, "[rank %d] FAILED %s.%s\n", rank_, info.test_suite_name(),
                   info.name());
    }
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  auto session = bmad::parallel::MpiSession::Start(&argc, &argv);
  if (!session.ok()) {
    std::fprintf(stderr, "cannot start MPI: %s\n", session.status().ToString().c_str());
    return 1;
  }
  ::testing::InitGoogleTest(&argc, argv);
  const int rank = (*session)->world_rank();
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  const int result = RUN_ALL_TESTS();
  const bmad::Status finalized = (*session)->Finalize(std::chrono::seconds(30));
  if (!finalized.ok()) {
    // A rank never arrived: leave without MPI_Finalize rather than hang in it.
    std::fprintf(stderr, "[rank %d] %s\n", rank, finalized.ToString().c_str());
    std::fflush(nullptr);
    std::_Exit(result != 0 ? result : 1);
  }
  return result;
}
