#include "worker/model/tokenizer/streaming_detokenizer.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tests/worker/tokenizer/vocabulary_fixtures.h"
#include "worker/model/tokenizer/utf8.h"

namespace bmad::tokenizer {
namespace {

using testing::kLlama2File;
using testing::kStoriesFile;
using testing::SharedTokenizer;

// Feeds every id; checks each output is whole characters; returns all output and Flush().
std::string StreamAll(StreamingDetokenizer& stream, const std::vector<int32_t>& ids) {
  std::string all;
  for (int32_t id : ids) {
    const std::string out = stream.Feed(id);
    EXPECT_EQ(ToValidUtf8(out), out) << "partial or invalid UTF-8 emitted for id " << id;
    all += out;
  }
  all += stream.Flush();
  return all;
}

// The Llama-2 ids of "🙂" (llama.cpp): its four bytes as byte tokens <0xF0><0x9F><0x99><0x82>.
const std::vector<int32_t> kSmileBytes = {243, 162, 156, 133};

TEST(StreamingDetokenizerTest, HoldsAByteSplitEmojiUntilItsLastByte) {
  const Tokenizer& t = SharedTokenizer(kLlama2File);
  StreamingDetokenizer stream(t);
  EXPECT_EQ(stream.Feed(9038), " Once");
  EXPECT_EQ(stream.Feed(kSmileBytes[0]), "");
  EXPECT_EQ(stream.pending_bytes(), 1u);
  EXPECT_EQ(stream.Feed(kSmileBytes[1]), "");
  EXPECT_EQ(stream.Feed(kSmileBytes[2]), "");
  EXPECT_EQ(stream.pending_bytes(), 3u);
  EXPECT_EQ(stream.Feed(kSmileBytes[3]), "\U0001F642");
  EXPECT_EQ(stream.pending_bytes(), 0u);
  EXPECT_EQ(stream.Flush(), "");
}

TEST(StreamingDetokenizerTest, EqualsBatchDecodingOfWholeSequences) {
  const std::vector<std::string> texts = {
      "Once upon a time",
      "smile \U0001F642 thumbs \U0001F44D\U0001F3FD family "
      "\U0001F468\u200D\U0001F469\u200D\U0001F467",
      "caf\u00e9 \u4e2d\u6587 \u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\n\tend",
      "  spaces  and\r\nlines\n\n"};
  for (const char* model : {kLlama2File, kStoriesFile}) {
    const Tokenizer& t = SharedTokenizer(model);
    for (const std::string& text : texts) {
      for (bool add_special : {false, true}) {
        const std::vector<int32_t> ids = t.Encode(text, add_special);
        StreamingDetokenizer whole(t, /*decodes_sequence_start=*/true);
        EXPECT_EQ(StreamAll(whole, ids), t.Decode(ids)) << model << ": " << text;

        // A continuation keeps every piece whole: the concatenated pieces.
        std::string pieces;
        for (int32_t id : ids) pieces += t.TokenPiece(id);
        StreamingDetokenizer continuation(t);
        EXPECT_EQ(StreamAll(continuation, ids), pieces) << model << ": " << text;
      }
    }
  }
}

TEST(StreamingDetokenizerTest, InvalidBytesBecomeReplacementCharacters) {
  const Tokenizer& t = SharedTokenizer(kLlama2File);
  StreamingDetokenizer stream(t);
  // <0xFF> can never start a character: replaced at once.
  EXPECT_EQ(stream.Feed(0xFF + 3), "\uFFFD");
  // <0xF0><0x9F> then "▁a": the held prefix is cut short, so one U+FFFD then " a".
  EXPECT_EQ(stream.Feed(243), "");
  EXPECT_EQ(stream.Feed(162), "");
  EXPECT_EQ(stream.Feed(263), "\uFFFD a");
  // A stray continuation byte.
  EXPECT_EQ(stream.Feed(0x80 + 3), "\uFFFD");
}

TEST(StreamingDetokenizerTest, FlushTurnsAnIncompleteCharacterIntoOneReplacement) {
  const Tokenizer& t = SharedTokenizer(kLlama2File);
  StreamingDetokenizer stream(t, /*decodes_sequence_start=*/true);
  EXPECT_EQ(stream.Feed(9038), "Once");  // the sequence's first token loses its space
  EXPECT_EQ(stream.Feed(243), "");
  EXPECT_EQ(stream.Feed(162), "");
  EXPECT_EQ(stream.Flush(), "\uFFFD");
  EXPECT_EQ(stream.pending_bytes(), 0u);
  // Ready for a new sequence.
  EXPECT_EQ(stream.Feed(9038), "Once");
  EXPECT_EQ(stream.Flush(), "");
}

TEST(StreamingDetokenizerTest, ControlAndOutOfRangeIdsEmitNothing) {
  const Tokenizer& t = SharedTokenizer(kLlama2File);
  StreamingDetokenizer stream(t);
  EXPECT_EQ(stream.Feed(1), "");
  EXPECT_EQ(stream.Feed(2), "");
  EXPECT_EQ(stream.Feed(-1), "");
  EXPECT_EQ(stream.Feed(32000), "");
  EXPECT_EQ(stream.Feed(263), " a");
}

TEST(StreamingDetokenizerTest, RandomIdsAlwaysGiveValidUtf8) {
  const Tokenizer& t = SharedTokenizer(kLlama2File);
  std::mt19937 rng(11);
  StreamingDetokenizer stream(t);
  std::string all;
  for (int i = 0; i < 5000; ++i) {
    // Mostly byte tokens, to produce many broken sequences.
    const int32_t id = rng() % 4 == 0 ? static_cast<int32_t>(rng() % 32010) - 5
                                      : static_cast<int32_t>(3 + rng() % 256);
    const std::string out = stream.Feed(id);
    ASSERT_EQ(ToValidUtf8(out), out);
    ASSERT_LE(stream.pending_bytes(), 3u);
    all += out;
  }
  all += stream.Flush();
  EXPECT_EQ(ToValidUtf8(all), all);
}

}  // namespace
}  // namespace bmad::tokenizer
