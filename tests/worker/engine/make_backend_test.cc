// MakeBackend: the compute-thread count is checked before any thread starts, so a bad
// --threads or worker.threads is an error, not an abort.
#include <gtest/gtest.h>

#include "kernels/cpu/cpu_backend.h"
#include "worker/server/replica.h"

namespace bmad::worker {
namespace {

TEST(MakeBackendTest, ThreadCountsOutsideTheRangeAreRefused) {
  for (int64_t bad : {int64_t{-1}, kMaxComputeThreads + 1, int64_t{100000}}) {
    Result<std::unique_ptr<kernels::Backend>> b = MakeBackend(Backend::kCpu, bad);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(b.status().message().find("compute threads must be in [0, 1024]"), std::string::npos)
        << b.status().message();
  }
}

TEST(MakeBackendTest, MakesTheThreadsAskedFor) {
  Result<std::unique_ptr<kernels::Backend>> b = MakeBackend(Backend::kCpu, 2);
  ASSERT_TRUE(b.ok()) << b.status().message();
  auto* cpu = dynamic_cast<kernels::CpuBackend*>(b->get());
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->threads(), 2);
}

}  // namespace
}  // namespace bmad::worker
