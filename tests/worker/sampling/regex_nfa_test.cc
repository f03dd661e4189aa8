// RegexNfa and RegexDfa: which texts a pattern matches whole (against std::regex for ASCII
// patterns and texts, where Python's `re` and ECMAScript agree), UTF-8 classes, dead prefixes,
// and the constructs refused by name.
#include "worker/sampling/regex_nfa.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "worker/sampling/regex_dfa.h"

namespace bmad::sampling {
namespace {

using ::testing::HasSubstr;

// The DFA's state after `text` (RegexDfa::kDead when no extension of it matches).
int32_t StateAfter(RegexDfa& dfa, std::string_view text) {
  int32_t state = dfa.start();
  for (const char c : text) state = dfa.Step(state, static_cast<uint8_t>(c));
  return state;
}

bool Matches(std::string_view pattern, std::string_view text) {
  Result<std::shared_ptr<const RegexNfa>> nfa = RegexNfa::Compile(pattern);
  EXPECT_TRUE(nfa.ok()) << pattern << ": " << nfa.status().ToString();
  if (!nfa.ok()) return false;
  RegexDfa dfa(*nfa);
  return dfa.accepting(StateAfter(dfa, text));
}

TEST(RegexNfa, MatchesWholeTexts) {
  struct Case {
    const char* pattern;
    std::vector<const char*> yes, no;
  };
  const std::vector<Case> cases = {
      {"yes|no", {"yes", "no"}, {"", "y", "yesno", "nope", " yes"}},
      {"\\d{3}-\\d{4}", {"555-1234"}, {"5551234", "555-123", "55a-1234"}},
      {"[A-Z][a-z]*", {"A", "Bob"}, {"", "bob", "BOB"}},
      {"(?:ab)+c?", {"ab", "ababc"}, {"", "a", "abcab"}},
      {"(?P<word>\\w+)@(\\w+)\\.com", {"me@site.com", "a_1@b.com"}, {"me@site.org", "@b.com"}},
      {"^a.c$", {"abc", "a c", "a\xC3\xA9" "c"}, {"a\nc", "ac"}},
      {"x{2,}", {"xx", "xxxxx"}, {"x", ""}},
      {"x{,2}", {"", "x", "xx"}, {"xxx"}},
      {"a{", {"a{"}, {"a"}},
      {"{x}", {"{x}"}, {"x"}},
      {"[^\"\\\\]*", {"", "plain text", "\xE6\x97\xA5"}, {"\"", "a\\b"}},
      {"[-a]|[a-]|[]a]", {"-", "a", "]"}, {"b"}},
      {"\\s*\\S+", {"  x", "x"}, {"  ", ""}},
      {"a*?b+?", {"b", "aab"}, {"a"}},
      {"\\x41\\u00e9\\.", {"A\xC3\xA9."}, {"Ae."}},
      {"", {""}, {"a"}},
      {"a|", {"a", ""}, {"b"}},
      {"\\012", {"\n"}, {"\0" "12"}},  // octal, as in Python
      {"[\\012]", {"\n"}, {"1", "2"}},
      {"\\101\\060[\\1\\12]", {"A0\x01", "A0\n"}, {"A0\x02"}},  // octal, as in Python
      {"x{,}", {"", "xxx"}, {"x{,}"}},
      {"x{}", {"x{}"}, {"x"}},
  };
  for (const Case& c : cases) {
    for (const char* text : c.yes) EXPECT_TRUE(Matches(c.pattern, text)) << c.pattern << " on '" << text << "'";
    for (const char* text : c.no) EXPECT_FALSE(Matches(c.pattern, text)) << c.pattern << " on '" << text << "'";
  }
}

// Agrees with std::regex_match (ECMAScript) on random ASCII texts without line breaks, where
// the two syntaxes mean the same.
TEST(RegexNfa, AgreesWithStdRegexOnRandomTexts) {
  const std::vector<std::string> patterns = {
      "a(b|c)*d?",   "[ab]{2,3}x*", "(a|ab)(c|bcd)", "\\d+(\\.\\d*)?", "[^a-c]+", "(x?y){1,3}",
      "\\w\\W\\s\\S", "(ab|a)*b",   "a{0}b",        ".*a.{2}",        "(a*)*b",  "-?\\d{1,2}",
  };
  const std::string alphabet = "abcdxy01. -_";
  std::mt19937 rng(7);
  for (const std::string& pattern : patterns) {
    Result<std::shared_ptr<const RegexNfa>> nfa = RegexNfa::Compile(pattern);
    ASSERT_TRUE(nfa.ok()) << pattern << ": " << nfa.status().ToString();
    RegexDfa dfa(*nfa);
    const std::regex oracle(pattern, std::regex::ECMAScript);
    for (int i = 0; i < 400; ++i) {
      std::string text(rng() % 7, ' ');
      for (char& ch : text) ch = alphabet[rng() % alphabet.size()];
      const int32_t end = StateAfter(dfa, text);
      const bool want = std::regex_match(text, oracle);
      ASSERT_EQ(dfa.accepting(end), want) << pattern << " on '" << text << "'";
      // A prefix of a match is never dead.
      if (want) {
        for (size_t k = 0; k <= text.size(); ++k) ASSERT_NE(StateAfter(dfa, text.substr(0, k)), RegexDfa::kDead);
      }
    }
  }
}

TEST(RegexNfa, ADeadPrefixIsKnownAtOnce) {
  Result<std::shared_ptr<const RegexNfa>> nfa = RegexNfa::Compile("ab[0-9]+");
  ASSERT_TRUE(nfa.ok());
  RegexDfa dfa(*nfa);
  EXPECT_NE(StateAfter(dfa, "ab"), RegexDfa::kDead);
  EXPECT_EQ(StateAfter(dfa, "ac"), RegexDfa::kDead);
  EXPECT_EQ(StateAfter(dfa, "abx"), RegexDfa::kDead);
  EXPECT_TRUE(dfa.HasNext(StateAfter(dfa, "ab1")));
  // An alternative through a class with nothing in it is dead from its start.
  Result<std::shared_ptr<const RegexNfa>> half = RegexNfa::Compile("x|a[^\\x00-\\U0010FFFF]");
  ASSERT_TRUE(half.ok()) << half.status().ToString();
  RegexDfa pruned(*half);
  EXPECT_EQ(StateAfter(pruned, "a"), RegexDfa::kDead);
  EXPECT_TRUE(pruned.accepting(StateAfter(pruned, "x")));
  Result<std::shared_ptr<const RegexNfa>> done = RegexNfa::Compile("ok");
  RegexDfa finished(*done);
  EXPECT_FALSE(finished.HasNext(StateAfter(finished, "ok")));
}

// Bytes no range tells apart share a class, and the DFA reads them alike: one transition is
// computed for the class and kept for each of its bytes.
TEST(RegexNfa, BytesNoRangeTellsApartShareAClass) {
  Result<std::shared_ptr<const RegexNfa>> nfa = RegexNfa::Compile("[b-d]x|e");
  ASSERT_TRUE(nfa.ok());
  const auto range = [&](uint8_t b) {
    const RegexNfa::ByteClass c = (*nfa)->ClassOf(b);
    return std::pair<int, int>(c.first, c.last);
  };
  EXPECT_EQ(range(0), (std::pair<int, int>(0, 'a')));
  EXPECT_EQ(range('a'), (std::pair<int, int>(0, 'a')));
  EXPECT_EQ(range('b'), (std::pair<int, int>('b', 'd')));
  EXPECT_EQ(range('d'), (std::pair<int, int>('b', 'd')));
  EXPECT_EQ(range('e'), (std::pair<int, int>('e', 'e')));
  EXPECT_EQ(range('f'), (std::pair<int, int>('f', 'w')));
  EXPECT_EQ(range('x'), (std::pair<int, int>('x', 'x')));
  EXPECT_EQ(range(255), (std::pair<int, int>('y', 255)));
  RegexDfa dfa(*nfa);
  const int32_t start = dfa.start();
  const int32_t after_c = dfa.Step(start, 'c');
  EXPECT_EQ(dfa.Known(start, 'b'), after_c);  // computed once for b, c and d
  EXPECT_EQ(dfa.Known(start, 'd'), after_c);
  EXPECT_EQ(dfa.Known(start, 'e'), RegexDfa::kUnknown);
  EXPECT_EQ(dfa.Step(start, 'q'), RegexDfa::kDead);
  EXPECT_EQ(dfa.Known(start, 'f'), RegexDfa::kDead);
}

TEST(RegexNfa, ClassesAndDotsCoverWholeUtf8Characters) {
  // é ê ë are C3 A9..AB; a range across encoded lengths; a dot takes 1 to 4 bytes.
  EXPECT_TRUE(Matches("[\xC3\xA9-\xC3\xAB]+", "\xC3\xA9\xC3\xAA\xC3\xAB"));
  EXPECT_FALSE(Matches("[\xC3\xA9-\xC3\xAB]", "\xC3\xA8"));
  EXPECT_TRUE(Matches("[a-\xE6\x97\xA5]", "\xDF\xBF"));  // U+07FF lies between
  EXPECT_TRUE(Matches("...", "a\xC3\xA9\xF0\x9F\x98\x80"));
  EXPECT_FALSE(Matches(".", "\xC3"));            // half a character
  EXPECT_FALSE(Matches(".", "\xED\xA0\x80"));    // a surrogate's encoding
  EXPECT_TRUE(Matches("[^a]", "\xE6\x97\xA5"));
  EXPECT_FALSE(Matches("[^a]", "a"));
  EXPECT_TRUE(Matches("\\W", "\xE6\x97\xA5"));  // \w is ASCII
}

TEST(RegexNfa, RefusesWhatItDoesNotSupportByName) {
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"a**", "repeats a repeat"},
      {"*a", "nothing to repeat"},
      {"(a", "missing a ')'"},
      {"a)", "unbalanced ')'"},
      {"[a", "unterminated '['"},
      {"(a)\\1", "backreference"},
      {"(?=a)", "lookarounds"},
      {"(?i)a", "'(?'"},
      {"a{2,1}", "m > n"},
      {"a{1001}", "more than 1000"},
      {"a^", "'^' other than at its start"},
      {"$a", "'$' other than at its end"},
      {"\\bword", "\\b"},
      {"[z-a]", "end comes before its start"},
      {"[a-\\d]", "range ending in a class"},
      {"\\", "lone backslash"},
      {"\\x4", "short hexadecimal"},
      {"\xC3", "not valid UTF-8"},
      {"(a{1000}){1000}", "more than 20000 automaton states"},
      {std::string(101, '(') + std::string(101, ')'), "nests groups"},
      {"[\\d-z]", "range starting with a class"},
      {"(?P<a)b>c)", "bad group name"},
      {"(?P<1a>c)", "bad group name"},
      {"[^\\s\\S]", "matches no text"},
      {"a[^\\x00-\\U0010FFFF]", "matches no text"},
      {"\\uD800", "matches no text"},  // a surrogate is no character
  };
  for (const auto& [pattern, words] : refused) {
    Result<std::shared_ptr<const RegexNfa>> nfa = RegexNfa::Compile(pattern);
    ASSERT_FALSE(nfa.ok()) << pattern;
    EXPECT_EQ(nfa.status().code(), StatusCode::kInvalidArgument) << pattern;
    EXPECT_THAT(nfa.status().message(), HasSubstr(words)) << pattern;
  }
}

TEST(RegexDfa, AnAutomatonThatOutgrowsItsCacheStartsOverAndStaysRight) {
  // [ab]*a[ab]{12}: the DFA must remember the last 13 letters, 8192 states, more than the
  // cache keeps: it starts over (new generations) and goes on matching right.
  Result<std::shared_ptr<const RegexNfa>> nfa = RegexNfa::Compile("[ab]*a[ab]{12}");
  ASSERT_TRUE(nfa.ok());
  RegexDfa dfa(*nfa);
  std::mt19937 rng(3);
  int32_t state = dfa.start();
  std::string text;
  for (int i = 0; i < 20000; ++i) {
    const char c = rng() % 2 ? 'a' : 'b';
    text += c;
    state = dfa.Step(state, static_cast<uint8_t>(c));
    ASSERT_NE(state, RegexDfa::kDead) << i;
    const bool want = text.size() >= 13 && text[text.size() - 13] == 'a';
    ASSERT_EQ(dfa.accepting(state), want) << i;
  }
  EXPECT_GT(dfa.generation(), 0u);
}

}  // namespace
}  // namespace bmad::sampling
