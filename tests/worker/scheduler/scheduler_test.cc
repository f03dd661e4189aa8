// The scheduler with a fake executor and no model: continuous admission, chunked prefill,
// cancellation, prefix reuse, the baselines (FCFS, static batching), bad requests, and steps
// planned over a pending token. Priorities and preemption: scheduler_priority_test.cc.
#include "worker/scheduler/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "tests/worker/scheduler/scheduler_fixture.h"

namespace bmad::sched {
namespace {

TEST_F(SchedulerTest, ContinuousAdmissionJoinsRunningBatch) {
  Make(Config(64, 8), 64);
  Add(Request(1, 10, 1, 0), 5);
  Add(Request(2, 6, 1, 0, /*first_token=*/100), 5);  // distinct: neither waits for the other's prefix
  SchedulerOutput s1 = exec_.Step(*sched_);
  ASSERT_EQ(s1.chunks.size(), 2u);
  EXPECT_EQ(s1.num_tokens, 16);
  Add(Request(3, 12, 1, 0, /*first_token=*/500), 3);  // no prefix shared with 1 and 2
  SchedulerOutput s2 = exec_.Step(*sched_);
  // Two decodes and the newcomer's whole prompt in the same step.
  ASSERT_EQ(s2.chunks.size(), 3u);
  EXPECT_EQ(ChunkOf(s2, 1)->num_tokens, 1);
  EXPECT_EQ(ChunkOf(s2, 2)->num_tokens, 1);
  EXPECT_EQ(ChunkOf(s2, 3)->num_tokens, 12);
  EXPECT_TRUE(ChunkOf(s2, 3)->samples);
  RunToCompletion();
  EXPECT_EQ(exec_.generated[1].size(), 5u);
  EXPECT_EQ(exec_.generated[3].size(), 3u);
}

TEST_F(SchedulerTest, ChunkedPrefillStaysWithinBudgetAndDecodesNeverWait) {
  Make(Config(16, 8), 128);
  Add(Request(1, 4, 1, 0), 30);
  exec_.Step(*sched_);  // request 1 prefilled; it decodes from now on
  Add(Request(2, 100, 1, 0), 2);
  int prefill_steps = 0;
  for (int i = 0; i < 10; ++i) {
    SchedulerOutput out = exec_.Step(*sched_);
    EXPECT_LE(out.num_tokens, 16);
    const ScheduledChunk* decode = ChunkOf(out, 1);
    ASSERT_NE(decode, nullptr) << "step " << i << ": the decode waited behind a prefill";
    EXPECT_EQ(decode->num_tokens, 1);
    if (const ScheduledChunk* p = ChunkOf(out, 2); p && p->num_tokens > 1) {
      ++prefill_steps;
      EXPECT_EQ(p->num_tokens, std::min<int64_t>(15, 100 - p->start));
      EXPECT_EQ(p->samples, p->start + p->num_tokens == 100);
    }
  }
  EXPECT_EQ(prefill_steps, 7);  // 100 prompt tokens at 15 per step
  RunToCompletion();
}

TEST_F(SchedulerTest, CancelFreesBlocksAtOnce) {
  Make(Config(64, 8), 32);
  Add(Request(1, 20, 1, 0), 100);
  Add(Request(2, 10, 1, 0, /*first_token=*/100), 100);  // distinct: both admitted at once
  exec_.Step(*sched_);
  EXPECT_EQ(kv_->GetStats().used_blocks, 5 + 3);
  EXPECT_TRUE(sched_->Remove(1));
  EXPECT_EQ(kv_->GetStats().used_blocks, 3);
  EXPECT_FALSE(sched_->Remove(1));
  Add(Request(3, 4, 1, 0), 1);
  EXPECT_TRUE(sched_->Remove(3));  // a waiting request too
  EXPECT_EQ(sched_->stats().waiting, 0);
  EXPECT_TRUE(sched_->Remove(2));
  EXPECT_EQ(kv_->GetStats().used_blocks, 0);
  EXPECT_FALSE(sched_->HasWork());
}

TEST_F(SchedulerTest, EveryBlockIsFreeWhenAllFinish) {
  Make(Config(32, 6), 40);
  for (uint64_t id = 1; id <= 20; ++id) {
    Add(Request(id, static_cast<int64_t>(3 + id * 2), static_cast<int32_t>(id % 3),
                clock_.NowMillis(), static_cast<int32_t>(id * 1000)),
        static_cast<int64_t>(1 + id % 7));
  }
  RunToCompletion();
  const auto stats = kv_->GetStats();
  EXPECT_EQ(stats.used_blocks, 0);
  EXPECT_EQ(stats.free_blocks, kv_->NumUsableBlocks());
  for (uint64_t id = 1; id <= 20; ++id) {
    EXPECT_EQ(static_cast<int64_t>(exec_.generated[id].size()), static_cast<int64_t>(1 + id % 7));
  }
}

TEST_F(SchedulerTest, PrefixReuseSkipsCachedBlocks) {
  Make(Config(64, 8), 32, 4);
  Add(Request(1, 13, 1, 0, 0), 1);
  RunToCompletion();
  // Same first 12 tokens (3 full blocks): the second request computes only the rest.
  Add(Request(2, 14, 1, clock_.NowMillis(), 0), 1);
  SchedulerOutput out = exec_.Step(*sched_);
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].start, 12);
  EXPECT_EQ(out.chunks[0].num_tokens, 2);
  EXPECT_EQ(sched_->Find(2), nullptr);  // finished (output length 1)
}

TEST_F(SchedulerTest, ARequestWaitingForBlocksIsQueriedInThePrefixCacheOnce) {
  // 5 usable blocks of 4 tokens: request 1 (12 prompt tokens, growing to 18) leaves no room
  // for request 2's 4 blocks until it finishes. Each step tries to admit request 2 and fails;
  // only the attempt that succeeds counts as a prefix query.
  Make(Config(64, 8), 6, 4);
  Add(Request(1, 12, 1, 0, 0), 6);
  Add(Request(2, 13, 1, 0, 100), 1);
  exec_.Step(*sched_);
  ASSERT_NE(sched_->Find(2), nullptr);
  EXPECT_EQ(sched_->Find(2)->state, SequenceState::kWaiting);
  RunToCompletion();
  EXPECT_GE(exec_.steps.size(), 6u);
  EXPECT_EQ(kv_->GetStats().prefix_query_tokens, 12u + 13u);
  EXPECT_EQ(kv_->GetStats().prefix_hit_tokens, 0u);
}

// Two requests with one prompt (a request's n choices) arriving together: the second waits a
// step and reuses the first's full blocks instead of computing them again; a request behind
// it, with a prompt of its own, is admitted meanwhile.
TEST_F(SchedulerTest, OnePromptArrivingTwiceIsComputedOnce) {
  Make(Config(64, 8), 32, 4);
  Add(Request(1, 14, 1, 0), 3);
  Add(Request(2, 14, 1, 0), 3);
  Add(Request(3, 6, 1, 0, /*first_token=*/500), 3);
  SchedulerOutput s1 = exec_.Step(*sched_);
  ASSERT_EQ(s1.chunks.size(), 2u);
  EXPECT_EQ(ChunkOf(s1, 1)->num_tokens, 14);
  EXPECT_EQ(ChunkOf(s1, 2), nullptr);
  EXPECT_EQ(ChunkOf(s1, 3)->num_tokens, 6);
  EXPECT_EQ(sched_->stats().shared_prefix_waits_total, 1u);
  SchedulerOutput s2 = exec_.Step(*sched_);
  const ScheduledChunk* second = ChunkOf(s2, 2);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second->start, 12);  // 3 full blocks reused
  EXPECT_EQ(second->num_tokens, 2);
  EXPECT_EQ(sched_->Find(2)->reused_prefix_tokens, 12);
  RunToCompletion();
  EXPECT_EQ(exec_.generated[1], exec_.generated[2]);
  EXPECT_EQ(exec_.generated[2].size(), 3u);
  EXPECT_EQ(kv_->GetStats().used_blocks, 0);
}

// A prompt prefilled in chunks: a sharer waits only while the blocks it shares are still to be
// computed, not for the whole prompt.
TEST_F(SchedulerTest, ASharedPrefixIsWaitedForOnlyUntilItIsComputed) {
  Make(Config(10, 8), 32, 4);
  auto sharing = [](uint64_t id, size_t shared, size_t length) {
    SequenceRequest r = Request(id, static_cast<int64_t>(length), 1, 0);
    for (size_t i = shared; i < length; ++i) r.prompt[i] = 900 + static_cast<int32_t>(i);
    return r;
  };
  Add(Request(1, 18, 1, 0), 2);
  Add(sharing(2, 12, 16), 2);  // 3 blocks shared
  Add(sharing(3, 8, 12), 2);   // 2 blocks shared
  SchedulerOutput s1 = exec_.Step(*sched_);  // 1: [0, 10), the whole budget
  ASSERT_EQ(s1.chunks.size(), 1u);
  SchedulerOutput s2 = exec_.Step(*sched_);  // 1: [10, 18); it has computed 2 blocks
  EXPECT_EQ(ChunkOf(s2, 2), nullptr);        // its third shared block is in this step
  ASSERT_NE(ChunkOf(s2, 3), nullptr);        // both its shared blocks are computed
  EXPECT_EQ(ChunkOf(s2, 3)->start, 8);
  EXPECT_EQ(sched_->stats().shared_prefix_waits_total, 1u);
  SchedulerOutput s3 = exec_.Step(*sched_);
  ASSERT_NE(ChunkOf(s3, 2), nullptr);
  EXPECT_EQ(ChunkOf(s3, 2)->start, 12);
  RunToCompletion();
  EXPECT_EQ(kv_->GetStats().used_blocks, 0);
}

// vLLM's cache_salt: one prompt under two salts shares nothing, so neither waits for the other;
// under one salt the second waits and reuses, as without salts.
TEST_F(SchedulerTest, OnePromptUnderTwoSaltsIsComputedTwiceWithoutWaiting) {
  Make(Config(64, 8), 32, 4);
  SequenceRequest a = Request(1, 14, 1, 0), b = Request(2, 14, 1, 0), c = Request(3, 14, 1, 0);
  a.prefix_root = RootBlockHash("tenant-a");
  b.prefix_root = RootBlockHash("tenant-b");
  c.prefix_root = RootBlockHash("tenant-a");
  Add(a, 2);
  Add(b, 2);
  SchedulerOutput s1 = exec_.Step(*sched_);
  ASSERT_EQ(s1.chunks.size(), 2u);  // side by side
  EXPECT_EQ(ChunkOf(s1, 2)->num_tokens, 14);
  EXPECT_EQ(sched_->stats().shared_prefix_waits_total, 0u);
  RunToCompletion();
  EXPECT_EQ(kv_->GetStats().prefix_hit_tokens, 0u);
  // Tenant a again, after both finished: its own blocks, still cached, are reused.
  Add(c, 1);
  SchedulerOutput s2 = exec_.Step(*sched_);
  ASSERT_EQ(s2.chunks.size(), 1u);
  EXPECT_EQ(s2.chunks[0].start, 12);
  RunToCompletion();
  EXPECT_EQ(kv_->GetStats().prefix_hit_tokens, 12u);
}

// Without prefix caching there is nothing to wait for: both compute their prompts at once.
TEST_F(SchedulerTest, WithoutPrefixCachingNobodyWaitsForAPrefix) {
  Make(Config(64, 8), 32, 4, /*prefix_caching=*/false);
  Add(Request(1, 14, 1, 0), 2);
  Add(Request(2, 14, 1, 0), 2);
  SchedulerOutput s1 = exec_.Step(*sched_);
  EXPECT_EQ(s1.chunks.size(), 2u);
  EXPECT_EQ(sched_->stats().shared_prefix_waits_total, 0u);
  RunToCompletion();
}

TEST_F(SchedulerTest, FcfsIgnoresPriority) {
  Make(Config(10, 8, SchedulerPolicy::kFcfs), 64);
  Add(Request(1, 10, 2, 0), 1);
  Add(Request(2, 10, 0, 5), 1);
  EXPECT_EQ(exec_.Step(*sched_).chunks.at(0).seq_id, 1u);
}

TEST_F(SchedulerTest, StaticBatchingRunsABatchToCompletion) {
  Make(Config(64, 2, SchedulerPolicy::kStatic), 64);
  Add(Request(1, 4, 1, 0), 2);
  Add(Request(2, 4, 1, 1), 6);
  Add(Request(3, 4, 1, 2), 1);
  SchedulerOutput s1 = exec_.Step(*sched_);
  EXPECT_EQ(s1.chunks.size(), 2u);  // batch {1, 2}
  // Request 1 finishes after 2 tokens; request 3 still waits until request 2 is done too.
  for (int i = 0; i < 5; ++i) {
    SchedulerOutput out = exec_.Step(*sched_);
    EXPECT_EQ(ChunkOf(out, 3), nullptr) << "step " << i;
  }
  SchedulerOutput next = exec_.Step(*sched_);
  ASSERT_NE(ChunkOf(next, 3), nullptr);
  RunToCompletion();
}

// The static baseline's batch is the first max_seqs waiting, not what one step's token budget
// admits: with 8 tokens a step and prompts of 10, its three members take three steps to admit
// (a batch of one before), and the fourth request waits until all three have finished.
TEST_F(SchedulerTest, StaticBatchTakesMaxSeqsEvenWhenPromptsNeedSeveralSteps) {
  Make(Config(8, 3, SchedulerPolicy::kStatic), 64);
  Add(Request(1, 10, 1, 0), 20);
  Add(Request(2, 10, 1, 1), 20);
  Add(Request(3, 10, 1, 2), 20);
  Add(Request(4, 10, 1, 3), 2);
  std::set<uint64_t> admitted;
  for (int i = 0; i < 12; ++i) {
    const SchedulerOutput out = exec_.Step(*sched_);
    for (const ScheduledChunk& c : out.chunks) admitted.insert(c.seq_id);
    EXPECT_EQ(ChunkOf(out, 4), nullptr) << "step " << i;
  }
  EXPECT_EQ(admitted, (std::set<uint64_t>{1, 2, 3}));
  // Request 4 forms the next batch once the first has finished.
  bool ran_4 = false;
  for (int i = 0; i < 100 && sched_->HasWork(); ++i) {
    const SchedulerOutput out = exec_.Step(*sched_);
    if (ChunkOf(out, 4) != nullptr) {
      ran_4 = true;
      EXPECT_EQ(out.chunks.size(), 1u) << "request 4 runs alone, after the batch";
    }
  }
  EXPECT_TRUE(ran_4);
  RunToCompletion();
}

// A member of a static batch preempted for KV blocks rejoins its batch: it is admitted again
// before any request of the next batch, even one that arrived in the same millisecond (the
// engine stamps arrivals in milliseconds).
TEST_F(SchedulerTest, StaticBatchPreemptedMemberRejoinsItsBatch) {
  Make(Config(64, 2, SchedulerPolicy::kStatic), 6);  // 24 tokens of KV for two 8-token prompts
  Add(Request(1, 8, 1, 0, 100), 12);
  Add(Request(2, 8, 1, 0, 200), 12);
  Add(Request(3, 8, 1, 0, 300), 2);
  bool preempted = false;
  for (int i = 0; i < 200 && sched_->HasWork(); ++i) {
    const SchedulerOutput out = exec_.Step(*sched_);
    if (!out.preempted.empty()) preempted = true;
    if (ChunkOf(out, 3) != nullptr) {
      EXPECT_TRUE(preempted);
      // Both members have finished by the time request 3 is admitted.
      EXPECT_EQ(out.chunks.size(), 1u);
    }
    ASSERT_TRUE(kv_->CheckInvariants().ok());
  }
  EXPECT_TRUE(preempted) << "the test needs a preemption";
  EXPECT_FALSE(sched_->HasWork());
}

// A member cancelled while it waits leaves the batch; nobody takes its place until the batch
// has finished.
TEST_F(SchedulerTest, StaticBatchMemberRemovedWhileWaitingIsNotReplaced) {
  Make(Config(8, 3, SchedulerPolicy::kStatic), 64);
  Add(Request(1, 10, 1, 0), 20);
  Add(Request(2, 10, 1, 1), 20);
  Add(Request(3, 10, 1, 2), 20);
  Add(Request(4, 10, 1, 3), 2);
  SchedulerOutput first = exec_.Step(*sched_);
  ASSERT_NE(ChunkOf(first, 1), nullptr);
  ASSERT_EQ(ChunkOf(first, 3), nullptr);  // still waiting
  ASSERT_TRUE(sched_->Remove(3));
  for (int i = 0; i < 10; ++i) {
    const SchedulerOutput out = exec_.Step(*sched_);
    EXPECT_EQ(ChunkOf(out, 4), nullptr) << "step " << i;
  }
  RunToCompletion();
}

TEST_F(SchedulerTest, BadRequestsAndFullQueue) {
  SchedulerConfig c = Config(64, 8);
  c.max_waiting = 2;
  Make(c, 64);
  EXPECT_EQ(sched_->Add(Request(1, 0, 1, 0)).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(sched_->Add(Request(1, 3, 1, 0)).ok());
  EXPECT_EQ(sched_->Add(Request(1, 3, 1, 0)).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(sched_->Add(Request(2, 3, 1, 0)).ok());
  Status full = sched_->Add(Request(3, 3, 1, 0));
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted);
  // A request taking the place of its own copy (just removed) is admitted past the bound.
  SequenceRequest copy = Request(3, 3, 1, 0);
  copy.replaces_copy = true;
  EXPECT_TRUE(sched_->Add(copy).ok());
}

// Overlapped steps (the engine plans step n+1 while step n runs): OnStepLaunched, then the next
// Schedule, then OnTokensSampled.
TEST_F(SchedulerTest, TheNextStepIsPlannedOverAPendingToken) {
  Make(Config(64, 8), 32, 4);
  Add(Request(1, 5, 1, 0), 2);
  const SchedulerOutput first = sched_->Schedule();
  ASSERT_EQ(first.chunks.size(), 1u);
  EXPECT_TRUE(first.chunks[0].samples);
  sched_->OnStepLaunched(first);
  const Sequence* seq = sched_->Find(1);
  EXPECT_EQ(seq->num_computed, 5);
  ASSERT_EQ(seq->tokens.size(), 6u);
  EXPECT_EQ(seq->tokens.back(), kPendingToken);

  // Planned before the first step's token is known: a decode of the pending position.
  const SchedulerOutput second = sched_->Schedule();
  ASSERT_EQ(second.chunks.size(), 1u);
  EXPECT_EQ(second.chunks[0].start, 5);
  EXPECT_EQ(second.chunks[0].num_tokens, 1);
  EXPECT_TRUE(second.chunks[0].samples);
  const SampledToken t1[] = {{1, 42, false}};
  sched_->OnTokensSampled(t1);
  EXPECT_EQ(seq->tokens.back(), 42);
  EXPECT_FALSE(seq->token_pending);

  sched_->OnStepLaunched(second);
  EXPECT_EQ(seq->num_computed, 6);
  EXPECT_EQ(seq->tokens.back(), kPendingToken);
  // It finishes with the second token; a third step planned meanwhile is dropped by the engine.
  const SchedulerOutput third = sched_->Schedule();
  ASSERT_EQ(third.chunks.size(), 1u);
  const SampledToken t2[] = {{1, 43, true}};
  sched_->OnTokensSampled(t2);
  EXPECT_EQ(sched_->Find(1), nullptr);
  EXPECT_FALSE(sched_->HasWork());
  EXPECT_EQ(kv_->GetStats().used_blocks, 0);
  ASSERT_TRUE(kv_->CheckInvariants().ok()) << kv_->CheckInvariants().ToString();
}

TEST_F(SchedulerTest, NothingIsPlannedAfterASequencesLastToken) {
  Make(Config(64, 8), 32, 4);
  Add(Request(1, 5, 1, 0), 1);
  Add(Request(2, 3, 1, 0, 100), 2);
  const SchedulerOutput first = sched_->Schedule();
  ASSERT_EQ(first.chunks.size(), 2u);
  const uint64_t last[] = {1};  // its first token is its last
  sched_->OnStepLaunched(first, last);
  EXPECT_FALSE(sched_->Find(1)->token_pending);
  EXPECT_TRUE(sched_->Find(2)->token_pending);
  const SchedulerOutput second = sched_->Schedule();
  ASSERT_EQ(second.chunks.size(), 1u);
  EXPECT_EQ(second.chunks[0].seq_id, 2u);
  const SampledToken t[] = {{1, 7, true}, {2, 8, false}};
  sched_->OnTokensSampled(t);
  EXPECT_EQ(sched_->Find(1), nullptr);
  EXPECT_EQ(sched_->Find(2)->tokens.back(), 8);
}

// A sequence whose step in flight samples its last token gives its blocks back at launch: the
// step planned meanwhile grows a neighbour into them instead of preempting it (it preempted the
// neighbour, which planned in order would simply decode).
TEST_F(SchedulerTest, ASequenceEndingInTheStepInFlightLeavesItsBlocksToTheNextPlan) {
  Make(Config(64, 8), 5, 4);  // four usable blocks of four tokens
  Add(Request(1, 8, 1, 0, 100), 1);  // two blocks; its first token is its last
  Add(Request(2, 8, 1, 0, 200), 3);  // two blocks; its decode needs a third
  const SchedulerOutput first = sched_->Schedule();
  ASSERT_EQ(first.chunks.size(), 2u);
  const uint64_t last[] = {1};
  sched_->OnStepLaunched(first, last);
  EXPECT_TRUE(sched_->Find(1)->kv_released);
  EXPECT_EQ(kv_->GetStats().used_blocks, 2);
  const SchedulerOutput second = sched_->Schedule();  // planned while the first runs
  EXPECT_TRUE(second.preempted.empty());
  ASSERT_EQ(second.chunks.size(), 1u);
  EXPECT_EQ(second.chunks[0].seq_id, 2u);
  EXPECT_EQ(second.chunks[0].start, 8);
  const SampledToken t[] = {{1, 7, true}, {2, 8, false}};
  sched_->OnTokensSampled(t);
  EXPECT_EQ(sched_->Find(1), nullptr);
  ASSERT_TRUE(kv_->CheckInvariants().ok()) << kv_->CheckInvariants().ToString();
  EXPECT_EQ(kv_->GetStats().used_blocks, 3);
}

// Should the token be no last after all, the sequence computes its context again, as a preempted
// one does: its blocks are gone.
TEST_F(SchedulerTest, ASequenceThatDidNotEndAfterAllIsRecomputed) {
  Make(Config(64, 8), 32, 4);
  Add(Request(1, 5, 1, 0), 3);
  const SchedulerOutput first = sched_->Schedule();
  const uint64_t last[] = {1};
  sched_->OnStepLaunched(first, last);
  const SampledToken t[] = {{1, 42, false}};
  sched_->OnTokensSampled(t);
  const Sequence* seq = sched_->Find(1);
  ASSERT_NE(seq, nullptr);
  EXPECT_EQ(seq->state, SequenceState::kWaiting);
  EXPECT_FALSE(seq->kv_released);
  EXPECT_EQ(seq->num_computed, 0);
  EXPECT_EQ(seq->tokens.back(), 42);
  const SchedulerOutput again = sched_->Schedule();
  ASSERT_EQ(again.chunks.size(), 1u);
  EXPECT_EQ(again.chunks[0].start, 4);  // its cached first block is reused
  EXPECT_EQ(again.chunks[0].num_tokens, 2);
  ASSERT_TRUE(kv_->CheckInvariants().ok()) << kv_->CheckInvariants().ToString();
}

TEST_F(SchedulerTest, APendingTokenIsNeverHashedForPrefixReuse) {
  Make(Config(64, 8), 32, 4);
  Add(Request(1, 7, 1, 0), 2);  // the pending token is the last of the second block
  const SchedulerOutput first = sched_->Schedule();
  sched_->OnStepLaunched(first);
  const SchedulerOutput second = sched_->Schedule();
  const SampledToken t1[] = {{1, 99, false}};
  sched_->OnTokensSampled(t1);
  sched_->OnStepLaunched(second);  // computes position 7: the second block is full now
  const SampledToken t2[] = {{1, 100, true}};
  sched_->OnTokensSampled(t2);
  ASSERT_EQ(sched_->Find(1), nullptr);

  // The cached second block holds the sampled token, not the placeholder: a prompt with the
  // same eight tokens reuses both blocks, one with the placeholder itself there reuses one.
  SequenceRequest same = Request(2, 7, 1, 0);
  same.prompt.push_back(99);
  same.prompt.push_back(5);
  SequenceRequest other = Request(3, 7, 1, 0);
  other.prompt.push_back(kPendingToken);
  other.prompt.push_back(5);
  Add(std::move(same), 1);
  Add(std::move(other), 1);
  const SchedulerOutput next = sched_->Schedule();
  ASSERT_EQ(next.chunks.size(), 2u);
  EXPECT_EQ(ChunkOf(next, 2)->start, 8);
  EXPECT_EQ(ChunkOf(next, 3)->start, 4);
}

TEST_F(SchedulerTest, ASequencePreemptedWhileItsStepRunsKeepsItsSampledToken) {
  // Block size 4, three usable blocks: two 4-token prompts take one each; both decodes need a
  // second block and only one is left.
  Make(Config(64, 8), 4, 4);
  Add(Request(1, 4, 1, 0, 0), 3);
  Add(Request(2, 4, 1, 0, 10), 3);
  const SchedulerOutput first = sched_->Schedule();
  ASSERT_EQ(first.chunks.size(), 2u);
  sched_->OnStepLaunched(first);
  const SchedulerOutput second = sched_->Schedule();  // planned while the first runs
  ASSERT_EQ(second.preempted.size(), 1u);
  const uint64_t victim = second.preempted[0];
  EXPECT_EQ(victim, 2u);  // most recently admitted
  const SampledToken t[] = {{1, 50, false}, {2, 60, false}};
  sched_->OnTokensSampled(t);
  const Sequence* v = sched_->Find(victim);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->state, SequenceState::kWaiting);
  EXPECT_EQ(v->num_computed, 0);
  EXPECT_EQ(v->tokens, (std::vector<int32_t>{10, 11, 12, 13, 60}));
  EXPECT_FALSE(v->token_pending);
  ASSERT_TRUE(kv_->CheckInvariants().ok()) << kv_->CheckInvariants().ToString();
}

}  // namespace
}  // namespace bmad::sched
