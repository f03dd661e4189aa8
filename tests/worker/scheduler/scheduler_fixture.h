// What the scheduler tests share: a fake executor (no model: each step "computes" its chunks and
// every chunk that samples gets a made-up token; a request finishes after its output length),
// configs and requests, and the fixture holding a scheduler over a KV block manager.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <vector>

#include "common/clock.h"
#include "worker/kv/kv_block_manager.h"
#include "worker/scheduler/scheduler.h"

namespace bmad::sched {

struct FakeExecutor {
  std::map<uint64_t, int64_t> output_len;  // tokens to generate per request
  std::map<uint64_t, std::vector<int32_t>> generated;
  std::vector<SchedulerOutput> steps;

  // Runs one step; returns its output.
  SchedulerOutput Step(Scheduler& s) {
    SchedulerOutput out = s.Schedule();
    std::vector<SampledToken> sampled;
    for (const ScheduledChunk& c : out.chunks) {
      if (!c.samples) continue;
      auto& gen = generated[c.seq_id];
      // A token that depends only on how much was generated: recompute gives the same output.
      const int32_t token = static_cast<int32_t>(1000 + gen.size());
      gen.push_back(token);
      sampled.push_back({c.seq_id, token, static_cast<int64_t>(gen.size()) >= output_len[c.seq_id]});
    }
    s.OnStepDone(out, sampled);
    steps.push_back(out);
    return out;
  }
};

inline SchedulerConfig Config(int64_t budget, int64_t max_seqs, SchedulerPolicy policy = SchedulerPolicy::kContinuous) {
  SchedulerConfig c;
  c.policy = policy;
  c.max_batch_tokens = budget;
  c.max_seqs = max_seqs;
  c.max_wait_ms = 200;
  c.priority_decay = 1.0;
  c.default_slo_ms = 10000;
  c.max_waiting = 100;
  return c;
}

inline SequenceRequest Request(uint64_t id, int64_t prompt_len, int32_t priority, int64_t arrival_ms,
                        int32_t first_token = 0) {
  SequenceRequest r;
  r.id = id;
  for (int64_t i = 0; i < prompt_len; ++i) r.prompt.push_back(first_token + static_cast<int32_t>(i));
  r.priority = priority;
  r.arrival_ms = arrival_ms;
  return r;
}

inline const ScheduledChunk* ChunkOf(const SchedulerOutput& out, uint64_t id) {
  for (const auto& c : out.chunks)
    if (c.seq_id == id) return &c;
  return nullptr;
}

class SchedulerTest : public ::testing::Test {
 protected:
  void Make(const SchedulerConfig& config, int64_t num_blocks, int64_t block_size = 4,
            bool prefix_caching = true) {
    kv_ = std::make_unique<kv::KvBlockManager>(kv::KvBlockManagerOptions{num_blocks, block_size, prefix_caching});
    sched_ = std::make_unique<Scheduler>(config, *kv_, clock_);
  }
  void Add(SequenceRequest r, int64_t output_len) {
    exec_.output_len[r.id] = output_len;
    ASSERT_TRUE(sched_->Add(std::move(r)).ok());
  }
  void RunToCompletion(int max_steps = 10000) {
    for (int i = 0; i < max_steps && sched_->HasWork(); ++i) {
      exec_.Step(*sched_);
      ASSERT_TRUE(kv_->CheckInvariants().ok()) << kv_->CheckInvariants().ToString();
      clock_.AdvanceMillis(10);
    }
    ASSERT_FALSE(sched_->HasWork());
  }
  // Steps (at most 200) until one preempts; what it preempted (empty if none did).
  std::vector<uint64_t> StepUntilPreemption() {
    for (int i = 0; i < 200 && sched_->HasWork(); ++i) {
      SchedulerOutput out = exec_.Step(*sched_);
      if (!out.preempted.empty()) return out.preempted;
    }
    return {};
  }
  // Request 1 (class 2) decodes for long; after it has run `low_runs_ms` more, request 2
  // (class 0, urgent) arrives and runs out of blocks beside it. Request 1 must be the victim
  // every time. 10 usable blocks of 4 tokens, a budget of 8.
  // `low_waited_ms`: how long request 1 waited before its admission.
  void RunUrgentPrefillBesideALowDecode(double priority_decay, int64_t low_runs_ms, int64_t low_waited_ms = 0);

  ManualClock clock_{1'000'000'000};
  std::unique_ptr<kv::KvBlockManager> kv_;
  std::unique_ptr<Scheduler> sched_;
  FakeExecutor exec_;
};

}  // namespace bmad::sched
