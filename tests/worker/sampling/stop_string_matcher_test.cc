#include "worker/sampling/stop_string_matcher.h"

#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "worker/sampling/sampling_params_validation.h"

namespace bmad::sampling {
namespace {

struct Streamed {
  std::string text;            // everything emitted, Flush included when not stopped
  std::vector<std::string> pieces;
  bool stopped = false;
  int32_t stop_index = -1;
};

// Feeds `chunks` in order, then flushes unless a stop string was hit.
Streamed Stream(const std::vector<std::string>& stops, const std::vector<std::string>& chunks,
                bool include_stop = false) {
  StopStringMatcher matcher(stops, include_stop);
  Streamed out;
  for (const std::string& chunk : chunks) {
    StopFeedResult r = matcher.Feed(chunk);
    if (out.stopped) {
      EXPECT_TRUE(r.text.empty()) << "text emitted after a stop";
      EXPECT_TRUE(r.stopped);
      EXPECT_EQ(r.stop_index, out.stop_index);
      continue;
    }
    out.text += r.text;
    out.pieces.push_back(r.text);
    if (r.stopped) {
      out.stopped = true;
      out.stop_index = r.stop_index;
    }
  }
  if (out.stopped) {
    EXPECT_EQ(matcher.Flush(), "");
  } else {
    out.pieces.push_back(matcher.Flush());
    out.text += out.pieces.back();
  }
  return out;
}

// The reference: the first stop string to be complete (smallest end; at equal ends the earliest
// start, then the lowest index), output truncated before it (after it with include_stop).
Streamed Reference(const std::vector<std::string>& stops, const std::string& text,
                   bool include_stop = false) {
  Streamed out;
  for (size_t end = 1; end <= text.size(); ++end) {
    size_t best_start = std::string::npos;
    for (size_t i = 0; i < stops.size(); ++i) {
      const std::string& s = stops[i];
      if (s.empty() || s.size() > end || text.compare(end - s.size(), s.size(), s) != 0) continue;
      if (best_start == std::string::npos || end - s.size() < best_start) {
        best_start = end - s.size();
        out.stop_index = static_cast<int32_t>(i);
      }
    }
    if (best_start != std::string::npos) {
      out.text = text.substr(0, include_stop ? end : best_start);
      out.stopped = true;
      return out;
    }
  }
  out.text = text;
  return out;
}

std::vector<std::string> Bytes(const std::string& text) {
  std::vector<std::string> chunks;
  for (char c : text) chunks.emplace_back(1, c);
  return chunks;
}

TEST(StopStringMatcher, WithoutStopStringsTextPassesStraightThrough) {
  StopStringMatcher matcher({});
  EXPECT_EQ(matcher.Feed("Hello").text, "Hello");
  EXPECT_EQ(matcher.Feed("\xC3").text, "\xC3");  // even half a character: nothing is held
  EXPECT_EQ(matcher.held_bytes(), 0u);
  EXPECT_FALSE(matcher.Feed("\xA9").stopped);
  EXPECT_EQ(matcher.Flush(), "");
  StopStringMatcher only_empty({""});
  EXPECT_EQ(only_empty.Feed("abc").text, "abc");
}

TEST(StopStringMatcher, StopsBeforeTheStopStringInOneChunk) {
  StopStringMatcher matcher({"world"});
  StopFeedResult r = matcher.Feed("Hello world, and more");
  EXPECT_EQ(r.text, "Hello ");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.stop_index, 0);
  EXPECT_TRUE(matcher.stopped());
  r = matcher.Feed("later text");
  EXPECT_EQ(r.text, "");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(matcher.Flush(), "");
}

TEST(StopStringMatcher, IncludedTheOutputEndsRightAfterTheStopString) {
  StopStringMatcher matcher({"world"}, /*include_stop=*/true);
  StopFeedResult r = matcher.Feed("Hello world, and more");
  EXPECT_EQ(r.text, "Hello world");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(matcher.Feed("later").text, "");

  StopStringMatcher split({"STOP"}, true);
  EXPECT_EQ(split.Feed("abc ST").text, "abc ");  // still held back: it may not complete
  r = split.Feed("OP!");
  EXPECT_EQ(r.text, "STOP");
  EXPECT_TRUE(r.stopped);

  // Begun in unchecked text (min_tokens): its beginning was held back, and all of it goes out.
  StopStringMatcher sent({"END"}, true);
  EXPECT_EQ(sent.FeedUnchecked("then E").text, "then ");
  r = sent.Feed("ND and more");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "END");
}

TEST(StopStringMatcher, HoldsBackAPossibleStopStringAcrossFeeds) {
  StopStringMatcher matcher({"STOP"});
  EXPECT_EQ(matcher.Feed("abc S").text, "abc ");
  EXPECT_EQ(matcher.held_bytes(), 1u);
  EXPECT_EQ(matcher.Feed("T").text, "");
  EXPECT_EQ(matcher.Feed("O").text, "");
  EXPECT_EQ(matcher.held_bytes(), 3u);
  StopFeedResult r = matcher.Feed("P!");
  EXPECT_EQ(r.text, "");
  EXPECT_TRUE(r.stopped);
}

TEST(StopStringMatcher, ReleasesHeldTextWhenItCannotBecomeAStopString) {
  StopStringMatcher matcher({"STOP"});
  EXPECT_EQ(matcher.Feed("ST").text, "");
  EXPECT_EQ(matcher.Feed("OX").text, "STOX");
  EXPECT_EQ(matcher.Feed("S").text, "");
  EXPECT_EQ(matcher.Flush(), "S");  // generation ended for another reason
  EXPECT_FALSE(matcher.stopped());
}

TEST(StopStringMatcher, OverlappingPrefixes) {
  // "ab" completes before "abc" could: the first complete one wins.
  EXPECT_EQ(Stream({"abc", "ab"}, Bytes("xxabc")).text, "xx");
  EXPECT_EQ(Stream({"abc", "ab"}, Bytes("xxabc")).stop_index, 1);
  // A self-overlapping stop string: "aab" inside "aaab" starts at 1.
  Streamed aab = Stream({"aab"}, Bytes("aaaab"));
  EXPECT_EQ(aab.text, "aa");
  EXPECT_TRUE(aab.stopped);
  EXPECT_EQ(Stream({"aab"}, {"aa", "a", "ab"}).text, "aa");  // "aaaab"
  // Equal ends: the longer one, which starts first, wins.
  Streamed suffix = Stream({"bc", "abc"}, {"xa", "bc"});
  EXPECT_EQ(suffix.text, "x");
  EXPECT_EQ(suffix.stop_index, 1);
}

TEST(StopStringMatcher, AStopStringInsideAnotherStopsWhenItCompletes) {
  // Generation would halt after "ab", before "c" exists: documented semantics.
  Streamed r = Stream({"abc", "b"}, {"abc"});
  EXPECT_EQ(r.text, "a");
  EXPECT_EQ(r.stop_index, 1);
}

TEST(StopStringMatcher, EmptyStopStringsAreIgnoredAndIndicesStayOriginal) {
  Streamed r = Stream({"", "end"}, {"the e", "nd"});
  EXPECT_EQ(r.text, "the ");
  EXPECT_EQ(r.stop_index, 1);
}

TEST(StopStringMatcher, MultiByteStopStrings) {
  // "終" is E7 B5 82; the stop is "終わり".
  Streamed r = Stream({"終わり"}, Bytes("物語の終わりです"));
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "物語の");
  // A shared first byte with a different character: "絵" is E7 B5 B5.
  Streamed near = Stream({"終わり"}, {"物語の絵", "です"});
  EXPECT_FALSE(near.stopped);
  EXPECT_EQ(near.text, "物語の絵です");
}

TEST(StopStringMatcher, HoldingBackNeverSplitsACharacter) {
  StopStringMatcher matcher({"é!"});
  StopFeedResult r = matcher.Feed("café");
  EXPECT_EQ(r.text, "caf");  // the whole "é" is held, not half of it
  EXPECT_EQ(matcher.held_bytes(), 2u);
  EXPECT_EQ(matcher.Feed("?").text, "é?");
}

// Randomized: streamed output over random chunkings equals the whole-text reference.
void ExpectRandomChunkingsMatchTheReference(bool include_stop) {
  std::mt19937_64 rng(11);
  const std::string alphabet = "abc";
  auto random_string = [&](size_t min_len, size_t max_len) {
    std::string s(min_len + rng() % (max_len - min_len + 1), ' ');
    for (char& c : s) c = alphabet[rng() % alphabet.size()];
    return s;
  };
  for (int trial = 0; trial < 20000; ++trial) {
    std::vector<std::string> stops(1 + rng() % 4);
    for (std::string& s : stops) s = random_string(1, 4);
    const std::string text = random_string(0, 40);
    std::vector<std::string> chunks;
    for (size_t at = 0; at < text.size();) {
      const size_t len = std::min(text.size() - at, static_cast<size_t>(rng() % 6));  // may be 0
      chunks.push_back(text.substr(at, len));
      at += len;
    }
    const Streamed expected = Reference(stops, text, include_stop);
    const Streamed got = Stream(stops, chunks, include_stop);
    ASSERT_EQ(got.text, expected.text) << "trial " << trial << " text " << text;
    ASSERT_EQ(got.stopped, expected.stopped) << "trial " << trial;
    ASSERT_EQ(got.stop_index, expected.stop_index) << "trial " << trial;
  }
}

TEST(StopStringMatcher, RandomChunkingsMatchTheReference) { ExpectRandomChunkingsMatchTheReference(false); }

TEST(StopStringMatcher, RandomChunkingsMatchTheReferenceWithTheStopStringIncluded) {
  ExpectRandomChunkingsMatchTheReference(true);
}

// Randomized over multi-byte characters fed at character boundaries: every emitted piece is valid
// UTF-8, and the result still equals the reference.
TEST(StopStringMatcher, RandomMultiByteTextIsEmittedInWholeCharacters) {
  std::mt19937_64 rng(12);
  const std::vector<std::string> chars = {"a", "é", "終", "わ", "🛑", "\xC3\xA8"};
  auto random_chars = [&](size_t min_len, size_t max_len, std::vector<std::string>* pieces) {
    std::string s;
    const size_t n = min_len + rng() % (max_len - min_len + 1);
    for (size_t i = 0; i < n; ++i) {
      const std::string& c = chars[rng() % chars.size()];
      s += c;
      if (pieces) pieces->push_back(c);
    }
    return s;
  };
  for (int trial = 0; trial < 5000; ++trial) {
    std::vector<std::string> stops(1 + rng() % 3);
    for (std::string& s : stops) s = random_chars(1, 3, nullptr);
    std::vector<std::string> characters;
    const std::string text = random_chars(0, 25, &characters);
    std::vector<std::string> chunks;
    for (size_t at = 0; at < characters.size();) {
      const size_t len = std::min(characters.size() - at, static_cast<size_t>(1 + rng() % 3));
      std::string chunk;
      for (size_t i = at; i < at + len; ++i) chunk += characters[i];
      chunks.push_back(chunk);
      at += len;
    }
    const Streamed got = Stream(stops, chunks);
    const Streamed expected = Reference(stops, text);
    ASSERT_EQ(got.text, expected.text) << "trial " << trial;
    ASSERT_EQ(got.stopped, expected.stopped) << "trial " << trial;
    for (const std::string& piece : got.pieces) {
      ASSERT_TRUE(IsValidUtf8(piece)) << "trial " << trial << " split a character";
    }
  }
}

// Arbitrary bytes, including invalid UTF-8 in the text and the stop strings: never a crash, and
// the streamed result still equals the reference.
TEST(StopStringMatcher, InvalidUtf8IsMatchedByteForByte) {
  std::mt19937_64 rng(13);
  const std::string alphabet = std::string("a\x80\xC3\xA9\xE7\xFF", 6);
  auto random_string = [&](size_t min_len, size_t max_len) {
    std::string s(min_len + rng() % (max_len - min_len + 1), ' ');
    for (char& c : s) c = alphabet[rng() % alphabet.size()];
    return s;
  };
  for (int trial = 0; trial < 10000; ++trial) {
    std::vector<std::string> stops(1 + rng() % 3);
    for (std::string& s : stops) s = random_string(1, 4);
    const std::string text = random_string(0, 30);
    std::vector<std::string> chunks;
    for (size_t at = 0; at < text.size();) {
      const size_t len = std::min(text.size() - at, static_cast<size_t>(1 + rng() % 4));
      chunks.push_back(text.substr(at, len));
      at += len;
    }
    const Streamed got = Stream(stops, chunks);
    const Streamed expected = Reference(stops, text);
    ASSERT_EQ(got.text, expected.text) << "trial " << trial;
    ASSERT_EQ(got.stopped, expected.stopped) << "trial " << trial;
  }
}

TEST(StopStringMatcher, AStopStringMayBeginInUncheckedTextAndNothingOfItIsSent) {
  // Text fed before stops count (min_tokens) holds back a possible beginning as Feed does; a stop
  // completed later cuts the output where it begins, as vLLM does. (The beginning used to be
  // sent at once, and the output kept "then E" of a stop "END".)
  StopStringMatcher matcher({"END", "xyz"});
  StopFeedResult r = matcher.FeedUnchecked("lots of text, then E");
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(r.text, "lots of text, then ");
  r = matcher.Feed("ND and more");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.stop_index, 0);
  EXPECT_EQ(r.text, "");

  StopStringMatcher later({"END"});
  EXPECT_EQ(later.FeedUnchecked("E").text, "");
  EXPECT_EQ(later.FeedUnchecked("N").text, "");  // held across calls
  EXPECT_EQ(later.held_bytes(), 2u);
  r = later.Feed("D!");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "");

  StopStringMatcher none({"END"});
  EXPECT_EQ(none.FeedUnchecked("the E").text, "the ");
  r = none.Feed("nd: E");  // no hit; the new "E" may still begin one
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(r.text, "End: ");
  r = none.Feed("NDING");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "");

  StopStringMatcher flushed({"END"});
  EXPECT_EQ(flushed.FeedUnchecked("sent E").text, "sent ");
  EXPECT_EQ(flushed.Flush(), "E");  // a length finish: what was held back is output after all

  StopStringMatcher included({"END"}, true);
  EXPECT_EQ(included.FeedUnchecked("then EN").text, "then ");
  r = included.Feed("D.");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "END");
}

TEST(StopStringMatcher, AStopStringEndingInUncheckedTextEndsNothing) {
  // It was no stop then, and is none now, whether it was released or is still held beside a
  // longer stop it begins. The next "," is.
  StopStringMatcher matcher({",", "zebra"});
  EXPECT_EQ(matcher.FeedUnchecked(",").text, ",");
  StopFeedResult r = matcher.Feed(" there");
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(r.text, " there");
  r = matcher.Feed(" was, a");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.stop_index, 0);
  EXPECT_EQ(r.text, " was");

  StopStringMatcher prefix({"ab", "abc"});
  EXPECT_EQ(prefix.FeedUnchecked("ab").text, "");  // may still become "abc"
  r = prefix.Feed("x");
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(r.text, "abx");
  StopStringMatcher longer({"ab", "abc"});
  EXPECT_EQ(longer.FeedUnchecked("ab").text, "");
  r = longer.Feed("c");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.stop_index, 1);
  EXPECT_EQ(r.text, "");

  // One that straddles the unchecked text and the new still counts.
  StopStringMatcher straddle({",", "zebra"});
  EXPECT_EQ(straddle.FeedUnchecked("ze").text, "");
  r = straddle.Feed("bra!");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.stop_index, 1);
  EXPECT_EQ(r.text, "");
}

}  // namespace
}  // namespace bmad::sampling
