// Step plans: the encoding round-trips and refuses malformed bytes; the leader's builder sends a
// sequence's block table whole once and then only what was appended (whole again after the
// table was rebuilt); a rank's mirror rebuilds exactly the leader's steps and refuses a delta for
// a sequence it does not hold; micro-batches split whole sequences, balanced by tokens.
#include "worker/parallel/step_plan.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace bmad::parallel {
namespace {

using model::SequenceStep;

bool SameSteps(const std::vector<SequenceStep>& a, const std::vector<SequenceStep>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::equal(a[i].tokens.begin(), a[i].tokens.end(), b[i].tokens.begin(), b[i].tokens.end()) ||
        !std::equal(a[i].block_table.begin(), a[i].block_table.end(), b[i].block_table.begin(),
                    b[i].block_table.end()) ||
        a[i].start_pos != b[i].start_pos || a[i].logit_rows != b[i].logit_rows) {
      return false;
    }
  }
  return true;
}

TEST(StepPlanTest, EncodingRoundTrips) {
  StepPlan plan;
  plan.kind = StepPlan::Kind::kStep;
  plan.step_id = 42;
  plan.released = {7, 9};
  plan.sequences.push_back({3, 17, 3, false, {5, 6, 7}, {11}});
  plan.sequences.push_back({4, 0, 0, true, {1}, {1, 2, 3}});
  auto back = DecodeStepPlan(EncodeStepPlan(plan));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->step_id, 42u);
  EXPECT_EQ(back->released, plan.released);
  ASSERT_EQ(back->sequences.size(), 2u);
  EXPECT_EQ(back->sequences[0].tokens, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(back->sequences[0].new_blocks, (std::vector<int32_t>{11}));
  EXPECT_EQ(back->sequences[0].logit_rows, 3);
  EXPECT_EQ(back->sequences[1].logit_rows, 0);
  EXPECT_FALSE(back->sequences[0].reset_table);
  EXPECT_TRUE(back->sequences[1].reset_table);
  EXPECT_EQ(back->sequences[1].start_pos, 0);

  StepPlan down;
  down.kind = StepPlan::Kind::kShutdown;
  down.reason = "the leader stopped";
  auto d = DecodeStepPlan(EncodeStepPlan(down));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->kind, StepPlan::Kind::kShutdown);
  EXPECT_EQ(d->reason, "the leader stopped");
}

TEST(StepPlanTest, MalformedBytesAreErrors) {
  StepPlan plan;
  plan.sequences.push_back({3, 17, 3, false, {5, 6, 7}, {11}});
  const std::string bytes = EncodeStepPlan(plan);
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    auto r = DecodeStepPlan(std::string_view(bytes).substr(0, cut));
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << "cut at " << cut;
  }
  EXPECT_NE(DecodeStepPlan(bytes + "x").status().message().find("trailing"), std::string::npos);
  std::string bad_kind = bytes;
  bad_kind[0] = 9;
  EXPECT_NE(DecodeStepPlan(bad_kind).status().message().find("unknown kind"), std::string::npos);
  // A count far past the end must not allocate or read out of bounds.
  std::string huge = bytes;
  huge[9] = '\xff';
  huge[10] = '\xff';
  huge[11] = '\xff';
  huge[12] = '\x7f';
  EXPECT_FALSE(DecodeStepPlan(huge).ok());
}

TEST(StepPlanTest, BuilderSendsDeltasAndMirrorRebuildsTheSteps) {
  StepPlanBuilder builder;
  StepPlanMirror mirror;
  std::vector<int32_t> prompt = {1, 2, 3, 4, 5}, table_a = {4, 9}, table_b = {6};
  std::vector<int32_t> one = {8};
  std::vector<SequenceStep> steps = {{prompt, 0, table_a, true}, {one, 0, table_b, true}};
  const uint64_t ids[] = {100, 200};

  StepPlan first = builder.Build(steps, ids);
  EXPECT_TRUE(first.sequences[0].reset_table);
  EXPECT_EQ(first.sequences[0].new_blocks, table_a);
  std::vector<SequenceStep> rebuilt;
  ASSERT_TRUE(mirror.Apply(DecodeStepPlan(EncodeStepPlan(first)).value(), &rebuilt).ok());
  // Spans point into the decoded plan, which died: re-apply to a kept plan for the comparison.
  StepPlanMirror mirror2;
  ASSERT_TRUE(mirror2.Apply(first, &rebuilt).ok());
  EXPECT_TRUE(SameSteps(rebuilt, steps));

  // Next step: a appends one block, b unchanged: only a's new block travels.
  table_a.push_back(12);
  std::vector<int32_t> next_a = {6}, next_b = {9};
  steps = {{next_a, 5, table_a, true}, {next_b, 1, table_b, true}};
  StepPlan second = builder.Build(steps, ids);
  EXPECT_FALSE(second.sequences[0].reset_table);
  EXPECT_EQ(second.sequences[0].new_blocks, (std::vector<int32_t>{12}));
  EXPECT_TRUE(second.sequences[1].new_blocks.empty());
  ASSERT_TRUE(mirror2.Apply(second, &rebuilt).ok());
  EXPECT_TRUE(SameSteps(rebuilt, steps));

  // b was preempted and readmitted into other blocks: its table goes whole again.
  table_b = {30, 31};
  steps = {{next_b, 0, table_b, true}};
  const uint64_t only_b[] = {200};
  StepPlan third = builder.Build(steps, only_b);
  EXPECT_TRUE(third.sequences[0].reset_table);
  ASSERT_TRUE(mirror2.Apply(third, &rebuilt).ok());
  EXPECT_TRUE(SameSteps(rebuilt, steps));

  // a finishes: the next plan names it, and both sides forget it.
  builder.Release(100);
  StepPlan fourth = builder.Build({}, {});
  EXPECT_EQ(fourth.released, (std::vector<uint64_t>{100}));
  ASSERT_TRUE(mirror2.Apply(fourth, &rebuilt).ok());
  EXPECT_EQ(builder.known_sequences(), 1u);
  EXPECT_EQ(mirror2.known_sequences(), 1u);
}

TEST(StepPlanTest, MirrorRefusesADeltaForAnUnknownSequence) {
  StepPlan plan;
  plan.step_id = 5;
  plan.sequences.push_back({77, 3, true, false, {1}, {2}});
  StepPlanMirror mirror;
  std::vector<SequenceStep> steps;
  Status s = mirror.Apply(plan, &steps);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("sequence 77"), std::string::npos);
}

// Random steps, random preemptions: the mirror always rebuilds what the leader computes.
TEST(StepPlanTest, RandomizedBuilderAndMirrorAgree) {
  std::mt19937 rng(11);
  StepPlanBuilder builder;
  StepPlanMirror mirror;
  std::map<uint64_t, std::vector<int32_t>> tables;
  std::map<uint64_t, std::vector<int32_t>> tokens;
  for (int step = 0; step < 500; ++step) {
    // Grow, reset or release some sequences.
    for (uint64_t id = 1; id <= 12; ++id) {
      const unsigned r = rng() % 10;
      if (r == 0 && tables.count(id)) {
        builder.Release(id);
        tables.erase(id);
      } else if (r == 1 && tables.count(id)) {
        tables[id] = {static_cast<int32_t>(rng() % 500)};  // rebuilt
      } else if (r < 6) {
        tables[id].push_back(static_cast<int32_t>(rng() % 500));
      }
      tokens[id] = {static_cast<int32_t>(rng() % 100)};
    }
    std::vector<SequenceStep> steps;
    std::vector<uint64_t> ids;
    for (auto& [id, table] : tables) {
      if (rng() % 3 == 0) continue;
      steps.push_back({tokens[id], static_cast<int32_t>(step), table, rng() % 2 == 0});
      ids.push_back(id);
    }
    StepPlan plan = builder.Build(steps, ids);
    StepPlan wire = DecodeStepPlan(EncodeStepPlan(plan)).value();
    std::vector<SequenceStep> rebuilt;
    ASSERT_TRUE(mirror.Apply(wire, &rebuilt).ok()) << "step " << step;
    ASSERT_TRUE(SameSteps(rebuilt, steps)) << "step " << step;
  }
}

TEST(StepPlanTest, MicroBatchesSplitWholeSequencesBalancedByTokens) {
  std::vector<std::vector<int32_t>> toks = {std::vector<int32_t>(100), {1}, {1}, {1},
                                            std::vector<int32_t>(50), std::vector<int32_t>(50)};
  std::vector<SequenceStep> steps;
  for (auto& t : toks) steps.push_back({t, 0, {}, true});
  auto two = SplitMicroBatches(steps, 2);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0], (std::pair<size_t, size_t>{0, 2}));  // 101 tokens | 102 tokens
  EXPECT_EQ(two[1], (std::pair<size_t, size_t>{2, 6}));
  auto many = SplitMicroBatches(steps, 10);  // never more parts than sequences
  ASSERT_EQ(many.size(), 6u);
  for (size_t i = 0; i < many.size(); ++i) EXPECT_EQ(many[i], (std::pair<size_t, size_t>{i, i + 1}));
  EXPECT_EQ(SplitMicroBatches(steps, 1), (std::vector<std::pair<size_t, size_t>>{{0, 6}}));
  EXPECT_TRUE(SplitMicroBatches({}, 3).empty());
  // Equal sequences split evenly.
  std::vector<int32_t> one = {1};
  std::vector<SequenceStep> decode(8, SequenceStep{one, 0, {}, true});
  EXPECT_EQ(SplitMicroBatches(decode, 4),
            (std::vector<std::pair<size_t, size_t>>{{0, 2}, {2, 4}, {4, 6}, {6, 8}}));
}

}  // namespace
}  // namespace bmad::parallel
