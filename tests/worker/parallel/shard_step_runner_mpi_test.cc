// ShardStepRunner under a real mpirun with two pipeline stages (one rank each) on stories260K:
// a malformed step is refused by both stages before either waits on the other, and the replica
// goes on to run the next step. (Stage 0 used to refuse it inside its forward pass while stage
// 1 waited for its activations, took the next step's instead, and both then timed out.)
#include "worker/parallel/shard_step_runner.h"

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kernels/cpu/cpu_backend.h"
#include "tests/support/paths.h"
#include "worker/model/kv_cache.h"
#include "worker/model/llama/llama_model.h"
#include "worker/parallel/mpi_communicator.h"

namespace bmad::parallel {
namespace {

using ::testing::HasSubstr;

TEST(ShardStepRunnerMpiTest, AMalformedStepIsRefusedByEveryStageAndTheNextOneRuns) {
  auto world = MpiCommunicator::World(std::chrono::milliseconds(10'000));
  ASSERT_TRUE(world.ok()) << world.status().ToString();
  ASSERT_EQ((*world)->size(), 2) << "run under mpirun -np 2";
  const int rank = (*world)->rank();

  kernels::CpuBackendOptions options;
  options.threads = 1;
  auto backend = kernels::CpuBackend::Create(options);
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  model::ModelPlacement placement;
  placement.pp = 2;
  placement.stage = rank;
  auto model = model::LlamaModel::Load(bmad::testing::SharedModelsDir() + "/stories260K.gguf",
                                       **backend, placement);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  (*model)->PrepareWeights();
  model::KvCache cache((*model)->CacheShape(16, 16));

  ShardStepContext context;
  context.model = model->get();
  context.cache = &cache;
  context.pp = world->get();
  context.max_tokens = 64;
  context.max_logit_rows = 4;
  ShardStepRunner runner(context);

  const int32_t vocab = static_cast<int32_t>((*model)->config().n_vocab);
  const std::vector<int32_t> table = {1};
  std::vector<float> logits(static_cast<size_t>(vocab));
  float* out = rank == 0 ? logits.data() : nullptr;

  const std::vector<int32_t> bad = {1, 2, vocab};  // the last id is outside the vocabulary
  const model::SequenceStep malformed{bad, 0, table, true};
  const Status refused = runner.Run(std::span(&malformed, 1), out);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << refused.ToString();
  EXPECT_THAT(refused.message(), HasSubstr("outside the vocabulary"));

  const std::vector<int32_t> good = {1, 2, 3};
  const model::SequenceStep valid{good, 0, table, true};
  const auto start = std::chrono::steady_clock::now();
  const Status ran = runner.Run(std::span(&valid, 1), out);
  EXPECT_TRUE(ran.ok()) << "rank " << rank << ": " << ran.ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  if (rank == 0 && ran.ok()) {
    bool finite = true;
    for (float x : logits) finite = finite && std::isfinite(x);
    EXPECT_TRUE(finite);
  }
}

}  // namespace
}  // namespace bmad::parallel
