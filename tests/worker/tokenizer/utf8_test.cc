#include "worker/model/tokenizer/utf8.h"

#include <gtest/gtest.h>

namespace bmad::tokenizer {
namespace {

using namespace std::literals;

TEST(Utf8Test, SentencePieceLengthLooksAtTheLeadByteOnly) {
  EXPECT_EQ(SentencePieceCharLength('a'), 1u);
  EXPECT_EQ(SentencePieceCharLength(0x00), 1u);
  EXPECT_EQ(SentencePieceCharLength(0x80), 1u);  // a stray continuation byte
  EXPECT_EQ(SentencePieceCharLength(0xBF), 1u);
  EXPECT_EQ(SentencePieceCharLength(0xC0), 2u);  // overlong lead, still 2
  EXPECT_EQ(SentencePieceCharLength(0xC3), 2u);
  EXPECT_EQ(SentencePieceCharLength(0xE2), 3u);
  EXPECT_EQ(SentencePieceCharLength(0xF0), 4u);
  EXPECT_EQ(SentencePieceCharLength(0xFF), 4u);  // invalid, still 4
}

void ExpectScan(std::string_view bytes, Utf8Status status, size_t length) {
  const Utf8Scan scan = ScanUtf8(bytes);
  EXPECT_EQ(scan.status, status) << "bytes of length " << bytes.size();
  EXPECT_EQ(scan.length, length) << "bytes of length " << bytes.size();
}

TEST(Utf8Test, ScanRecognisesCompleteCharacters) {
  ExpectScan("a", Utf8Status::kComplete, 1);
  ExpectScan("\0"sv, Utf8Status::kComplete, 1);
  ExpectScan("\u00e9x", Utf8Status::kComplete, 2);
  ExpectScan("\u4e2d", Utf8Status::kComplete, 3);
  ExpectScan("\U0001F642", Utf8Status::kComplete, 4);
  ExpectScan("\U0010FFFF", Utf8Status::kComplete, 4);
  ExpectScan("\xED\x9F\xBF", Utf8Status::kComplete, 3);  // U+D7FF, just below the surrogates
}

TEST(Utf8Test, ScanHoldsValidPrefixes) {
  ExpectScan("\xC3", Utf8Status::kIncomplete, 1);
  ExpectScan("\xE4\xB8", Utf8Status::kIncomplete, 2);
  ExpectScan("\xF0\x9F\x99", Utf8Status::kIncomplete, 3);
}

TEST(Utf8Test, ScanRejectsWhatCanNeverBeACharacter) {
  ExpectScan("\x80", Utf8Status::kInvalid, 1);      // continuation byte first
  ExpectScan("\xC0\xAF", Utf8Status::kInvalid, 1);  // overlong lead
  ExpectScan("\xC1\xBF", Utf8Status::kInvalid, 1);
  ExpectScan("\xF5\x80\x80\x80", Utf8Status::kInvalid, 1);  // above U+10FFFF
  ExpectScan("\xFF", Utf8Status::kInvalid, 1);
  ExpectScan("\xE0\x80\x80", Utf8Status::kInvalid, 1);  // overlong 3-byte form
  ExpectScan("\xED\xA0\x80", Utf8Status::kInvalid, 1);  // a surrogate
  ExpectScan("\xF0\x80\x80\x80", Utf8Status::kInvalid, 1);
  ExpectScan("\xF4\x90\x80\x80", Utf8Status::kInvalid, 1);
  ExpectScan(
      "\xC3"
      "A",
      Utf8Status::kInvalid, 1);  // cut short by ASCII
  ExpectScan(
      "\xF0\x9F\x99"
      "A",
      Utf8Status::kInvalid, 3);
}

TEST(Utf8Test, ToValidUtf8ReplacesEachMaximalInvalidPart) {
  EXPECT_EQ(ToValidUtf8("plain \u00e9\U0001F642"), "plain \u00e9\U0001F642");
  EXPECT_EQ(ToValidUtf8("a\xFF"
                        "b"),
            "a\uFFFD"
            "b");
  EXPECT_EQ(ToValidUtf8("\xF0\x9F\x99"
                        "A"),
            "\uFFFD"
            "A");
  EXPECT_EQ(ToValidUtf8("\xE4\xB8"), "\uFFFD");
  EXPECT_EQ(ToValidUtf8("\x80\x80"), "\uFFFD\uFFFD");
  EXPECT_EQ(ToValidUtf8(""), "");
}

// Text from a file or a client in an error message: a NUL must not end the message early (it did
// through printf: "architecture 'llama" for "llama\0..."), nor an ESC reach the terminal.
TEST(Utf8Test, QuotedTextEscapesControlBytesAndInvalidUtf8) {
  EXPECT_EQ(QuotedText("llama"), "'llama'");
  EXPECT_EQ(QuotedText(std::string_view("llama\0x", 7)), "'llama\\x00x'");
  EXPECT_EQ(QuotedText("a\x1B[2K\rb\x7F"), "'a\\x1B[2K\\x0Db\\x7F'");
  EXPECT_EQ(QuotedText("\u00e9\U0001F642 \xFF\xE4\xB8"), "'\u00e9\U0001F642 \\xFF\\xE4\\xB8'");
  EXPECT_EQ(QuotedText(""), "''");
  EXPECT_TRUE(IsPrintableText("blk.0.attn_q.weight"));
  EXPECT_TRUE(IsPrintableText("\u2581the"));
  EXPECT_FALSE(IsPrintableText(std::string_view("blk.0.attn_q.weight\0", 20)));
  EXPECT_FALSE(IsPrintableText("tab\there"));
  EXPECT_FALSE(IsPrintableText("\xC3"));
}

}  // namespace
}  // namespace bmad::tokenizer
