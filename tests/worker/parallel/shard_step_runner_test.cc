// ShardStepRunner's start-up check of message sizes: a step whose pipeline hand-off or logits
// would not fit one MPI message (int counts) is refused when the replica starts, naming the
// setting to lower and its largest value, rather than failing each such step later.
#include "worker/parallel/shard_step_runner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kernels/cpu/cpu_backend.h"
#include "tests/support/paths.h"
#include "worker/model/llama/llama_model.h"

namespace bmad::parallel {
namespace {

using ::testing::HasSubstr;

// stories260K (n_embd 64, n_vocab 512) placed as one shard of `tp` × `pp`.
std::unique_ptr<model::LlamaModel> Shard(kernels::Backend& backend, int64_t tp, int64_t pp) {
  model::ModelPlacement placement;
  placement.tp = tp;
  placement.pp = pp;
  auto m = model::LlamaModel::Load(bmad::testing::SharedModelsDir() + "/stories260K.gguf", backend, placement);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(*m) : nullptr;
}

class ShardStepRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kernels::CpuBackendOptions options;
    options.threads = 1;
    auto b = kernels::CpuBackend::Create(options);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    backend_ = std::move(*b);
  }
  std::unique_ptr<kernels::Backend> backend_;
};

// The limit is 2^31 - 1 bytes: (2^31 - 1) / 4 / 64 = 8,388,607 hidden states of 64 floats,
// (2^31 - 1) / 4 / 512 = 1,048,575 rows of logits.
TEST_F(ShardStepRunnerTest, PipelineMessagesAboveMpisLimitAreRefused) {
  auto model = Shard(*backend_, 1, 2);
  ASSERT_NE(model, nullptr);
  ShardStepContext c;
  c.model = model.get();
  c.max_tokens = 8'388'607;
  c.max_logit_rows = 1'048'575;
  EXPECT_TRUE(ShardStepRunner::CheckMessageSizes(c).ok());

  c.max_tokens = 8'388'608;
  Status s = ShardStepRunner::CheckMessageSizes(c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("lower scheduler.max_batch_tokens to at most 8388607"));

  c.max_tokens = 8'388'607;
  c.max_logit_rows = 1'048'576;
  s = ShardStepRunner::CheckMessageSizes(c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("lower scheduler.max_seqs + scheduler.max_prompt_logprob_tokens to at most 1048575"));
}

// A tp rank gathers its vocabulary slice (512 / 2 = 256 wide) of every sampled row.
TEST_F(ShardStepRunnerTest, TensorParallelLogitSlicesAboveMpisLimitAreRefused) {
  auto model = Shard(*backend_, 2, 1);
  ASSERT_NE(model, nullptr);
  ShardStepContext c;
  c.model = model.get();
  c.max_tokens = 1024;
  c.max_logit_rows = 2'097'151;
  EXPECT_TRUE(ShardStepRunner::CheckMessageSizes(c).ok());
  c.max_logit_rows = 2'097'152;
  const Status s = ShardStepRunner::CheckMessageSizes(c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("a tp rank's slice of the logits"));
  EXPECT_THAT(s.message(), HasSubstr("at most 2097151"));
}

// A host all-reduce of a step's hidden states counts floats: (2^31 - 1) / 64 = 33,554,431 tokens.
// Over a device communicator (NCCL) there is no such limit.
TEST_F(ShardStepRunnerTest, TensorParallelAllReducesAboveMpisLimitAreRefused) {
  auto model = Shard(*backend_, 2, 1);
  ASSERT_NE(model, nullptr);
  ShardStepContext c;
  c.model = model.get();
  c.max_logit_rows = 1;
  c.max_tokens = 33'554'431;
  EXPECT_TRUE(ShardStepRunner::CheckMessageSizes(c).ok());
  c.max_tokens = 33'554'432;
  const Status s = ShardStepRunner::CheckMessageSizes(c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("a tensor-parallel all-reduce"));
  EXPECT_THAT(s.message(), HasSubstr("2147483647 elements"));
}

}  // namespace
}  // namespace bmad::parallel
