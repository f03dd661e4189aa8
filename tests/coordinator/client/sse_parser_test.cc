#include "coordinator/client/sse_parser.h"

#include <gtest/gtest.h>

#include <random>

namespace bmad::client {
namespace {

struct Collected {
  std::vector<SseEvent> events;
  SseParser parser{[this](const SseEvent& e) { events.push_back(e); }};
};

std::vector<std::string> Data(const std::vector<SseEvent>& events) {
  std::vector<std::string> out;
  for (const SseEvent& e : events) out.push_back(e.data);
  return out;
}

TEST(SseParserTest, ParsesEventsCommentsAndMultiLineData) {
  Collected c;
  ASSERT_TRUE(c.parser.Feed(": keep-alive\n\n"
                            "data: {\"a\":1}\n\n"
                            "event: update\ndata: line one\ndata:line two\nid: 7\nretry: 10\n\n"
                            "data\n\n"
                            "data: [DONE]\n\n").ok());
  ASSERT_EQ(c.events.size(), 4u);
  EXPECT_EQ(Data(c.events), (std::vector<std::string>{"{\"a\":1}", "line one\nline two", "",
                                                      "[DONE]"}));
  EXPECT_EQ(c.events[1].type, "update");
  EXPECT_EQ(c.events[2].type, "") << "the event type resets after each dispatch";
  EXPECT_EQ(c.parser.events(), 4u);
}

TEST(SseParserTest, AnErrorFieldBecomesAnErrorEvent) {
  Collected c;
  ASSERT_TRUE(c.parser.Feed("data: {}\n\nerror: {\"message\":\"boom\"}\n\n").ok());
  ASSERT_EQ(c.events.size(), 2u);
  EXPECT_EQ(c.events[0].type, "");
  EXPECT_EQ(c.events[1].type, "error");
  EXPECT_EQ(c.events[1].data, "{\"message\":\"boom\"}");
}

TEST(SseParserTest, EveryLineEndingAndEverySplitGiveTheSameEvents) {
  const std::string lf = "data: one\n\ndata: two\ndata: more\n\n: c\ndata: three\n\n";
  const std::string crlf = "data: one\r\n\r\ndata: two\r\ndata: more\r\n\r\n: c\r\ndata: three\r\n\r\n";
  const std::string cr = "data: one\r\rdata: two\rdata: more\r\r: c\rdata: three\r\r";
  const std::vector<std::string> expected = {"one", "two\nmore", "three"};
  for (const std::string& stream : {lf, crlf, cr}) {
    for (size_t split = 0; split <= stream.size(); ++split) {
      Collected c;
      ASSERT_TRUE(c.parser.Feed(stream.substr(0, split)).ok());
      ASSERT_TRUE(c.parser.Feed(stream.substr(split)).ok());
      ASSERT_TRUE(c.parser.Finish().ok());
      EXPECT_EQ(Data(c.events), expected) << "split at " << split;
    }
  }
  // One byte at a time.
  Collected c;
  for (char ch : crlf) ASSERT_TRUE(c.parser.Feed(std::string_view(&ch, 1)).ok());
  EXPECT_EQ(Data(c.events), expected);
}

TEST(SseParserTest, ALeadingByteOrderMarkIsDroppedWhereverTheChunksSplitIt) {
  // WHATWG: one BOM at the stream's start is not part of the first line (the first event was
  // lost: its field read "\xEF\xBB\xBFdata").
  const std::string stream = "\xEF\xBB\xBF" "data: one\n\ndata: two\n\n";
  for (size_t split = 0; split <= stream.size(); ++split) {
    Collected c;
    ASSERT_TRUE(c.parser.Feed(stream.substr(0, split)).ok());
    ASSERT_TRUE(c.parser.Feed(stream.substr(split)).ok());
    EXPECT_EQ(Data(c.events), (std::vector<std::string>{"one", "two"})) << "split at " << split;
  }
  // Only at the start, and only a whole one: bytes that begin like one are text.
  Collected later;
  ASSERT_TRUE(later.parser.Feed("data: one\n\n\xEF\xBB\xBF" "data: two\n\n").ok());
  EXPECT_EQ(Data(later.events), (std::vector<std::string>{"one"}));
  Collected partial;
  ASSERT_TRUE(partial.parser.Feed("\xEF\xBB").ok());
  ASSERT_TRUE(partial.parser.Feed(": comment\ndata: x\n\n").ok());
  EXPECT_EQ(Data(partial.events), (std::vector<std::string>{"x"}));
  Collected text;  // "\xEF\xBB" then not the mark's last byte: the line keeps them
  ASSERT_TRUE(text.parser.Feed("\xEF\xBB" "data: y\n\ndata: z\n\n").ok());
  EXPECT_EQ(Data(text.events), (std::vector<std::string>{"z"}));
}

TEST(SseParserTest, FinishDispatchesCompleteLinesButDropsAPartialOne) {
  Collected complete;
  ASSERT_TRUE(complete.parser.Feed("data: [DONE]\n").ok());
  EXPECT_TRUE(complete.events.empty());
  ASSERT_TRUE(complete.parser.Finish().ok());
  EXPECT_EQ(Data(complete.events), (std::vector<std::string>{"[DONE]"}));

  Collected partial;
  ASSERT_TRUE(partial.parser.Feed("data: {\"trunc").ok());
  ASSERT_TRUE(partial.parser.Finish().ok());
  EXPECT_TRUE(partial.events.empty());
}

TEST(SseParserTest, OversizedLinesAndEventsAreErrorsThatStick) {
  std::vector<SseEvent> events;
  SseParser parser([&](const SseEvent& e) { events.push_back(e); }, /*max_event_bytes=*/64);
  Status s = parser.Feed(std::string(100, 'x'));
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_EQ(parser.Feed("data: fine\n\n").code(), StatusCode::kDataLoss);
  EXPECT_EQ(parser.Finish().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(events.empty());

  SseParser many_lines([&](const SseEvent& e) { events.push_back(e); }, 64);
  Status grown;
  for (int i = 0; i < 20 && grown.ok(); ++i) grown = many_lines.Feed("data: 0123456789\n");
  EXPECT_EQ(grown.code(), StatusCode::kDataLoss);
}

TEST(SseParserTest, RandomBytesNeverCrash) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 200; ++round) {
    size_t count = 0;
    SseParser parser([&](const SseEvent&) { ++count; }, 1024);
    std::string bytes(rng() % 2048, '\0');
    for (char& b : bytes) b = "data: \r\n:x{}"[rng() % 12];
    (void)parser.Feed(bytes);
    (void)parser.Finish();
    EXPECT_LE(count, bytes.size());
  }
}

}  // namespace
}  // namespace bmad::client
