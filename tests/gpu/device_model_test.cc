// DeviceModel (the worker's model as the GPU parity checks and benchmarks run it) on a device
// backend simulated on the CPU (tests/support/guarded_device_backend.h: device memory the host
// cannot touch) must compute exactly what LlamaModel computes on the CPU backend over host
// memory: the same ops in the same order on the same kernels, so the logits are equal bit for
// bit. This pins the harness and the device memory path down in CI, so a mismatch on the GPU
// points at the CUDA backend.
#include "tests/gpu/device_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "kernels/cpu/cpu_backend.h"
#include "tests/support/guarded_device_backend.h"
#include "tests/support/paths.h"

namespace bmad::gpu_tests {
namespace {

struct Seq {
  std::vector<int32_t> tokens;  // prompt, then generated
  std::vector<int32_t> table;
  int32_t done = 0;  // positions computed
};

void CheckSameLogits(const std::string& file) {
  SCOPED_TRACE(file);
  const std::string path = testing::SharedModelsDir() + "/" + file;
  kernels::CpuBackend ref_backend(kernels::CpuBackendOptions{2});
  Result<std::unique_ptr<model::LlamaModel>> ref = model::LlamaModel::Load(path, ref_backend);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  auto guarded = std::make_unique<testing::GuardedDeviceBackend>(2, size_t{256} << 20);
  testing::GuardedDeviceBackend* device = guarded.get();
  DeviceModelOptions o;
  o.max_tokens = 64;
  o.max_seqs = 16;  // rows of logits: sequence 0's whole first chunk below
  o.num_blocks = 16;
  o.block_size = 4;
  Result<std::unique_ptr<DeviceModel>> dev = DeviceModel::Load(path, std::move(guarded), o);
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  const int64_t vocab = (*dev)->config().n_vocab;
  model::KvCache cache((*ref)->CacheShape(o.num_blocks, o.block_size));

  // Two sequences with ragged prompts; sequence 1's prompt arrives in two chunks; then both decode.
  // Sequence 0's prompt is scored: its first chunk returns a row of logits per token (the
  // device copies them all out), the last of which it samples from.
  std::vector<Seq> seqs(2);
  seqs[0].tokens = {1, 403, 407, 261, 378, 5, 17, 99, 3};
  seqs[1].tokens = {1, 42, 7, 300, 11, 12, 13};
  seqs[0].table = {3, 9, 1, 14, 5, 6};
  seqs[1].table = {2, 11, 4, 8, 7, 10};
  std::vector<std::vector<int64_t>> chunks = {{9, 3}, {0, 4}};  // step 0, step 1 new tokens
  for (int step = 0; step < 8; ++step) {
    std::vector<model::SequenceStep> steps;
    for (size_t s = 0; s < seqs.size(); ++s) {
      Seq& q = seqs[s];
      const int64_t take = step < 2 ? chunks[static_cast<size_t>(step)][s] : 1;
      if (take == 0) continue;
      const bool samples = q.done + take == static_cast<int64_t>(q.tokens.size());
      const int32_t rows = step == 0 && s == 0 ? static_cast<int32_t>(take) : (samples ? 1 : 0);
      steps.push_back({std::span<const int32_t>(q.tokens).subspan(static_cast<size_t>(q.done),
                                                                  static_cast<size_t>(take)),
                       q.done, q.table, rows});
    }
    int64_t want_rows = 0;
    for (const model::SequenceStep& s : steps) want_rows += s.logit_rows;
    std::vector<float> want(static_cast<size_t>(std::max<int64_t>(want_rows, 1) * vocab));
    ASSERT_TRUE((*ref)->Forward(steps, cache, want.data()).ok());
    Result<std::span<const float>> got = (*dev)->Forward(steps);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(static_cast<int64_t>(got->size()), want_rows * vocab);
    want.resize(got->size());
    ASSERT_EQ(std::vector<float>(got->begin(), got->end()), want) << "step " << step;
    const std::vector<int32_t> next = (*dev)->Greedy();
    // Advance: computed positions, and the greedy token for sequences that sampled.
    size_t row = 0, step_index = 0;
    for (size_t s = 0; s < seqs.size(); ++s) {
      const int64_t take = step < 2 ? chunks[static_cast<size_t>(step)][s] : 1;
      if (take == 0) continue;
      row += static_cast<size_t>(steps[step_index++].logit_rows);
      seqs[s].done += static_cast<int32_t>(take);
      if (seqs[s].done == static_cast<int32_t>(seqs[s].tokens.size())) {
        const size_t sampled = row - 1;  // its last row
        const float* lr = want.data() + sampled * static_cast<size_t>(vocab);
        EXPECT_EQ(next[sampled], std::max_element(lr, lr + vocab) - lr);
        seqs[s].tokens.push_back(next[sampled]);
      }
    }
  }
  EXPECT_GT(device->ops(), 0);
  EXPECT_EQ(device->host_pointer_violations(), 0);
}

TEST(DeviceModel, MatchesLlamaModelOnTheCpuOnStories260K) { CheckSameLogits("stories260K.gguf"); }

TEST(DeviceModel, MatchesLlamaModelOnTheCpuOnTinyRandomF16) {
  CheckSameLogits("llama-2-tiny-random.gguf");
}

}  // namespace
}  // namespace bmad::gpu_tests
