// The engine on a real model: concurrent requests each get exactly what they get alone, bad
// requests are refused with a reason, cancel frees KV blocks, overlapped steps give the same
// outputs, the context is cut to what the cache holds, and in steady state the engine makes no
// system allocations (its memory comes from the replica's arena). What the sampler and the
// output processor make of a request is in engine_output_test.cc.
#include "worker/engine/engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>

#include "common/metrics/registry.h"
#include "tests/worker/engine/engine_fixture.h"
#include "worker/memory/system_allocations.h"

namespace bmad::engine {
namespace {

TEST(EngineTest, ConcurrentRequestsEachGetTheirSoloOutput) {
  Fixture f;
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog",
                                            "Lily and Ben went to the park", "One day"};
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_TRUE(f.engine->Add(Greedy(i + 1, f.tok->Encode(prompts[i]), 20 + 5 * static_cast<uint32_t>(i))).ok());
  }
  auto results = f.RunAll();
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(results[i + 1].first, LocalText(prompts[i], 20 + 5 * static_cast<uint32_t>(i))) << prompts[i];
  }
  EXPECT_EQ(f.engine->kv().GetStats().used_blocks, 0);
}

TEST(EngineTest, SteadyStateMakesNoSystemAllocations) {
  Fixture f;
  auto workload = [&] {
    for (uint64_t id = 1; id <= 6; ++id) {
      std::vector<int32_t> prompt = f.tok->Encode("Once upon a time there was a little " + std::to_string(id));
      prompt.resize(std::min<size_t>(prompt.size(), 4 + id * 3), 1);
      EngineRequest r = Greedy(id, prompt, static_cast<uint32_t>(8 + 4 * id));
      r.sampling.ignore_eos = true;
      ASSERT_TRUE(f.engine->Add(std::move(r)).ok());
    }
    f.RunAll();
  };
  workload();  // warm-up: scratch buffers and workspace reach their sizes
  const uint64_t engine_before = f.engine->SystemAllocations();
  const uint64_t memory_before = memory::SystemAllocations::Count();
  for (int round = 0; round < 3; ++round) workload();
  EXPECT_EQ(f.engine->SystemAllocations(), engine_before);
  EXPECT_EQ(memory::SystemAllocations::Count(), memory_before);
  EXPECT_EQ(f.memory->workspace().overflow_count(), 0u);
}

TEST(EngineTest, StepTimingSplitsTheForwardPassFromTheHostStages) {
  Fixture f;
  EXPECT_EQ(f.engine->step_timing().steps, 0u);
  EngineRequest r = Greedy(1, f.tok->Encode("Once upon a time"), 6);
  r.sampling.ignore_eos = true;
  ASSERT_TRUE(f.engine->Add(std::move(r)).ok());
  const auto results = f.RunAll();
  const StepTiming& t = f.engine->step_timing();
  // The prompt in one step (it samples the first token), then one step per further token.
  EXPECT_EQ(t.steps, 6u);
  EXPECT_GT(t.execute_nanos, 0);
  EXPECT_GT(t.host_nanos(), 0);  // sampling at least
  EXPECT_GE(t.total_nanos, t.execute_nanos + t.plan_nanos);
  EXPECT_GT(t.plan_nanos, 0);
  EXPECT_EQ(results.at(1).second.size(), 6u);
  // Idle calls plan nothing and count nothing.
  const StepTiming before = t;
  std::vector<RequestOutput> outputs;
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(f.engine->Step(&outputs).ok());
  EXPECT_EQ(t.plan_nanos, before.plan_nanos);
  EXPECT_EQ(t.total_nanos, before.total_nanos);
  EXPECT_TRUE(outputs.empty());
}

TEST(EngineTest, BadRequestsAreRefusedWithAReason) {
  Fixture f;
  EXPECT_EQ(f.engine->Add(Greedy(1, {}, 4)).code(), StatusCode::kInvalidArgument);
  Status s = f.engine->Add(Greedy(2, {1, 600}, 4));
  EXPECT_NE(s.message().find("token id 600"), std::string::npos) << s.message();
  s = f.engine->Add(Greedy(3, std::vector<int32_t>(512, 5), 4));
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EngineRequest hot = Greedy(4, {1, 2}, 4);
  hot.sampling.temperature = -1;
  s = f.engine->Add(hot);
  EXPECT_NE(s.message().find("temperature"), std::string::npos) << s.message();
  ASSERT_TRUE(f.engine->Add(Greedy(5, {1, 2}, 4)).ok());
  EXPECT_EQ(f.engine->Add(Greedy(5, {1, 2}, 4)).code(), StatusCode::kInvalidArgument);
  f.engine->StartDraining();
  EXPECT_EQ(f.engine->Add(Greedy(6, {1, 2}, 4)).code(), StatusCode::kFailedPrecondition);
  // The coordinator gives back a request the draining replica runs: the new copy takes the old
  // one's place instead of being refused (and the old one's work lost).
  ASSERT_TRUE(f.engine->Cancel(5, nullptr));
  EngineRequest back = Greedy(5, {1, 2}, 4);
  back.replaces_copy = true;
  EXPECT_TRUE(f.engine->Add(back).ok());
}

TEST(EngineTest, CancelFreesBlocksAndEndsTheStream) {
  Fixture f;
  EngineRequest r = Greedy(1, {1}, 300);
  r.sampling.ignore_eos = true;
  ASSERT_TRUE(f.engine->Add(std::move(r)).ok());
  std::vector<RequestOutput> outputs;
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(f.engine->Step(&outputs).ok());
  EXPECT_GT(f.engine->kv().GetStats().used_blocks, 1);
  RequestOutput last;
  ASSERT_TRUE(f.engine->Cancel(1, &last));
  EXPECT_EQ(last.reason, proto::FinishReason::kCancelled);
  EXPECT_EQ(last.usage.completion_tokens, 40u);
  EXPECT_EQ(f.engine->kv().GetStats().used_blocks, 0);
  EXPECT_FALSE(f.engine->HasWork());
  EXPECT_FALSE(f.engine->Cancel(1, &last));
}

TEST(EngineTest, AReplacedCopyIsDroppedWithoutCountingAFinish) {
  // The coordinator gave the request back (it took this replica for dead): the copy running here
  // goes, and the replacement's end is the request's one finish. The copy used to count as a
  // cancelled request besides.
  metrics::Registry registry;
  EngineMetrics metrics(registry, "r0", 16, 64);
  Fixture f(64, 64, StepOverlap::kAuto, SystemClock::Instance(), &metrics);
  EngineRequest r = Greedy(1, {1}, 300);
  r.sampling.ignore_eos = true;
  ASSERT_TRUE(f.engine->Add(std::move(r)).ok());
  std::vector<RequestOutput> outputs;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(f.engine->Step(&outputs).ok());
  ASSERT_GT(f.engine->kv().GetStats().used_blocks, 0);
  outputs.clear();
  ASSERT_TRUE(f.engine->DropReplaced(1));
  EXPECT_EQ(f.engine->kv().GetStats().used_blocks, 0);
  EXPECT_FALSE(f.engine->HasWork());
  EXPECT_FALSE(f.engine->DropReplaced(1));
  EngineRequest back = Greedy(1, {1}, 4);
  back.replaces_copy = true;
  ASSERT_TRUE(f.engine->Add(std::move(back)).ok());
  for (int i = 0; i < 20 && f.engine->HasWork(); ++i) ASSERT_TRUE(f.engine->Step(&outputs).ok());
  ASSERT_FALSE(outputs.empty());
  EXPECT_EQ(outputs.back().reason, proto::FinishReason::kLength);
  for (const RequestOutput& o : outputs) EXPECT_NE(o.reason, proto::FinishReason::kCancelled);
  std::string text = registry.RenderText();
  EXPECT_NE(text.find("bmad_worker_requests_finished_total{reason=\"cancelled\",replica=\"r0\"} 0\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("bmad_worker_requests_finished_total{reason=\"length\",replica=\"r0\"} 1\n"),
            std::string::npos)
      << text;
  // One request: admitted, queued and given its first token once (the replacement continued it).
  EXPECT_NE(text.find("bmad_worker_time_to_first_token_seconds_count{replica=\"r0\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("bmad_worker_queue_wait_seconds_count{replica=\"r0\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("bmad_worker_prompt_tokens_total{replica=\"r0\"} 1\n"), std::string::npos) << text;
  // A replacement cancelled before it was added ends as a cancelled request, counted once.
  EngineRequest unadded = Greedy(2, {1, 2, 3}, 8);
  unadded.generated = {4, 5};
  unadded.received_ns = SystemClock::Instance().NowNanos() - 2'000'000'000;  // taken 2 s ago
  const RequestOutput last = f.engine->CancelUnadded(unadded);
  EXPECT_EQ(last.id, 2u);
  EXPECT_TRUE(last.finished);
  EXPECT_EQ(last.reason, proto::FinishReason::kCancelled);
  EXPECT_EQ(last.token_offset, 2);
  EXPECT_EQ(last.usage.prompt_tokens, 3u);
  EXPECT_EQ(last.usage.completion_tokens, 2u);
  text = registry.RenderText();
  EXPECT_NE(text.find("bmad_worker_requests_finished_total{reason=\"cancelled\",replica=\"r0\"} 1\n"),
            std::string::npos)
      << text;
  // Its end-to-end latency counts from when it was taken (2 s ago), not from its end (0 s).
  EXPECT_NE(text.find("bmad_worker_e2e_request_latency_seconds_count{replica=\"r0\"} 2\n"), std::string::npos) << text;
  const std::string sum_key = "bmad_worker_e2e_request_latency_seconds_sum{replica=\"r0\"} ";
  ASSERT_NE(text.find(sum_key), std::string::npos) << text;
  EXPECT_GE(std::stod(text.substr(text.find(sum_key) + sum_key.size())), 2.0) << text;
}

// A copy replaced before it was ever admitted counted nothing: its replacement is counted once.
TEST(EngineTest, AReplacementOfACopyNeverAdmittedIsCountedOnce) {
  metrics::Registry registry;
  EngineMetrics metrics(registry, "r0", 16, 64);
  Fixture f(64, 64, StepOverlap::kAuto, SystemClock::Instance(), &metrics);
  ASSERT_TRUE(f.engine->Add(Greedy(3, {1, 2}, 3)).ok());
  ASSERT_TRUE(f.engine->DropReplaced(3));  // before any step
  EngineRequest back = Greedy(3, {1, 2}, 3);
  back.replaces_copy = true;
  ASSERT_TRUE(f.engine->Add(std::move(back)).ok());
  std::vector<RequestOutput> outputs;
  for (int i = 0; i < 20 && f.engine->HasWork(); ++i) ASSERT_TRUE(f.engine->Step(&outputs).ok());
  const std::string text = registry.RenderText();
  EXPECT_NE(text.find("bmad_worker_time_to_first_token_seconds_count{replica=\"r0\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("bmad_worker_queue_wait_seconds_count{replica=\"r0\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("bmad_worker_prompt_tokens_total{replica=\"r0\"} 2\n"), std::string::npos) << text;
}

// A request migrated here with tokens streamed elsewhere: its first token here is not its first
// token, and its prompt was counted where it was admitted first.
TEST(EngineTest, AMigratedRequestCountsNoSecondFirstTokenNorPrompt) {
  metrics::Registry registry;
  EngineMetrics metrics(registry, "r0", 16, 64);
  Fixture f(64, 64, StepOverlap::kAuto, SystemClock::Instance(), &metrics);
  EngineRequest r = Greedy(7, {1, 2, 3}, 6);
  r.generated = {4, 5};
  ASSERT_TRUE(f.engine->Add(std::move(r)).ok());
  std::vector<RequestOutput> outputs;
  for (int i = 0; i < 20 && f.engine->HasWork(); ++i) ASSERT_TRUE(f.engine->Step(&outputs).ok());
  ASSERT_FALSE(outputs.empty());
  EXPECT_TRUE(outputs.back().finished);
  const std::string text = registry.RenderText();
  EXPECT_NE(text.find("bmad_worker_time_to_first_token_seconds_count{replica=\"r0\"} 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("bmad_worker_prompt_tokens_total{replica=\"r0\"} 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("bmad_worker_generation_tokens_total{replica=\"r0\"} 4\n"), std::string::npos) << text;
}

// A clock that moves on by `tick` at every reading: steps take time without a real model
// being slow, and idle time is added by hand.
class TickingClock final : public Clock {
 public:
  explicit TickingClock(int64_t tick_ns) : tick_ns_(tick_ns) {}
  int64_t NowNanos() const override { return now_.fetch_add(tick_ns_) + tick_ns_; }
  void Advance(int64_t ns) { now_.fetch_add(ns); }

 private:
  const int64_t tick_ns_;
  mutable std::atomic<int64_t> now_{1'000'000'000};
};

TEST(EngineTest, AnIdleEnginesUtilizationFalls) {
  // The heartbeat's utilization weighs routing. It used to keep the last busy second's figure
  // for as long as the engine stayed idle, since only a step closed the one-second window.
  TickingClock clock(10'000'000);
  Fixture f(64, 64, StepOverlap::kAuto, clock);
  EngineRequest r = Greedy(1, {1}, 300);
  r.sampling.ignore_eos = true;
  ASSERT_TRUE(f.engine->Add(std::move(r)).ok());
  std::vector<RequestOutput> outputs;
  for (int i = 0; i < 200 && f.engine->HasWork(); ++i) ASSERT_TRUE(f.engine->Step(&outputs).ok());
  const float busy = f.engine->Load().utilization;
  EXPECT_GT(busy, 0.5f);
  RequestOutput last;
  ASSERT_TRUE(f.engine->Cancel(1, &last));
  // Within the idle engine's first second the last busy window's figure stands; after a
  // second with nothing computed it is 0 (it fell as 1/t before: 0.016 after a minute, which
  // skewed the weighted router between idle replicas).
  EXPECT_GT(f.engine->Load().utilization, 0.0f);
  clock.Advance(int64_t{1'100'000'000});
  EXPECT_EQ(f.engine->Load().utilization, 0.0f) << "busy: " << busy;
  clock.Advance(int64_t{20'000'000'000});  // 20 s with nothing to do: no step, no Add
  EXPECT_EQ(f.engine->Load().utilization, 0.0f) << "busy: " << busy;
}

TEST(EngineTest, GaugesDescribeTheEmptyCacheBeforeTheFirstRequest) {
  metrics::Registry registry;
  EngineMetrics metrics(registry, "r0", 16, 64);
  Fixture f(64, 64, StepOverlap::kAuto, SystemClock::Instance(), &metrics);
  const std::string text = registry.RenderText();
  // 64 blocks, block 0 reserved: 63 free, not 0 (a full cache to an autoscaler).
  EXPECT_NE(text.find("bmad_worker_kv_free_blocks{replica=\"r0\"} 63\n"), std::string::npos) << text;
  EXPECT_NE(text.find("vllm:num_requests_waiting{replica=\"r0\"} 0\n"), std::string::npos) << text;
}

// One prompt twice at once (the n choices of one request): the second waits a step and reuses
// the first's full blocks, and both get the solo output.
TEST(EngineTest, OnePromptTwiceAtOnceIsComputedOnce) {
  metrics::Registry registry;
  EngineMetrics metrics(registry, "r0", 16, 64);
  Fixture f(64, 64, StepOverlap::kAuto, SystemClock::Instance(), &metrics);
  const std::string prompt = "Once upon a time there was a little girl named Lily who loved to play";
  std::vector<int32_t> ids = f.tok->Encode(prompt);
  ASSERT_GT(ids.size(), 16u);
  const int64_t shared = static_cast<int64_t>((ids.size() - 1) / 16 * 16);  // full blocks before the last token
  ASSERT_TRUE(f.engine->Add(Greedy(1, ids, 12)).ok());
  ASSERT_TRUE(f.engine->Add(Greedy(2, ids, 12)).ok());
  auto results = f.RunAll();
  const std::string solo = LocalText(prompt, 12);
  EXPECT_EQ(results[1].first, solo);
  EXPECT_EQ(results[2].first, solo);
  const std::string text = registry.RenderText();
  EXPECT_NE(text.find("bmad_worker_shared_prefix_waits_total{replica=\"r0\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("bmad_worker_prefix_cache_hits_total{replica=\"r0\"} " + std::to_string(shared) + "\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(f.engine->kv().GetStats().used_blocks, 0);
}

// What a request streamed, all of it.
struct Transcript {
  std::string text;
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  proto::FinishReason reason = proto::FinishReason::kNone;
  proto::Usage usage;
  int outputs_after_finish = 0;
  bool operator==(const Transcript&) const = default;
};

void Record(const std::vector<RequestOutput>& outputs, std::map<uint64_t, Transcript>* out) {
  for (const RequestOutput& o : outputs) {
    Transcript& t = (*out)[o.id];
    if (t.reason != proto::FinishReason::kNone) ++t.outputs_after_finish;
    t.text += o.text;
    t.ids.insert(t.ids.end(), o.token_ids.begin(), o.token_ids.end());
    t.logprobs.insert(t.logprobs.end(), o.logprobs.begin(), o.logprobs.end());
    if (o.finished) {
      t.reason = o.reason;
      t.usage = o.usage;
    }
  }
}

// A mixed workload: greedy and seeded sampling, logprobs, penalties, a stop string, a stop
// token, max_tokens 1, prompts longer than the step budget (chunked), and requests that arrive
// while others run. Returns every request's transcript.
std::map<uint64_t, Transcript> RunMixed(Fixture& f) {
  auto text = [&](const std::string& t) { return f.tok->Encode(t); };
  std::string long_prompt;
  for (int i = 0; i < 12; ++i) long_prompt += "Once upon a time there was a little girl named Lily. ";
  std::vector<EngineRequest> first, later;
  first.push_back(Greedy(1, text("Once upon a time"), 40));
  EngineRequest sampled = Greedy(2, text(long_prompt), 30);
  sampled.sampling.temperature = 0.8f;
  sampled.sampling.top_k = 40;
  sampled.sampling.top_p = 0.9f;
  sampled.sampling.seed = 7;
  sampled.sampling.has_seed = true;
  sampled.sampling.logprobs = true;
  first.push_back(std::move(sampled));
  EngineRequest stop = Greedy(3, text("The little dog"), 60);
  stop.sampling.stop_strings = {" box"};
  first.push_back(std::move(stop));
  EngineRequest penalized = Greedy(4, text("Lily and Ben went to the park"), 25);
  penalized.sampling.temperature = 1.0f;
  penalized.sampling.repetition_penalty = 1.3f;
  penalized.sampling.frequency_penalty = 0.5f;
  penalized.sampling.seed = 3;
  penalized.sampling.has_seed = true;
  later.push_back(std::move(penalized));
  later.push_back(Greedy(5, text("One day"), 1));
  EngineRequest stop_token = Greedy(6, text("Once upon a time"), 40);
  stop_token.sampling.stop_token_ids = {static_cast<uint32_t>(text(" was").back())};
  later.push_back(std::move(stop_token));

  std::map<uint64_t, Transcript> out;
  std::vector<RequestOutput> outputs;
  for (EngineRequest& r : first) EXPECT_TRUE(f.engine->Add(std::move(r)).ok());
  for (int i = 0; i < 3; ++i) {
    outputs.clear();
    EXPECT_TRUE(f.engine->Step(&outputs).ok());
    Record(outputs, &out);
  }
  for (EngineRequest& r : later) EXPECT_TRUE(f.engine->Add(std::move(r)).ok());
  for (int i = 0; i < 2000 && f.engine->HasWork(); ++i) {
    outputs.clear();
    EXPECT_TRUE(f.engine->Step(&outputs).ok());
    Record(outputs, &out);
  }
  EXPECT_FALSE(f.engine->HasWork());
  EXPECT_EQ(f.engine->kv().GetStats().used_blocks, 0);
  return out;
}

TEST(EngineTest, OverlappedStepsGiveTheSameOutputsAsStepsInOrder) {
  Fixture in_order(64, 64, StepOverlap::kOff);
  Fixture overlapped(64, 64, StepOverlap::kOn);
  EXPECT_FALSE(in_order.engine->overlaps_steps());
  EXPECT_TRUE(overlapped.engine->overlaps_steps());
  const auto expected = RunMixed(in_order);
  const auto got = RunMixed(overlapped);
  ASSERT_EQ(expected.size(), 6u);
  for (const auto& [id, t] : expected) {
    EXPECT_NE(t.reason, proto::FinishReason::kNone) << "request " << id;
    EXPECT_EQ(t.outputs_after_finish, 0) << "request " << id;
    ASSERT_TRUE(got.count(id)) << "request " << id;
    EXPECT_EQ(got.at(id), t) << "request " << id << ": '" << got.at(id).text << "' against '" << t.text << "'";
  }
  EXPECT_EQ(expected.at(3).reason, proto::FinishReason::kStop);  // the stop string was hit
  EXPECT_EQ(expected.at(6).reason, proto::FinishReason::kStop);  // the stop token was hit
  EXPECT_EQ(expected.at(2).logprobs.size(), expected.at(2).ids.size());
  EXPECT_EQ(expected.at(5).ids.size(), 1u);
  EXPECT_EQ(in_order.engine->step_timing().overlapped_steps, 0u);
  const StepTiming& t = overlapped.engine->step_timing();
  // Every step but the last ones (nothing left to plan) had its successor planned while it ran.
  EXPECT_GT(t.overlapped_steps, t.steps / 2);
  EXPECT_EQ(t.steps, in_order.engine->step_timing().steps);
}

// A sequence longer than the whole KV cache could never run (it would preempt itself forever):
// the context is cut to what the cache holds, prompts beyond it are refused with the reason, and
// generation stops there with finish reason length.
TEST(EngineTest, TheContextIsCutToWhatTheKvCacheHolds) {
  Fixture f(5, 64);  // 4 usable blocks of 16 tokens; the model's context is 512
  EXPECT_EQ(f.engine->context_length(), 64);
  Status refused = f.engine->Add(Greedy(1, std::vector<int32_t>(64, 5), 4));
  EXPECT_EQ(refused.code(), StatusCode::kOutOfRange);
  EXPECT_NE(refused.message().find("all the KV cache holds (4 blocks of 16 tokens)"), std::string::npos)
      << refused.message();
  EngineRequest r = Greedy(2, f.tok->Encode("Once upon a time"), 500);
  r.sampling.ignore_eos = true;
  const auto prompt_len = static_cast<uint32_t>(r.prompt.size());
  ASSERT_TRUE(f.engine->Add(std::move(r)).ok());
  uint32_t generated = 0;
  proto::FinishReason reason = proto::FinishReason::kNone;
  std::vector<RequestOutput> outputs;
  for (int i = 0; i < 200 && f.engine->HasWork(); ++i) {
    outputs.clear();
    ASSERT_TRUE(f.engine->Step(&outputs).ok());
    for (const RequestOutput& o : outputs) {
      generated += static_cast<uint32_t>(o.token_ids.size());
      if (o.finished) reason = o.reason;
    }
  }
  EXPECT_FALSE(f.engine->HasWork());
  EXPECT_EQ(reason, proto::FinishReason::kLength);
  EXPECT_EQ(generated, 64 - prompt_len);
  EXPECT_EQ(f.engine->scheduler().stats().preemptions_total, 0u);
}

TEST(EngineTest, OverlappedStepsUnderKvPressurePreemptAndGiveTheSameTokens) {
  // 9 usable blocks of 16 tokens for four 70-token sequences: decodes preempt.
  auto run = [](StepOverlap overlap, uint64_t* preemptions) {
    Fixture f(10, 64, overlap);
    const std::vector<std::string> prompts = {"Once upon a time", "The little dog",
                                              "Lily and Ben went to the park", "One day"};
    for (size_t i = 0; i < prompts.size(); ++i) {
      EngineRequest r = Greedy(i + 1, f.tok->Encode(prompts[i]), 60);
      r.sampling.ignore_eos = true;
      EXPECT_TRUE(f.engine->Add(std::move(r)).ok());
    }
    auto out = f.RunAll();
    *preemptions = f.engine->scheduler().stats().preemptions_total;
    EXPECT_EQ(f.engine->kv().GetStats().used_blocks, 0);
    return out;
  };
  uint64_t preempted_in_order = 0, preempted_overlapped = 0;
  const auto expected = run(StepOverlap::kOff, &preempted_in_order);
  const auto got = run(StepOverlap::kOn, &preempted_overlapped);
  EXPECT_GT(preempted_in_order, 0u);
  EXPECT_GT(preempted_overlapped, 0u);
  EXPECT_EQ(got, expected);
  for (const auto& [id, r] : got) EXPECT_EQ(r.second.size(), 60u) << "request " << id;
}

TEST(EngineTest, CancelWhileItsStepRunsDropsItsResult) {
  Fixture f(64, 64, StepOverlap::kOn);
  EngineRequest endless = Greedy(1, f.tok->Encode("Once upon a time"), 300);
  endless.sampling.ignore_eos = true;
  ASSERT_TRUE(f.engine->Add(std::move(endless)).ok());
  ASSERT_TRUE(f.engine->Add(Greedy(2, f.tok->Encode("The little dog"), 20)).ok());
  std::vector<RequestOutput> outputs;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(f.engine->Step(&outputs).ok());
  // Step 6 is in flight with both requests in it.
  EXPECT_EQ(f.engine->scheduler().stats().steps_total, 6u);
  RequestOutput last;
  ASSERT_TRUE(f.engine->Cancel(1, &last));
  EXPECT_EQ(last.reason, proto::FinishReason::kCancelled);
  EXPECT_EQ(last.usage.completion_tokens, 5u);
  // Its id comes back at once as a new request: the running step's row for the old one is not
  // the new one's.
  ASSERT_TRUE(f.engine->Add(Greedy(1, f.tok->Encode("One day"), 10)).ok());
  std::map<uint64_t, std::pair<std::string, std::vector<int32_t>>> rest = f.RunAll();
  EXPECT_EQ(rest[1].first, LocalText("One day", 10));
  std::string text;
  for (const RequestOutput& o : outputs) {
    if (o.id == 2) text += o.text;
  }
  EXPECT_EQ(text + rest[2].first, LocalText("The little dog", 20));
  EXPECT_EQ(f.engine->kv().GetStats().used_blocks, 0);
  EXPECT_FALSE(f.engine->HasWork());
}

}  // namespace
}  // namespace bmad::engine
