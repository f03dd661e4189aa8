// The scheduler's priorities and preemption, with the fake executor: class order, aging, the
// max-wait guard, deadline pressure, which sequence is preempted when blocks run out, and that
// recompute loses nothing.
#include "worker/scheduler/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "tests/worker/scheduler/scheduler_fixture.h"

namespace bmad::sched {

void SchedulerTest::RunUrgentPrefillBesideALowDecode(double priority_decay, int64_t low_runs_ms,
                                                     int64_t low_waited_ms) {
  SchedulerConfig config = Config(8, 8);
  config.priority_decay = priority_decay;
  config.max_wait_ms = 1'000'000;
  Make(config, 11, 4, /*prefix_caching=*/false);
  Add(Request(1, 4, 2, clock_.NowMillis(), 0), 1000);  // low class, decodes for long
  clock_.AdvanceMillis(low_waited_ms);
  for (int i = 0; i < 12; ++i) {
    exec_.Step(*sched_);
    clock_.AdvanceMillis(10);
  }
  clock_.AdvanceMillis(low_runs_ms);
  ASSERT_EQ(sched_->Find(1)->state, SequenceState::kRunning);
  ASSERT_GE(kv_->GetStats().used_blocks, 4);
  // Urgent: 20 prompt tokens and 10 generated fit in 8 blocks, but not beside the low one's.
  Add(Request(2, 20, 0, clock_.NowMillis(), 300), 10);
  int urgent_preempted = 0, low_preempted = 0;
  for (int i = 0; i < 100 && sched_->Find(2) != nullptr; ++i) {
    const SchedulerOutput out = exec_.Step(*sched_);
    ASSERT_TRUE(kv_->CheckInvariants().ok()) << kv_->CheckInvariants().ToString();
    int64_t tokens = 0;
    for (const ScheduledChunk& c : out.chunks) tokens += c.num_tokens;
    EXPECT_LE(tokens, 8);
    EXPECT_EQ(tokens, out.num_tokens);
    for (uint64_t id : out.preempted) {
      (id == 2 ? urgent_preempted : low_preempted)++;
      // A preempted sequence computes nothing in the step that preempted it.
      EXPECT_EQ(ChunkOf(out, id), nullptr) << "step " << out.step;
    }
    clock_.AdvanceMillis(10);
  }
  EXPECT_EQ(sched_->Find(2), nullptr) << "the urgent request did not finish";
  EXPECT_EQ(urgent_preempted, 0);
  EXPECT_GE(low_preempted, 1);
  EXPECT_EQ(exec_.generated[2].size(), 10u);
  ASSERT_TRUE(sched_->Remove(1));
  EXPECT_EQ(kv_->GetStats().used_blocks, 0);
}

namespace {

TEST_F(SchedulerTest, PriorityClassesOrderAdmission) {
  Make(Config(10, 8), 64);
  const int64_t now = clock_.NowMillis();  // just arrived: no aging, no max-wait guard
  Add(Request(1, 10, 2, now, 100), 1);      // distinct tokens: no prefix reuse between them
  Add(Request(2, 10, 0, now, 200), 1);
  Add(Request(3, 10, 1, now, 300), 1);
  std::vector<uint64_t> order;
  for (int i = 0; i < 3; ++i) order.push_back(exec_.Step(*sched_).chunks.at(0).seq_id);
  EXPECT_EQ(order, (std::vector<uint64_t>{2, 3, 1}));
}

TEST_F(SchedulerTest, AgingLetsALowClassRequestOvertakeANewerUrgentOne) {
  SchedulerConfig c = Config(10, 8);
  c.max_wait_ms = 1'000'000;  // isolate aging from the max-wait guard
  c.priority_decay = 1.0;     // one class per second of waiting
  Make(c, 64);
  const int64_t now = clock_.NowMillis();
  Sequence old_low, new_urgent;
  old_low.priority = 2;
  old_low.arrival_ms = now - 3000;  // waited 3 s: +3 beats the 2 classes it is behind
  old_low.waiting_since_ms = old_low.arrival_ms;
  old_low.deadline_ms = old_low.arrival_ms + 100000;
  new_urgent.priority = 0;
  new_urgent.arrival_ms = now;
  new_urgent.waiting_since_ms = now;
  new_urgent.deadline_ms = now + 100000;
  EXPECT_GT(sched_->EffectivePriority(old_low, now), sched_->EffectivePriority(new_urgent, now));
  Add(Request(1, 10, 2, now - 3000, 100), 1);
  Add(Request(2, 10, 0, now, 200), 1);
  EXPECT_EQ(exec_.Step(*sched_).chunks.at(0).seq_id, 1u);
  // Without the wait, class wins.
  Add(Request(3, 10, 2, clock_.NowMillis(), 300), 1);
  Add(Request(4, 10, 0, clock_.NowMillis(), 400), 1);
  RunToCompletion();
}

TEST_F(SchedulerTest, MaxWaitGuardGoesFirst) {
  SchedulerConfig c = Config(10, 8);
  c.priority_decay = 0.0;  // no aging: only the guard can help the old request
  Make(c, 64);
  const int64_t now = clock_.NowMillis();
  Add(Request(1, 10, 0, now), 1);        // urgent
  Add(Request(2, 10, 5, now - 250), 1);  // lowest class, waited past max_wait_ms (200)
  EXPECT_EQ(exec_.Step(*sched_).chunks.at(0).seq_id, 2u);
}

// Past its deadline a request gains one class per second overdue, whatever its SLO: a 1 ms
// SLO 10 ms overdue does not outrank a class three above it.
TEST_F(SchedulerTest, DeadlinePressureGrowsBySecondsOverdueNotBySlos) {
  SchedulerConfig c = Config(10, 8);
  c.priority_decay = 0.0;
  Make(c, 64);
  const int64_t now = clock_.NowMillis();
  Sequence tiny_slo, urgent;
  tiny_slo.priority = 3;
  tiny_slo.arrival_ms = now - 11;
  tiny_slo.deadline_ms = now - 10;
  urgent.priority = 0;
  urgent.arrival_ms = now;
  urgent.deadline_ms = now + 10000;
  EXPECT_NEAR(sched_->EffectivePriority(tiny_slo, now), -3 + 1 + 0.01, 1e-9);
  EXPECT_GT(sched_->EffectivePriority(urgent, now), sched_->EffectivePriority(tiny_slo, now));
  EXPECT_GT(sched_->EffectivePriority(tiny_slo, now + 3000), sched_->EffectivePriority(urgent, now + 3000));
}

TEST_F(SchedulerTest, DeadlinePressureRaisesPriority) {
  SchedulerConfig c = Config(10, 8);
  c.priority_decay = 0.0;
  c.max_wait_ms = 1'000'000;
  Make(c, 64);
  const int64_t now = clock_.NowMillis();
  SequenceRequest relaxed = Request(1, 10, 1, now - 100);
  relaxed.slo_ms = 100000;
  SequenceRequest tight = Request(2, 10, 1, now - 100);
  tight.slo_ms = 110;  // 10 ms left
  Add(relaxed, 1);
  Add(tight, 1);
  EXPECT_EQ(exec_.Step(*sched_).chunks.at(0).seq_id, 2u);
}

TEST_F(SchedulerTest, PreemptionFreesBlocksAndRecomputes) {
  // 9 usable blocks of 4 tokens. Two sequences of 8 prompt tokens (2 blocks) each generate 12
  // tokens (20 tokens = 5 blocks each): they cannot both finish in 9 blocks.
  Make(Config(64, 8), 10, 4, /*prefix_caching=*/false);
  Add(Request(1, 8, 1, clock_.NowMillis(), 0), 12);
  Add(Request(2, 8, 1, clock_.NowMillis(), 100), 12);
  SchedulerOutput s1 = exec_.Step(*sched_);
  ASSERT_EQ(s1.chunks.size(), 2u);
  EXPECT_EQ(kv_->GetStats().used_blocks, 4);  // 2 + 2 blocks
  bool saw_preemption = false;
  for (int i = 0; i < 200 && sched_->HasWork(); ++i) {
    SchedulerOutput out = exec_.Step(*sched_);
    ASSERT_TRUE(kv_->CheckInvariants().ok());
    if (!out.preempted.empty()) {
      saw_preemption = true;
      // The most recently admitted (request 2) goes, and all its blocks are freed at once:
      // request 1 holds exactly the blocks its tokens need.
      EXPECT_EQ(out.preempted, std::vector<uint64_t>{2});
      const Sequence* one = sched_->Find(1);
      EXPECT_EQ(kv_->GetStats().used_blocks,
                (one->num_computed + ChunkOf(out, 1)->num_tokens + 3) / 4);
      EXPECT_EQ(sched_->Find(2)->state, SequenceState::kWaiting);
      EXPECT_EQ(sched_->Find(2)->num_computed, 0);
    }
    clock_.AdvanceMillis(10);
  }
  EXPECT_TRUE(saw_preemption);
  EXPECT_FALSE(sched_->HasWork());
  // Recompute lost nothing: both produced their full outputs, the same tokens as without
  // preemption.
  std::vector<int32_t> expected;
  for (int i = 0; i < 12; ++i) expected.push_back(1000 + i);
  EXPECT_EQ(exec_.generated[1], expected);
  EXPECT_EQ(exec_.generated[2], expected);
  EXPECT_GE(sched_->stats().preemptions_total, 1u);
  EXPECT_EQ(kv_->GetStats().used_blocks, 0);
}

// The prefix cache's query counter holds prompt tokens, each prompt once: a preempted sequence
// started again (prompt and generated tokens) is a recompute, not a new query.
TEST_F(SchedulerTest, ARecomputeIsNotCountedAsAPrefixQuery) {
  Make(Config(64, 8), 10, 4, /*prefix_caching=*/true);
  Add(Request(1, 8, 1, clock_.NowMillis(), 0), 12);
  Add(Request(2, 8, 1, clock_.NowMillis(), 100), 12);
  RunToCompletion();
  EXPECT_GE(sched_->stats().preemptions_total, 1u);
  EXPECT_EQ(kv_->GetStats().prefix_query_tokens, 16u);
}

TEST_F(SchedulerTest, LowerPriorityIsPreemptedFirst) {
  Make(Config(64, 8), 10, 4, false);
  Add(Request(1, 8, 2, clock_.NowMillis(), 0), 12);    // admitted first, low class
  Add(Request(2, 8, 0, clock_.NowMillis(), 100), 12);  // urgent
  // Both are admitted in step 1 (request 2 first by priority, request 1 second).
  EXPECT_EQ(StepUntilPreemption(), std::vector<uint64_t>{1});
  RunToCompletion();
}

TEST_F(SchedulerTest, ARequestTheMaxWaitGuardAdmittedIsNotTheFirstVictim) {
  // As above, but the low-class request has waited past max_wait_ms: the guard admits it, and
  // the urgent one is preempted instead (it would otherwise be let in and thrown out in turn).
  SchedulerConfig c = Config(64, 8);
  c.priority_decay = 0;
  Make(c, 10, 4, false);
  Add(Request(1, 8, 2, clock_.NowMillis() - 250, 0), 12);
  Add(Request(2, 8, 0, clock_.NowMillis(), 100), 12);
  EXPECT_EQ(StepUntilPreemption(), std::vector<uint64_t>{2});
  RunToCompletion();
  EXPECT_EQ(exec_.generated[1].size(), 12u);
  EXPECT_EQ(exec_.generated[2].size(), 12u);
}

TEST_F(SchedulerTest, APreemptedSequenceHasNotStarvedUntilItWaitsPastMaxWait) {
  // Both run for longer than max_wait_ms (200) before the blocks run out. The low-class one,
  // preempted then, has waited a step, not 300 ms: readmitted as the guard's, it would make the
  // urgent one the next victim. 19 usable blocks of 4 tokens, a budget of 8 tokens a step (so
  // the preempted one is readmitted in small chunks beside the urgent decode).
  SchedulerConfig c = Config(8, 8);
  c.priority_decay = 0;
  Make(c, 20, 4, /*prefix_caching=*/false);
  Add(Request(1, 8, 0, clock_.NowMillis(), 0), 60);    // urgent: 68 tokens, 17 blocks
  Add(Request(2, 8, 2, clock_.NowMillis(), 100), 40);  // low class: 48 tokens, 12 blocks
  int urgent_preempted = 0, low_preempted = 0;
  for (int i = 0; i < 2000 && sched_->HasWork(); ++i) {
    const SchedulerOutput out = exec_.Step(*sched_);
    ASSERT_TRUE(kv_->CheckInvariants().ok()) << kv_->CheckInvariants().ToString();
    for (uint64_t id : out.preempted) (id == 1 ? urgent_preempted : low_preempted)++;
    clock_.AdvanceMillis(10);
  }
  EXPECT_FALSE(sched_->HasWork());
  EXPECT_GE(low_preempted, 1);
  EXPECT_EQ(urgent_preempted, 0);
  EXPECT_EQ(exec_.generated[1].size(), 60u);
  EXPECT_EQ(exec_.generated[2].size(), 40u);
}

TEST_F(SchedulerTest, AnUrgentPrefillPreemptsALowPriorityDecodePlannedBeforeIt) {
  // Decodes are planned before prompts, so when the urgent prompt runs out of blocks the
  // low-priority decode already holds its chunk of this step. It must still be the victim (and
  // lose that chunk), not the urgent prompt.
  RunUrgentPrefillBesideALowDecode(/*priority_decay=*/0, /*low_runs_ms=*/0);
}

TEST_F(SchedulerTest, TimeSpentRunningIsNotAgingSoALongRunningLowRequestStaysTheVictim) {
  // Aging counts time waiting. Counted from arrival, 3 s of running made the class-2 request
  // outrank a new class-0 one (one class per second), which then preempted itself over and
  // over until the low one finished.
  RunUrgentPrefillBesideALowDecode(/*priority_decay=*/1.0, /*low_runs_ms=*/3000);
}

TEST_F(SchedulerTest, ALowRequestPastItsDeadlineIsStillTheVictimOfAnUrgentOne) {
  // Deadline pressure grows with the clock, also while a sequence runs: 20 s into a 10 s SLO it
  // was worth three classes, and the urgent request became the victim, again and again.
  RunUrgentPrefillBesideALowDecode(/*priority_decay=*/1.0, /*low_runs_ms=*/20000);
}

TEST_F(SchedulerTest, ALowRequestThatWaitedLongBeforeItsAdmissionIsStillTheVictim) {
  // Its aging before admission stayed in its rank for its whole run.
  RunUrgentPrefillBesideALowDecode(/*priority_decay=*/1.0, /*low_runs_ms=*/0, /*low_waited_ms=*/3000);
}

TEST_F(SchedulerTest, AStepThatPreemptsAdmitsNothing) {
  // 10 usable blocks of 4 tokens. Requests 1 (class 0) and 2 (class 1) decode until they fill
  // every block; then request 3 (class 2, one block's prompt) arrives. When request 1 needs
  // its next block, request 2 is the victim. Its freed blocks must not admit request 3 in the
  // same step: that gives a lower class the memory just taken from a higher one, and request
  // 3, prefilled, becomes the next victim as soon as request 1 grows again (vLLM's schedulers
  // admit nothing in a step that preempted, for the same reason).
  SchedulerConfig config = Config(64, 8);
  config.priority_decay = 0;
  config.max_wait_ms = 1'000'000;
  Make(config, 11, 4, /*prefix_caching=*/false);
  Add(Request(1, 8, 0, clock_.NowMillis(), 0), 30);
  Add(Request(2, 8, 1, clock_.NowMillis(), 100), 30);
  for (int i = 0; i < 50 && kv_->GetStats().free_blocks > 0; ++i) {
    const SchedulerOutput out = exec_.Step(*sched_);
    ASSERT_TRUE(out.preempted.empty()) << "step " << out.step;
    clock_.AdvanceMillis(10);
  }
  ASSERT_EQ(kv_->GetStats().free_blocks, 0);
  Add(Request(3, 4, 2, clock_.NowMillis(), 200), 30);
  bool saw_preemption = false, two_readmitted = false;
  for (int i = 0; i < 300 && sched_->HasWork(); ++i) {
    std::set<uint64_t> waiting_before;
    for (uint64_t id : {1, 2, 3}) {
      const Sequence* s = sched_->Find(id);
      if (s != nullptr && s->state == SequenceState::kWaiting) waiting_before.insert(id);
    }
    const SchedulerOutput out = exec_.Step(*sched_);
    ASSERT_TRUE(kv_->CheckInvariants().ok()) << kv_->CheckInvariants().ToString();
    if (!out.preempted.empty()) {
      saw_preemption = true;
      for (uint64_t id : waiting_before) {
        EXPECT_EQ(ChunkOf(out, id), nullptr) << "request " << id << " admitted in step "
                                             << out.step << ", which preempted";
      }
    }
    if (waiting_before.count(2) && ChunkOf(out, 2) != nullptr) two_readmitted = true;
    // The lowest class never runs while a higher one it would displace waits.
    if (!two_readmitted && saw_preemption) {
      EXPECT_EQ(ChunkOf(out, 3), nullptr) << "request 3 ran in step " << out.step
                                          << " while request 2 waited";
    }
    clock_.AdvanceMillis(10);
  }
  EXPECT_TRUE(saw_preemption);
  EXPECT_FALSE(sched_->HasWork());
  for (uint64_t id : {1, 2, 3}) EXPECT_EQ(exec_.generated[id].size(), 30u) << id;
  EXPECT_EQ(sched_->Find(3), nullptr);
  EXPECT_EQ(kv_->GetStats().used_blocks, 0);
}

}  // namespace
}  // namespace bmad::sched
