// The scheduler for requests that want their prompt's log-probabilities: every prompt position
// is computed with its logits (rows), in chunks within scheduler.max_prompt_logprob_tokens per
// step, with no prefix-cache reuse before the positions still to compute.
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/worker/scheduler/scheduler_fixture.h"

namespace bmad::sched {
namespace {

SequenceRequest Scored(uint64_t id, int64_t prompt_len, int32_t first_token = 0) {
  SequenceRequest r = Request(id, prompt_len, 1, 0, first_token);
  r.prompt_logprobs = true;
  return r;
}

TEST_F(SchedulerTest, PromptLogprobChunksHaveARowPerTokenWithinTheStepsRowBudget) {
  SchedulerConfig config = Config(64, 8);
  config.max_prompt_logprob_tokens = 10;
  Make(config, 64);
  Add(Scored(1, 25), 3);
  Add(Scored(2, 6, 500), 2);
  Add(Request(3, 20, 1, 0, 900), 2);  // an ordinary prompt beside them: one row, when it samples
  SchedulerOutput s1 = exec_.Step(*sched_);
  // Request 1 takes the 10 rows; request 2 waits for the next step's; request 3 is not held.
  ASSERT_NE(ChunkOf(s1, 1), nullptr);
  EXPECT_EQ(ChunkOf(s1, 1)->num_tokens, 10);
  EXPECT_EQ(ChunkOf(s1, 1)->logit_rows, 10);
  EXPECT_TRUE(ChunkOf(s1, 1)->prompt_logits);
  EXPECT_FALSE(ChunkOf(s1, 1)->samples);
  EXPECT_EQ(ChunkOf(s1, 2), nullptr);
  ASSERT_NE(ChunkOf(s1, 3), nullptr);
  EXPECT_EQ(ChunkOf(s1, 3)->num_tokens, 20);
  EXPECT_EQ(ChunkOf(s1, 3)->logit_rows, 1);
  EXPECT_FALSE(ChunkOf(s1, 3)->prompt_logits);
  EXPECT_EQ(sched_->Find(1)->prompt_logprobs_done, 10);
  // Then 10 more of request 1's; the last 5 with request 2's 5... in arrival order.
  SchedulerOutput s2 = exec_.Step(*sched_);
  EXPECT_EQ(ChunkOf(s2, 1)->num_tokens, 10);
  EXPECT_EQ(ChunkOf(s2, 2), nullptr);
  SchedulerOutput s3 = exec_.Step(*sched_);
  EXPECT_EQ(ChunkOf(s3, 1)->num_tokens, 5);
  EXPECT_TRUE(ChunkOf(s3, 1)->samples);  // its last prompt row also samples
  EXPECT_EQ(ChunkOf(s3, 1)->logit_rows, 5);
  ASSERT_NE(ChunkOf(s3, 2), nullptr);
  EXPECT_EQ(ChunkOf(s3, 2)->num_tokens, 5);  // 10 - 5 rows left: 5 of its 6
  EXPECT_EQ(sched_->Find(1)->prompt_logprobs_done, 24);  // every position but the first
  // Once its prompt is done, a scored request decodes as any other: one row.
  SchedulerOutput s4 = exec_.Step(*sched_);
  EXPECT_EQ(ChunkOf(s4, 1)->num_tokens, 1);
  EXPECT_EQ(ChunkOf(s4, 1)->logit_rows, 1);
  EXPECT_FALSE(ChunkOf(s4, 1)->prompt_logits);
  int64_t rows_in_any_step = 0;
  for (const SchedulerOutput& step : exec_.steps) {
    int64_t prompt_rows = 0;
    for (const ScheduledChunk& c : step.chunks) prompt_rows += c.prompt_logits ? c.logit_rows : 0;
    rows_in_any_step = std::max(rows_in_any_step, prompt_rows);
  }
  EXPECT_LE(rows_in_any_step, 10);
  RunToCompletion();
  EXPECT_EQ(exec_.generated[1].size(), 3u);
  EXPECT_EQ(exec_.generated[2].size(), 2u);
}

TEST_F(SchedulerTest, APromptWhoseLogprobsAreWantedReusesNoCachedBlockBeforeThem) {
  SchedulerConfig config = Config(64, 8);
  config.max_prompt_logprob_tokens = 64;
  Make(config, 64);
  // The same 20 tokens run once without logprobs: their blocks are cached.
  Add(Request(1, 20, 1, 0), 1);
  RunToCompletion();
  Add(Scored(2, 20), 1);
  SchedulerOutput out = exec_.Step(*sched_);
  ASSERT_NE(ChunkOf(out, 2), nullptr);
  EXPECT_EQ(ChunkOf(out, 2)->start, 0);  // no reuse: every position's logits are needed
  EXPECT_EQ(ChunkOf(out, 2)->logit_rows, 20);
  RunToCompletion();
  // Without logprobs the same prompt reuses them (4 blocks of 4: all but the last token's).
  Add(Request(3, 20, 1, 0), 1);
  out = exec_.Step(*sched_);
  EXPECT_EQ(ChunkOf(out, 3)->start, 16);
}

TEST_F(SchedulerTest, APreemptedScoredPromptReusesOnlyBlocksBelowWhatItComputed) {
  // 10 usable blocks of 4 tokens. Request 1 (class 2) scores a 40-token prompt, 4 rows a step;
  // request 2 (class 0) grows beside it until request 1 is preempted mid-prompt.
  SchedulerConfig config = Config(8, 8);
  config.max_prompt_logprob_tokens = 4;
  Make(config, 11);
  SequenceRequest low = Scored(1, 40);
  low.priority = 2;
  Add(std::move(low), 1);
  SequenceRequest urgent = Request(2, 8, 0, 0, 500);
  Add(std::move(urgent), 30);
  int64_t done_when_preempted = -1;
  bool readmitted = false;
  for (int i = 0; i < 200 && sched_->HasWork(); ++i) {
    const Sequence* before = sched_->Find(1);
    const int64_t done = before != nullptr ? before->prompt_logprobs_done : -1;
    SchedulerOutput out = exec_.Step(*sched_);
    ASSERT_TRUE(kv_->CheckInvariants().ok());
    if (std::find(out.preempted.begin(), out.preempted.end(), 1u) != out.preempted.end()) {
      done_when_preempted = done;
      readmitted = false;
      ASSERT_GT(done, 0);
      ASSERT_LT(done, 39) << "preempted after its prompt: this test wants it mid-prompt";
      continue;
    }
    // Readmitted: whatever it finds cached, it starts no later than its first position whose
    // logits are still to compute.
    if (const ScheduledChunk* c = ChunkOf(out, 1); c != nullptr && done_when_preempted >= 0 && !readmitted) {
      readmitted = true;
      EXPECT_LE(c->start, done_when_preempted);
      EXPECT_EQ(c->start % 4, 0);
      EXPECT_TRUE(c->prompt_logits);
    }
  }
  EXPECT_GE(done_when_preempted, 0) << "request 1 was never preempted";
  EXPECT_TRUE(readmitted);
  ASSERT_FALSE(sched_->HasWork());
}

TEST_F(SchedulerTest, PromptLogprobsAreRefusedWhenTurnedOff) {
  SchedulerConfig config = Config(64, 8);
  config.max_prompt_logprob_tokens = 0;
  Make(config, 64);
  const Status s = sched_->Add(Scored(1, 5));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("max_prompt_logprob_tokens 0"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace bmad::sched
