// The worker on a device backend, without a GPU: the model, the KV cache, the arena and the
// engine keep to the device memory contract of kernels/backend.h (host code never touches device
// memory; ops get device pointers), checked by tests/support/guarded_device_backend.h, whose
// device memory faults when the host touches it. The tokens must be the CPU backend's exactly.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "tests/support/guarded_device_backend.h"
#include "tests/support/paths.h"
#include "worker/memory/system_allocations.h"
#include "worker/server/replica.h"

namespace bmad::worker {
namespace {

constexpr size_t kFreeDeviceBytes = size_t{256} << 20;

ServerConfig Config() {
  ServerConfig c;
  c.model.path = testing::SharedModelsDir() + "/stories260K.gguf";
  c.worker.threads = 2;
  c.scheduler.max_batch_tokens = 64;
  c.scheduler.max_seqs = 8;
  c.cache.block_size = 16;
  c.cache.num_blocks = 64;
  return c;
}

engine::EngineRequest Greedy(uint64_t id, std::vector<int32_t> prompt, uint32_t max_tokens) {
  engine::EngineRequest r;
  r.id = id;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0;
  r.sampling.max_tokens = max_tokens;
  r.sampling.ignore_eos = true;
  return r;
}

// Steps the engine until its requests are done (at most 2000 steps); the generated ids of each.
std::map<uint64_t, std::vector<int32_t>> RunToEnd(Replica& r) {
  std::map<uint64_t, std::vector<int32_t>> out;
  std::vector<engine::RequestOutput> outputs;
  for (int step = 0; step < 2000 && r.engine().HasWork(); ++step) {
    outputs.clear();
    const Status s = r.engine().Step(&outputs);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) break;
    for (const engine::RequestOutput& o : outputs) {
      EXPECT_TRUE(o.error.empty()) << o.error;
      out[o.id].insert(out[o.id].end(), o.token_ids.begin(), o.token_ids.end());
    }
  }
  return out;
}

// Serves a few concurrent requests of different lengths (prefill chunks and decodes mixed in
// steps) to the end; the generated ids of each.
std::map<uint64_t, std::vector<int32_t>> Serve(Replica& r) {
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog",
                                            "Lily and Ben went to the park to play", "One day"};
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_TRUE(r.engine().Add(Greedy(i + 1, r.tokenizer().Encode(prompts[i]),
                                      12 + 6 * static_cast<uint32_t>(i))).ok());
  }
  return RunToEnd(r);
}

std::unique_ptr<Replica> Make(const ServerConfig& c, std::unique_ptr<kernels::Backend> backend) {
  Result<std::unique_ptr<Replica>> r =
      Replica::Create(c, nullptr, SystemClock::Instance(), {}, std::move(backend));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(*r) : nullptr;
}

// The same configuration served by a CPU replica and by one on the guarded device backend.
class HostAndDeviceReplicasTest : public ::testing::Test {
 protected:
  void Start(const ServerConfig& c) {
    host_ = Make(c, nullptr);
    auto guarded = std::make_unique<testing::GuardedDeviceBackend>(2, kFreeDeviceBytes);
    device_backend_ = guarded.get();
    device_ = Make(c, std::move(guarded));
    ASSERT_TRUE(host_ && device_);
  }
  Replica& host() { return *host_; }
  Replica& device() { return *device_; }
  testing::GuardedDeviceBackend& device_backend() { return *device_backend_; }

 private:
  std::unique_ptr<Replica> host_, device_;
  testing::GuardedDeviceBackend* device_backend_ = nullptr;
};

TEST(DeviceResidentTest, GuardFaultsOnHostAccessToDeviceMemory) {
  // What makes the other tests meaningful: touching device memory from the host dies.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  testing::GuardedDeviceBackend b(1, kFreeDeviceBytes);
  Result<void*> reserved = b.ReserveDeviceMemory(4096);
  ASSERT_TRUE(reserved.ok()) << reserved.status().ToString();
  auto* p = static_cast<volatile char*>(*reserved);
  char host[1] = {0};
  ASSERT_TRUE(b.CopyToDevice(*reserved, host, 1).ok());  // through the backend: fine
  EXPECT_DEATH(p[0] = 1, "");  // the only statement: a host write to device memory
  EXPECT_EQ(b.host_pointer_violations(), 0);
}

TEST_F(HostAndDeviceReplicasTest, ReplicaOnADeviceGivesTheHostReplicasTokens) {
  Start(Config());

  const auto expected = Serve(host());
  const auto got = Serve(device());
  ASSERT_EQ(expected.size(), 4u);
  for (const auto& [id, ids] : expected) {
    EXPECT_EQ(got.count(id) ? got.at(id) : std::vector<int32_t>{}, ids) << "request " << id;
  }
  EXPECT_GT(device_backend().ops(), 100);
  EXPECT_EQ(device_backend().host_pointer_violations(), 0);
  // It overlapped its steps, and its logits landed only when waited for (NaN before).
  EXPECT_TRUE(device().engine().overlaps_steps());
  EXPECT_FALSE(host().engine().overlaps_steps());
  EXPECT_GT(device().engine().step_timing().overlapped_steps, 0u);
  EXPECT_GT(device_backend().deferred_copies(), 0);
  // Every request is greedy: every token was picked on the device, only ids came back.
  EXPECT_EQ(device().engine().step_timing().device_sampled_steps, device().engine().step_timing().steps);
  EXPECT_EQ(host().engine().step_timing().device_sampled_steps, 0u);
  EXPECT_LE(device_backend().bytes_copied_to_host(), device().engine().step_timing().steps * 8 * sizeof(int32_t));

  // Steady state on the device: a second round allocates nothing.
  const uint64_t engine_before = device().engine().SystemAllocations();
  const uint64_t system_before = memory::SystemAllocations::Count();
  const auto again = Serve(device());
  EXPECT_EQ(again, expected);
  EXPECT_EQ(device().engine().SystemAllocations(), engine_before);
  EXPECT_EQ(memory::SystemAllocations::Count(), system_before);
  EXPECT_EQ(device().engine().kv().GetStats().used_blocks, 0);
}

// Sampled, greedy and logprobs requests mixed: steps with the logprobs request copy the logits
// out and sample on the host; the others draw on the device. Same tokens and logprobs as a host
// replica either way.
TEST_F(HostAndDeviceReplicasTest, MixedSamplingOnADeviceGivesTheHostReplicasOutputs) {
  Start(Config());
  auto serve = [](Replica& r) {
    std::vector<engine::EngineRequest> requests;
    requests.push_back(Greedy(1, r.tokenizer().Encode("Once upon a time"), 30));
    engine::EngineRequest sampled = Greedy(2, r.tokenizer().Encode("The little dog"), 6);
    sampled.sampling.temperature = 0.9f;
    sampled.sampling.seed = 11;
    sampled.sampling.has_seed = true;
    requests.push_back(std::move(sampled));
    engine::EngineRequest logprobs = Greedy(3, r.tokenizer().Encode("One day"), 4);
    logprobs.sampling.logprobs = true;
    requests.push_back(std::move(logprobs));
    for (engine::EngineRequest& q : requests) EXPECT_TRUE(r.engine().Add(std::move(q)).ok());
    std::map<uint64_t, std::pair<std::vector<int32_t>, std::vector<float>>> out;
    std::vector<engine::RequestOutput> outputs;
    for (int step = 0; step < 1000 && r.engine().HasWork(); ++step) {
      outputs.clear();
      EXPECT_TRUE(r.engine().Step(&outputs).ok());
      for (const engine::RequestOutput& o : outputs) {
        out[o.id].first.insert(out[o.id].first.end(), o.token_ids.begin(), o.token_ids.end());
        out[o.id].second.insert(out[o.id].second.end(), o.logprobs.begin(), o.logprobs.end());
      }
    }
    return out;
  };
  const auto expected = serve(host());
  const auto got = serve(device());
  ASSERT_EQ(expected.size(), 3u);
  EXPECT_EQ(got, expected);
  EXPECT_EQ(expected.at(3).second.size(), 4u);
  const engine::StepTiming& t = device().engine().step_timing();
  EXPECT_GT(t.device_sampled_steps, 0u);  // once the logprobs request is done
  EXPECT_LT(t.device_sampled_steps, t.steps);
}

// Requests that sample with temperature, top-k, top-p and min-p (no penalty, no logprobs), with
// one greedy among them, served until done; the generated ids of each.
std::map<uint64_t, std::vector<int32_t>> ServeSampled(Replica& r, uint32_t max_tokens) {
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog",
                                            "Lily and Ben went to the park to play", "One day",
                                            "She was"};
  for (size_t i = 0; i < prompts.size(); ++i) {
    engine::EngineRequest q = Greedy(i + 1, r.tokenizer().Encode(prompts[i]), max_tokens);
    q.sampling.seed = 100 + i;
    q.sampling.has_seed = true;
    switch (i) {
      case 0: q.sampling.temperature = 0.8f; q.sampling.top_k = 40; break;
      case 1: q.sampling.temperature = 1.2f; q.sampling.top_p = 0.9f; break;
      case 2: q.sampling.temperature = 0.7f; q.sampling.min_p = 0.1f; break;
      case 3: q.sampling.temperature = 1.0f; q.sampling.top_k = 10; q.sampling.top_p = 0.8f;
              q.sampling.min_p = 0.05f; break;
      default: break;  // greedy
    }
    EXPECT_TRUE(r.engine().Add(std::move(q)).ok());
  }
  return RunToEnd(r);
}

// Every step's tokens are drawn on the device (Backend::SampleRows with each request's own
// uniform): the same tokens as the host sampler's for the same seeds, and only ids come back.
TEST_F(HostAndDeviceReplicasTest, SampledRequestsAreDrawnOnTheDeviceWithTheHostsTokens) {
  Start(Config());
  const auto expected = ServeSampled(host(), 24);
  const auto got = ServeSampled(device(), 24);
  ASSERT_EQ(expected.size(), 5u);
  EXPECT_EQ(got, expected);
  const engine::StepTiming& t = device().engine().step_timing();
  EXPECT_EQ(t.device_sampled_steps, t.steps);
  EXPECT_LE(device_backend().bytes_copied_to_host(), t.steps * 8 * sizeof(int32_t));
  EXPECT_EQ(device_backend().host_pointer_violations(), 0);
  // Different seeds, different draws: the sampled requests did not all follow the greedy path.
  std::set<std::vector<int32_t>> distinct;
  for (const auto& [id, ids] : got) distinct.insert(ids);
  EXPECT_EQ(distinct.size(), got.size());
}

// Under KV pressure sequences are preempted (with overlap, while a step of theirs runs) and
// recomputed; the seeds still give the host replica's tokens.
TEST_F(HostAndDeviceReplicasTest, PreemptedSampledRequestsGiveTheHostsTokens) {
  ServerConfig c = Config();
  c.cache.num_blocks = 12;  // 11 usable blocks of 16 for five sequences of up to ~60 tokens
  Start(c);
  const auto expected = ServeSampled(host(), 48);
  const auto got = ServeSampled(device(), 48);
  ASSERT_EQ(expected.size(), 5u);
  EXPECT_EQ(got, expected);
  EXPECT_GT(device().engine().scheduler().stats().preemptions_total, 0u);
  EXPECT_EQ(device().engine().step_timing().device_sampled_steps,
            device().engine().step_timing().steps);
}

TEST(DeviceResidentTest, TheNextStepIsPlannedBeforeWaitingForThisOne) {
  auto guarded = std::make_unique<testing::GuardedDeviceBackend>(2, kFreeDeviceBytes);
  testing::GuardedDeviceBackend* b = guarded.get();
  std::unique_ptr<Replica> device = Make(Config(), std::move(guarded));
  ASSERT_TRUE(device);
  EXPECT_GT(b->pinned_bytes(), 0u);  // the logits buffer, so that its copy does not block
  // At every wait for the device: steps planned by the scheduler against steps finished.
  int waits = 0, waits_with_next_planned = 0;
  b->on_synchronize = [&] {
    const uint64_t planned = device->engine().scheduler().stats().steps_total;
    const uint64_t done = device->engine().step_timing().steps;
    ++waits;
    if (planned == done + 2) ++waits_with_next_planned;  // step n+1 planned, step n not done
  };
  Serve(*device);
  b->on_synchronize = nullptr;
  const engine::StepTiming& t = device->engine().step_timing();
  EXPECT_GT(t.steps, 10u);
  EXPECT_GT(t.overlapped_steps, t.steps / 2);
  // Every wait came after the next step's planning (which finds nothing to do at the very end).
  EXPECT_EQ(waits_with_next_planned, static_cast<int>(t.steps));
  EXPECT_GE(waits, static_cast<int>(t.steps));
  EXPECT_EQ(b->deferred_copies(), static_cast<int64_t>(t.steps));
}

TEST(DeviceResidentTest, AnErrorTheDeviceReportsAtTheWaitStopsTheReplica) {
  // Whatever its code: a device backend keeps its first error and reports it at every later
  // wait, so failing only the step's requests would fail every request from then on (and the
  // ids of requests the caller cancelled and reused while the step ran with them). The replica
  // stops instead; the coordinator moves its requests.
  auto guarded = std::make_unique<testing::GuardedDeviceBackend>(2, kFreeDeviceBytes);
  testing::GuardedDeviceBackend* b = guarded.get();
  std::unique_ptr<Replica> device = Make(Config(), std::move(guarded));
  ASSERT_TRUE(device);
  engine::Engine& e = device->engine();
  ASSERT_TRUE(e.Add(Greedy(5, device->tokenizer().Encode("Once upon a time"), 40)).ok());
  std::vector<engine::RequestOutput> outputs;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(e.Step(&outputs).ok());
  b->fail_next_synchronize = InvalidArgument("AttentionDecode takes one new token per sequence");
  outputs.clear();
  const Status stopped = e.Step(&outputs);
  EXPECT_EQ(stopped.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(stopped.message().find("executing step"), std::string::npos) << stopped.ToString();
  EXPECT_TRUE(outputs.empty());
}

TEST(DeviceResidentTest, DeviceArenaIsAShareOfFreeMemoryAndTheCacheTakesTheRest) {
  ServerConfig c = Config();
  c.cache.num_blocks = 0;  // sized from the arena
  c.worker.gpu_memory_fraction = 0.5;
  // Enough sequences that the cap (twice what max_seqs sequences of stories260K's 512-token
  // context need: 2 x 512 x 32 + 1 blocks) lies above what the arena holds.
  c.scheduler.max_seqs = 512;
  std::unique_ptr<Replica> r =
      Make(c, std::make_unique<testing::GuardedDeviceBackend>(1, kFreeDeviceBytes));
  ASSERT_TRUE(r);
  // What the replica sized before preparing its weights (after, their views have changed).
  testing::GuardedDeviceBackend b(1, kFreeDeviceBytes);
  std::unique_ptr<model::LlamaModel> unprepared =
      std::move(model::LlamaModel::Open(c.model.path, b)).value();
  const ReplicaMemorySizes others = SizeReplicaMemory(
      *unprepared, c.scheduler.max_batch_tokens, c.scheduler.max_logit_rows(), c.cache.block_size);
  const size_t arena = kFreeDeviceBytes / 2;
  EXPECT_EQ(r->num_blocks(), static_cast<int64_t>((arena - others.Total()) / others.kv_block_bytes));
  EXPECT_GT(r->num_blocks(), 1000);  // stories260K's blocks are small
  EXPECT_LT(r->num_blocks(), 2 * 512 * 32 + 1);

  // With 8 sequences the cap binds: 2 x 8 x 32 + 1 blocks, and the arena shrinks to what they
  // and the rest need (the device's other memory stays free).
  c.scheduler.max_seqs = 8;
  r = Make(c, std::make_unique<testing::GuardedDeviceBackend>(1, kFreeDeviceBytes));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->num_blocks(), 2 * 8 * 32 + 1);
  const ReplicaMemorySizes others8 = SizeReplicaMemory(
      *unprepared, c.scheduler.max_batch_tokens, c.scheduler.max_logit_rows(), c.cache.block_size);
  EXPECT_EQ(r->memory_capacity(), others8.Total() + (2 * 8 * 32 + 1) * others8.kv_block_bytes);

  // An explicit block count wins.
  c.cache.num_blocks = 10;
  r = Make(c, std::make_unique<testing::GuardedDeviceBackend>(1, kFreeDeviceBytes));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->num_blocks(), 10);
}

TEST(DeviceResidentTest, ADeviceArenaWithNoRoomForTheCacheNamesTheKnobs) {
  ServerConfig c = Config();
  c.cache.num_blocks = 0;
  c.worker.gpu_memory_fraction = 0.5;
  // 16 MiB free: 8 MiB of arena, less than the kernel scratch alone.
  Result<std::unique_ptr<Replica>> r =
      Replica::Create(c, nullptr, SystemClock::Instance(), {},
                      std::make_unique<testing::GuardedDeviceBackend>(1, size_t{16} << 20));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("gpu_memory_fraction"), std::string::npos)
      << r.status().message();
}

TEST(DeviceResidentTest, AStepThatOverflowsTheWorkspaceStaysInDeviceMemory) {
  // A workspace far too small for the step: the overflow must be device memory too (a host
  // chunk would fault in the guarded backend's ops, and count as a violation).
  const std::string path = testing::SharedModelsDir() + "/stories260K.gguf";
  kernels::CpuBackend cpu(kernels::CpuBackendOptions{1});
  std::unique_ptr<model::LlamaModel> host = std::move(model::LlamaModel::Load(path, cpu)).value();
  model::KvCache host_cache(host->CacheShape(8, 16));

  auto guarded = std::make_unique<testing::GuardedDeviceBackend>(1, kFreeDeviceBytes);
  testing::GuardedDeviceBackend& b = *guarded;
  std::unique_ptr<ReplicaMemory> memory;
  {
    std::unique_ptr<model::LlamaModel> m = std::move(model::LlamaModel::Open(path, b)).value();
    ReplicaMemorySizes sizes = SizeReplicaMemory(*m, 64, 4, 16);
    sizes.kv_blocks = 8;
    sizes.workspace_bytes = 4096;
    memory = std::move(ReplicaMemory::Create(sizes, 0, &b)).value();
    b.SetMemoryHooks(memory->BackendHooks());
    m->PrepareWeights();
    model::KvCache cache(m->CacheShape(8, 16), memory->KvMemory());
    const std::vector<int32_t> tokens = {1, 403, 407, 261, 378, 5, 17, 99};
    const std::vector<int32_t> table = {1, 2};
    const model::SequenceStep step{tokens, 0, table, true};
    const int64_t vocab = m->config().n_vocab;
    std::vector<float> want(static_cast<size_t>(vocab)), got(static_cast<size_t>(vocab));
    ASSERT_TRUE(host->Forward(std::span(&step, 1), host_cache, want.data()).ok());
    memory->workspace().Reset();
    const Status s = m->Forward(std::span(&step, 1), cache, got.data(), &memory->workspace());
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(got, want);
    EXPECT_GT(memory->workspace().overflow_count(), 0u);
    EXPECT_GT(b.overflow_chunks_live(), 0);
    memory->workspace().Reset();
    EXPECT_EQ(b.overflow_chunks_live(), 0);
    EXPECT_EQ(b.host_pointer_violations(), 0);
  }
  guarded.reset();  // the backend returns its scratch to the arena's allocator, still alive
}

TEST(DeviceResidentTest, ADeviceStepWithoutAWorkspaceIsRefused) {
  testing::GuardedDeviceBackend b(1, kFreeDeviceBytes);
  Result<std::unique_ptr<model::LlamaModel>> m =
      model::LlamaModel::Open(testing::SharedModelsDir() + "/stories260K.gguf", b);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  model::KvCache cache((*m)->CacheShape(4, 16));
  const std::vector<int32_t> tokens = {1, 2, 3};
  const std::vector<int32_t> table = {1};
  const model::SequenceStep step{tokens, 0, table, true};
  std::vector<float> logits(static_cast<size_t>((*m)->config().n_vocab));
  const Status s = (*m)->Forward(std::span(&step, 1), cache, logits.data());
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("workspace"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace bmad::worker
