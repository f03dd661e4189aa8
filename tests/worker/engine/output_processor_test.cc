// OutputProcessor on its own, with the real Llama-2 vocabulary: what text a client is sent for
// each sampled token and why a sequence ends. The engine tests drive it through a model; these
// pin the edges a model rarely reaches (a character cut short at the length limit, migration).
#include "worker/engine/output_processor.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/worker/tokenizer/vocabulary_fixtures.h"

namespace bmad::engine {
namespace {

using tokenizer::testing::kLlama2File;
using tokenizer::testing::SharedTokenizer;

const tokenizer::Tokenizer& Llama2() { return SharedTokenizer(kLlama2File); }

// The ids of " " + text: the tokenizer adds the leading space (SentencePiece's prefix space).
std::vector<int32_t> Ids(const std::string& text) { return Llama2().Encode(text, /*add_special=*/false); }

// Llama-2's byte tokens are <0x00>..<0xFF> at ids 3..258.
int32_t ByteToken(unsigned char byte) { return 3 + byte; }

struct Driven {
  std::string text;      // everything sent, in order
  TokenOutcome last;     // the outcome that finished the sequence (or the last one)
  size_t tokens_fed = 0;
};

Driven Drive(OutputProcessor& processor, const std::vector<int32_t>& tokens) {
  Driven d;
  for (int32_t token : tokens) {
    d.last = processor.OnToken(token);
    ++d.tokens_fed;
    d.text += d.last.text;
    if (d.last.finished) break;
  }
  return d;
}

const std::vector<int32_t> kPrompt = Ids("Hello");

TEST(OutputProcessorTest, TheLengthLimitSendsWhatTheStopMatcherHeldBack) {
  proto::SamplingParams params;
  params.stop_strings = {"zebra"};
  const std::vector<int32_t> tokens = Ids("The z");
  OutputProcessor processor(Llama2(), params, kPrompt, static_cast<int64_t>(tokens.size()));
  const Driven d = Drive(processor, tokens);
  EXPECT_TRUE(d.last.finished);
  EXPECT_EQ(d.last.reason, proto::FinishReason::kLength);
  EXPECT_EQ(d.text, " The z");
  EXPECT_TRUE(d.last.stop_string.empty());
  EXPECT_EQ(processor.generated(), tokens);
}

// The last token the length limit allows leaves a character incomplete: the flush turns it into
// U+FFFD, and a stop string completed by it ends the output as a stop, not a length finish.
TEST(OutputProcessorTest, AStopStringCompletedByTheFlushAtTheLengthLimitIsAStop) {
  for (bool include_stop : {false, true}) {
    proto::SamplingParams params;
    params.stop_strings = {"\uFFFD"};
    params.include_stop_str_in_output = include_stop;
    std::vector<int32_t> tokens = Ids("a");
    tokens.push_back(ByteToken(0xF0));  // the first byte of a four-byte character
    OutputProcessor processor(Llama2(), params, kPrompt, static_cast<int64_t>(tokens.size()));
    const Driven d = Drive(processor, tokens);
    ASSERT_TRUE(d.last.finished);
    EXPECT_EQ(d.tokens_fed, tokens.size());
    EXPECT_EQ(d.last.reason, proto::FinishReason::kStop) << "include_stop " << include_stop;
    EXPECT_EQ(d.last.stop_string, "\uFFFD");
    EXPECT_EQ(d.text, include_stop ? " a\uFFFD" : " a");
  }
}

TEST(OutputProcessorTest, ACharacterCutShortAtTheLengthLimitIsSentAsAReplacement) {
  proto::SamplingParams params;
  std::vector<int32_t> tokens = Ids("a");
  tokens.push_back(ByteToken(0xF0));
  OutputProcessor processor(Llama2(), params, kPrompt, static_cast<int64_t>(tokens.size()));
  const Driven d = Drive(processor, tokens);
  EXPECT_EQ(d.last.reason, proto::FinishReason::kLength);
  EXPECT_EQ(d.text, " a\uFFFD");
}

TEST(OutputProcessorTest, AStopTokenAddsNoTextButReleasesHeldText) {
  proto::SamplingParams params;
  params.stop_strings = {"zebra"};
  const int32_t stop_token = Ids("cat").back();
  params.stop_token_ids = {static_cast<uint32_t>(stop_token)};
  std::vector<int32_t> tokens = Ids("The z");
  tokens.push_back(stop_token);
  tokens.push_back(Ids("dog").back());  // never reached
  OutputProcessor processor(Llama2(), params, kPrompt, 100);
  const Driven d = Drive(processor, tokens);
  EXPECT_EQ(d.tokens_fed, tokens.size() - 1);
  EXPECT_EQ(d.last.reason, proto::FinishReason::kStop);
  EXPECT_EQ(d.last.stop_token_id, stop_token);
  EXPECT_TRUE(d.last.stop_string.empty());
  EXPECT_EQ(d.text, " The z");
  // Finished: later tokens are ignored.
  EXPECT_EQ(processor.OnToken(stop_token).text, "");
  EXPECT_TRUE(processor.finished());
}

// vLLM keeps an ending token's text when the client asks for the stop in the output: after the
// text the stop-string matcher held back, in order.
TEST(OutputProcessorTest, AStopTokensTextIsSentWhenTheStopIsAskedForInTheOutput) {
  proto::SamplingParams params;
  params.stop_strings = {"zebra"};
  params.include_stop_str_in_output = true;
  const int32_t stop_token = Ids("cat").back();
  params.stop_token_ids = {static_cast<uint32_t>(stop_token)};
  std::vector<int32_t> tokens = Ids("The z");
  tokens.push_back(stop_token);
  OutputProcessor processor(Llama2(), params, kPrompt, 100);
  const Driven d = Drive(processor, tokens);
  EXPECT_EQ(d.tokens_fed, tokens.size());
  EXPECT_EQ(d.last.reason, proto::FinishReason::kStop);
  EXPECT_EQ(d.last.stop_token_id, stop_token);
  EXPECT_TRUE(d.last.stop_string.empty());
  EXPECT_EQ(d.text, " The z" + Llama2().TokenPiece(stop_token));
}

// A control token has no text: the end of generation adds nothing even when asked for.
TEST(OutputProcessorTest, TheEndOfGenerationAddsNoTextWhenTheStopIsAskedForInTheOutput) {
  proto::SamplingParams params;
  params.include_stop_str_in_output = true;
  std::vector<int32_t> tokens = Ids("The cat");
  tokens.push_back(Llama2().EndOfGenerationIds().at(0));
  OutputProcessor processor(Llama2(), params, kPrompt, 100);
  const Driven d = Drive(processor, tokens);
  EXPECT_EQ(d.last.reason, proto::FinishReason::kStop);
  EXPECT_EQ(d.text, " The cat");
}

// Under a JSON response format the constraint lets a stop token end a complete value whatever its
// text: that text would follow the value, so it is left out even when asked for.
TEST(OutputProcessorTest, AStopTokensTextIsLeftOutUnderAJsonResponseFormat) {
  proto::SamplingParams params;
  params.include_stop_str_in_output = true;
  params.response_format = proto::ResponseFormat::kJsonObject;
  const int32_t stop_token = Ids("cat").back();
  params.stop_token_ids = {static_cast<uint32_t>(stop_token)};
  std::vector<int32_t> tokens = Ids("true");
  tokens.push_back(stop_token);
  OutputProcessor processor(Llama2(), params, kPrompt, 100);
  const Driven d = Drive(processor, tokens);
  EXPECT_EQ(d.last.reason, proto::FinishReason::kStop);
  EXPECT_EQ(d.last.stop_token_id, stop_token);
  EXPECT_EQ(d.text, " true");
}

// The stop token's text completes a stop string: that string ends the output and names itself.
TEST(OutputProcessorTest, AStopTokensTextThatCompletesAStopStringStopsThere) {
  proto::SamplingParams params;
  params.include_stop_str_in_output = true;
  const std::vector<int32_t> cat = Ids("The cat");
  params.stop_strings = {"The c"};
  params.stop_token_ids = {static_cast<uint32_t>(cat.back())};
  OutputProcessor processor(Llama2(), params, kPrompt, 100);
  const Driven d = Drive(processor, cat);
  EXPECT_EQ(d.last.reason, proto::FinishReason::kStop);
  EXPECT_EQ(d.last.stop_string, "The c");
  EXPECT_EQ(d.last.stop_token_id, -1);
  EXPECT_EQ(d.text, " The c");
}

TEST(OutputProcessorTest, AStopStringCutsTheOutputAndNamesItself) {
  proto::SamplingParams params;
  params.stop_strings = {"zebra", " girl"};
  const std::vector<int32_t> tokens = Ids("a little girl named Lily");
  OutputProcessor processor(Llama2(), params, kPrompt, 100);
  const Driven d = Drive(processor, tokens);
  EXPECT_EQ(d.last.reason, proto::FinishReason::kStop);
  EXPECT_EQ(d.last.stop_string, " girl");
  EXPECT_EQ(d.last.stop_token_id, -1);
  EXPECT_EQ(d.text, " a little");
}

TEST(OutputProcessorTest, EndOfGenerationCountsOnlyAfterMinTokens) {
  const int32_t eos = Llama2().EndOfGenerationIds().at(0);
  proto::SamplingParams params;
  params.min_tokens = 2;
  const int32_t word = Ids("cat").back();
  OutputProcessor processor(Llama2(), params, kPrompt, 100);
  EXPECT_FALSE(processor.OnToken(word).finished);
  EXPECT_FALSE(processor.OnToken(eos).finished);  // the 2nd token: min_tokens not yet exceeded
  const TokenOutcome third = processor.OnToken(eos);
  EXPECT_TRUE(third.finished);
  EXPECT_EQ(third.reason, proto::FinishReason::kStop);
  EXPECT_EQ(third.stop_token_id, -1);

  params.ignore_eos = true;
  OutputProcessor ignoring(Llama2(), params, kPrompt, 100);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(ignoring.OnToken(eos).finished);
}

// Tokens a previous replica generated count towards the limit and are not sent again, but text
// it held back (a possible stop string's start) is still held and still stops the output.
TEST(OutputProcessorTest, MigratedTokensCountButAreNotSentAgain) {
  proto::SamplingParams params;
  const std::vector<int32_t> before = Ids("Once upon");
  const std::vector<int32_t> after = Ids("a time there");
  OutputProcessor processor(Llama2(), params, kPrompt, static_cast<int64_t>(before.size() + 2), before);
  const Driven d = Drive(processor, after);
  EXPECT_EQ(d.tokens_fed, 2u);
  EXPECT_EQ(d.last.reason, proto::FinishReason::kLength);
  EXPECT_EQ(d.text, " a time");
  EXPECT_EQ(processor.generated().size(), before.size() + 2);

  params.stop_strings = {" upon a"};
  OutputProcessor held(Llama2(), params, kPrompt, 100, Ids("Once upon"));
  const Driven stopped = Drive(held, Ids("a time"));
  EXPECT_EQ(stopped.last.reason, proto::FinishReason::kStop);
  EXPECT_EQ(stopped.text, "");  // " upon" was held back by the first replica, never sent

  OutputProcessor released(Llama2(), params, kPrompt, 100, Ids("Once upon"));
  const Driven went_on = Drive(released, Ids("the hill"));
  EXPECT_FALSE(went_on.last.finished);
  EXPECT_EQ(went_on.text, " upon the hill");
}

TEST(OutputProcessorTest, FinishReturnsHeldTextOnce) {
  proto::SamplingParams params;
  params.stop_strings = {"zebra"};
  OutputProcessor processor(Llama2(), params, kPrompt, 100);
  EXPECT_EQ(Drive(processor, Ids("The z")).text, " The ");  // "z" may begin "zebra"
  EXPECT_EQ(processor.Finish(), "z");
  EXPECT_TRUE(processor.finished());
  EXPECT_EQ(processor.Finish(), "");
}

}  // namespace
}  // namespace bmad::engine
