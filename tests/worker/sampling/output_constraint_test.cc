// OutputConstraint's reasoning gate over a small fake vocabulary: a block open from the start, a
// block the first token may open, and the format applying from the token after the block's end;
// inside the Sampler, an output that reasons, then writes the object, then ends.
#include "worker/sampling/output_constraint.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tests/worker/sampling/sampling_test_values.h"
#include "worker/sampling/sampler.h"

namespace bmad::sampling {
namespace {

using testing::kInf;

constexpr int32_t kEndOfOutput = 2;          // the end of output
constexpr int32_t kThinkOpen = 6;    // "<think>"
constexpr int32_t kThinkClose = 7;   // "</think>"

const std::vector<std::string> kGateTexts = {
    "", "", "",              // 0 unk, 1 bos, 2 eos
    "{", "}", "hmm",         // 3, 4, 5
    "<think>", "</think>",   // 6, 7
    "\n",                    // 8
};

OutputConstraint Gated(int32_t start_token) {
  ReasoningGate gate;
  gate.end_token = kThinkClose;
  gate.start_token = start_token;
  gate.ending_tokens = {kEndOfOutput};
  return OutputConstraint(JsonConstraint(std::make_shared<const TokenTexts>(kGateTexts), {kEndOfOutput}), gate);
}

// The ids Mask leaves finite after Sync of `generated`.
std::set<int32_t> AllowedAfter(OutputConstraint& c, const std::vector<int32_t>& generated) {
  EXPECT_TRUE(c.Sync(generated).ok());
  std::vector<float> scores(kGateTexts.size(), 0.0f);
  EXPECT_TRUE(c.Mask(scores).ok());
  std::set<int32_t> allowed;
  for (size_t i = 0; i < scores.size(); ++i) {
    if (scores[i] != -kInf) allowed.insert(static_cast<int32_t>(i));
  }
  return allowed;
}

const std::set<int32_t> kAnyButTheEnd = {0, 1, 3, 4, 5, 6, 7, 8};

TEST(OutputConstraintGate, ABlockOpenFromTheStartDefersTheFormatPastItsEnd) {
  OutputConstraint c = Gated(-1);
  EXPECT_EQ(AllowedAfter(c, {}), kAnyButTheEnd);  // reasoning: anything but the end
  EXPECT_FALSE(c.complete());
  EXPECT_EQ(AllowedAfter(c, {5, 8, 5}), kAnyButTheEnd);
  EXPECT_EQ(AllowedAfter(c, {5, kThinkClose}), (std::set<int32_t>{3}));  // the object's "{" next
  EXPECT_EQ(AllowedAfter(c, {5, kThinkClose, 3}), (std::set<int32_t>{4, 8}));  // "}" or a newline
  EXPECT_FALSE(c.complete());
  EXPECT_EQ(AllowedAfter(c, {5, kThinkClose, 3, 4}), (std::set<int32_t>{kEndOfOutput}));
  EXPECT_TRUE(c.complete());
  // A shorter output (a recomputed sequence) is read again from its start.
  EXPECT_EQ(AllowedAfter(c, {5}), kAnyButTheEnd);
  EXPECT_FALSE(c.complete());
}

TEST(OutputConstraintGate, TheFirstTokenMayOpenTheBlock) {
  OutputConstraint c = Gated(kThinkOpen);
  // The format's first token, or the opening marker.
  EXPECT_EQ(AllowedAfter(c, {}), (std::set<int32_t>{3, kThinkOpen}));
  EXPECT_EQ(AllowedAfter(c, {kThinkOpen}), kAnyButTheEnd);
  EXPECT_EQ(AllowedAfter(c, {kThinkOpen, 5, kThinkClose}), (std::set<int32_t>{3}));
  // Without the marker first, the format holds from the first token: no block later.
  OutputConstraint direct = Gated(kThinkOpen);
  EXPECT_EQ(AllowedAfter(direct, {3}), (std::set<int32_t>{4, 8}));
  EXPECT_EQ(AllowedAfter(direct, {3, 4}), (std::set<int32_t>{kEndOfOutput}));
  EXPECT_TRUE(direct.complete());
}

TEST(OutputConstraintGate, AnOpeningMarkerThatWouldEndTheOutputIsNotOffered) {
  // The marker is a stop token: drawn, it would end the output before the format.
  ReasoningGate gate;
  gate.end_token = kThinkClose;
  gate.start_token = kThinkOpen;
  gate.ending_tokens = {kEndOfOutput, kThinkOpen};
  OutputConstraint c(JsonConstraint(std::make_shared<const TokenTexts>(kGateTexts), {kEndOfOutput, kThinkOpen}), gate);
  EXPECT_EQ(AllowedAfter(c, {}), (std::set<int32_t>{3}));
}

TEST(OutputConstraintGate, WithoutAGateTheFormatHoldsFromTheStart) {
  OutputConstraint c(JsonConstraint(std::make_shared<const TokenTexts>(kGateTexts), {kEndOfOutput}));
  EXPECT_EQ(AllowedAfter(c, {}), (std::set<int32_t>{3}));
}

TEST(OutputConstraintGate, TheSamplerReasonsThenWritesTheObjectThenEnds) {
  proto::SamplingParams greedy;
  greedy.temperature = 0;
  Sampler s(greedy, 1, {kEndOfOutput}, Gated(-1));
  // The model wants to end at once, then to close the block: the end is banned while it reasons.
  std::vector<float> logits(kGateTexts.size(), 0.0f);
  std::vector<int32_t> out;
  auto draw = [&] {
    Result<SampleResult> r = s.Sample(logits, {}, out);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    out.push_back(r->token_id);
  };
  logits[kEndOfOutput] = 9;
  logits[5] = 5;
  draw();  // "hmm", not the end
  logits[kThinkClose] = 7;
  draw();  // "</think>"
  logits[4] = 8;  // "}" scores above "{", but the object opens first
  logits[3] = 1;
  draw();
  draw();
  draw();  // the object is whole: the end
  EXPECT_EQ(out, (std::vector<int32_t>{5, kThinkClose, 3, 4, kEndOfOutput}));
}

}  // namespace
}  // namespace bmad::sampling
