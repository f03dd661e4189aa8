// JsonAutomaton against hand-picked texts, and against nlohmann's parser on a hundred thousand
// random, partly broken JSON texts: it refuses no byte of a valid text, accepts nothing
// nlohmann refuses, and refuses a bad text no later than nlohmann does.
#include "worker/sampling/json_automaton.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "tests/support/json_verdict.h"

namespace bmad::sampling {
namespace {

using testing::JsonVerdict;
using TopLevel = JsonAutomaton::TopLevel;

// The index of the first byte refused, or text.size() when none is.
size_t FirstRefused(std::string_view text, TopLevel top = TopLevel::kAnyValue, JsonAutomaton* out = nullptr) {
  JsonAutomaton a(top);
  for (size_t i = 0; i < text.size(); ++i) {
    if (!a.Feed(static_cast<uint8_t>(text[i]))) return i;
  }
  if (out) *out = a;
  return text.size();
}

bool Whole(std::string_view text, TopLevel top = TopLevel::kAnyValue) {
  JsonAutomaton a(top);
  return FirstRefused(text, top, &a) == text.size() && a.complete();
}

TEST(JsonAutomaton, AcceptsValidTextsAndCompletesOnlyAtTheirEnd) {
  const std::vector<std::string> texts = {
      R"({})",
      R"({"a":1})",
      "{\n  \"key\" : [1, -2.5e+10, 0, -0, 0.125E-3, true, false, null],\t\"s\": \"x\"\r\n}",
      R"({"nested":{"a":[[],{},[{"b":[null]}]]},"e":""})",
      R"({"esc":"\" \\ \/ \b \f \n \r \t \u00e9 \uD83D\uDE00"})",
      "{\"utf8\":\"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xEF\xBF\xBF \xF4\x8F\xBF\xBF\"}",
      R"({"":""})",
  };
  for (const std::string& text : texts) {
    JsonAutomaton a(TopLevel::kObject);
    for (size_t i = 0; i < text.size(); ++i) {
      EXPECT_FALSE(a.complete()) << text << " complete before byte " << i;
      ASSERT_TRUE(a.Feed(static_cast<uint8_t>(text[i]))) << text << " refused at " << i;
    }
    EXPECT_TRUE(a.complete()) << text;
    EXPECT_EQ(testing::JudgeJson(text), JsonVerdict::kWhole) << text;
  }
}

TEST(JsonAutomaton, RefusesAtTheFirstByteNoTextCanHave) {
  const std::vector<std::pair<std::string, size_t>> cases = {
      {R"({"a" 1})", 5},        {R"({"a":})", 5},       {R"({a:1})", 1},
      {R"({"a":1,})", 7},       {R"({"a":01})", 6},     {R"({"a":1.})", 7},
      {R"({"a":1.e5})", 7},     {R"({"a":-})", 6},      {R"({"a":+1})", 5},
      {R"({"a":1e})", 7},       {R"({"a":.5})", 5},     {R"({"a":tru})", 8},
      {R"({"a":nul1})", 8},     {R"({"a":[1,]})", 8},   {R"({"a":[1}})", 7},
      {R"({"a":{]})", 6},       {R"({"a":1}})", 7},
      {R"({"a":"\x"})", 7},     {R"({"a":"\u12G4"})", 10},
      {"{\"a\":\"\x01\"}", 6},  {"{\"a\":\"\n\"}", 6},
      // Lone and mismatched surrogate escapes: refused at the second hex digit.
      {R"({"a":"\uDC00"})", 9}, {R"({"a":"\uD800"})", 12}, {R"({"a":"\uD800\n"})", 13},
      {R"({"a":"\uD800\u0041"})", 14}, {R"({"a":"\uD800\uD800"})", 15},
      // UTF-8: a stray continuation byte, overlong forms, a surrogate, beyond U+10FFFF.
      {"{\"a\":\"\x80\"}", 6},  {"{\"a\":\"\xC0\xAF\"}", 6}, {"{\"a\":\"\xE0\x80\x80\"}", 7},
      {"{\"a\":\"\xED\xA0\x80\"}", 7}, {"{\"a\":\"\xF4\x90\x80\x80\"}", 7},
      {"{\"a\":\"\xF5\"}", 6},  {"{\"a\":\"\xC3\"}", 7},
  };
  for (const auto& [text, refused_at] : cases) {
    EXPECT_EQ(FirstRefused(text, TopLevel::kObject), refused_at) << text;
    EXPECT_EQ(testing::JudgeJson(text), JsonVerdict::kInvalid) << text;
  }
}

TEST(JsonAutomaton, AnObjectIsTheOnlyTopLevelValueInObjectMode) {
  for (const char* text : {"[]", "\"a\"", "1", "true", "null"}) {
    EXPECT_EQ(FirstRefused(text, TopLevel::kObject), 0u) << text;
    EXPECT_TRUE(Whole(text, TopLevel::kAnyValue)) << text;
  }
  EXPECT_EQ(FirstRefused(" {}", TopLevel::kObject), 0u);  // nothing before it either
  EXPECT_EQ(FirstRefused("{} ", TopLevel::kObject), 2u);  // nothing after it, not even whitespace
  EXPECT_EQ(FirstRefused(" 1", TopLevel::kAnyValue), 0u);
  JsonAutomaton a(TopLevel::kObject);
  EXPECT_TRUE(a.at_start());
  EXPECT_TRUE(a.Feed("{"));
  EXPECT_FALSE(a.at_start());
}

TEST(JsonAutomaton, ATopLevelNumberIsCompleteYetCanGoOn) {
  JsonAutomaton a(TopLevel::kAnyValue);
  EXPECT_TRUE(a.Feed("12"));
  EXPECT_TRUE(a.complete());
  EXPECT_TRUE(a.Feed("."));
  EXPECT_FALSE(a.complete());
  EXPECT_TRUE(a.Feed("5"));
  EXPECT_TRUE(a.complete());
  EXPECT_FALSE(JsonAutomaton(a).Feed(" "));  // nothing after the value, not even whitespace
}

TEST(JsonAutomaton, NestingAndWhitespaceAreBounded) {
  const int depth = JsonAutomaton::kMaxDepth;
  std::string deep = "{\"a\":" + std::string(static_cast<size_t>(depth - 1), '[');
  deep += std::string(static_cast<size_t>(depth - 1), ']') + "}";
  EXPECT_TRUE(Whole(deep, TopLevel::kObject));
  std::string too_deep = "{\"a\":" + std::string(static_cast<size_t>(depth), '[');
  EXPECT_EQ(FirstRefused(too_deep, TopLevel::kObject), too_deep.size() - 1);

  const std::string run(JsonAutomaton::kMaxWhitespaceRun, ' ');
  EXPECT_TRUE(Whole("{" + run + "\"a\"" + run + ":" + run + "1" + run + "}", TopLevel::kObject));
  EXPECT_EQ(FirstRefused("{" + run + " \"a\":1}", TopLevel::kObject), run.size() + 1);
  // Inside strings spaces are text, not limited.
  EXPECT_TRUE(Whole("{\"" + run + run + "\":1}", TopLevel::kObject));
}

// vLLM's disable_any_whitespace: none between tokens; inside strings spaces are text.
TEST(JsonAutomaton, CompactTakesNoWhitespaceOutsideStrings) {
  const auto refused = [](std::string_view text) {
    JsonAutomaton a(TopLevel::kObject, /*compact=*/true);
    for (size_t i = 0; i < text.size(); ++i) {
      if (!a.Feed(static_cast<uint8_t>(text[i]))) return i;
    }
    return a.complete() ? text.size() : text.size() + 1;
  };
  EXPECT_EQ(refused(R"({"a b":[1,"c d",{"e":null}]})"), 28u);
  for (const std::string_view spaced : {R"({ "a":1})", R"({"a" :1})", R"({"a": 1})", R"({"a":1 })", "{\"a\":[1,\n2]}"}) {
    EXPECT_LT(refused(spaced), spaced.size()) << spaced;
  }
  EXPECT_EQ(refused("{\"a\":1\t}"), 6u);
}

// Random JSON text: values nested a few deep, every kind of number, escape and character,
// whitespace here and there.
class RandomJson {
 public:
  explicit RandomJson(uint64_t seed) : rng_(seed) {}

  std::string Text() {
    std::string out;
    Value(out, 0);
    return out;
  }

  // 0-2 edits: a byte inserted, deleted or replaced, from bytes that matter to JSON.
  std::string Mutate(std::string text) {
    static const std::string kBytes = "{}[]:,\"\\ \n\tx0123456789-+.eEtrufalsn/u\x01\x7f\x80\xBF\xC3\xE0\xED\xF0\xF4\xFF";
    for (int edits = Pick(3); edits > 0 && !text.empty(); --edits) {
      const size_t at = static_cast<size_t>(Pick(static_cast<int>(text.size())));
      const char b = kBytes[static_cast<size_t>(Pick(static_cast<int>(kBytes.size())))];
      switch (Pick(3)) {
        case 0: text.insert(text.begin() + static_cast<std::ptrdiff_t>(at), b); break;
        case 1: text.erase(at, 1); break;
        default: text[at] = b; break;
      }
    }
    return text;
  }

 private:
  int Pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }
  void Space(std::string& out) {
    static const char* kSpaces[] = {"", "", "", " ", "\n  ", "\t", "\r\n"};
    out += kSpaces[Pick(7)];
  }
  void Value(std::string& out, int depth) {
    const int kind = Pick(depth >= 4 ? 4 : 6);
    switch (kind) {
      case 0: Number(out); break;
      case 1: String(out); break;
      case 2: out += std::vector<const char*>{"true", "false", "null"}[static_cast<size_t>(Pick(3))]; break;
      case 3: Number(out); break;
      case 4: {
        out += '[';
        for (int i = 0, n = Pick(4); i < n; ++i) {
          if (i) out += ',';
          Space(out);
          Value(out, depth + 1);
          Space(out);
        }
        out += ']';
        break;
      }
      default: {
        out += '{';
        for (int i = 0, n = Pick(4); i < n; ++i) {
          if (i) out += ',';
          Space(out);
          String(out);
          Space(out);
          out += ':';
          Space(out);
          Value(out, depth + 1);
        }
        Space(out);
        out += '}';
      }
    }
  }
  void Number(std::string& out) {
    if (Pick(3) == 0) out += '-';
    if (Pick(4) == 0) {
      out += '0';
    } else {
      out += static_cast<char>('1' + Pick(9));
      for (int i = Pick(4); i > 0; --i) out += static_cast<char>('0' + Pick(10));
    }
    if (Pick(3) == 0) {
      out += '.';
      for (int i = 1 + Pick(3); i > 0; --i) out += static_cast<char>('0' + Pick(10));
    }
    if (Pick(4) == 0) {
      out += "eE"[Pick(2)];
      if (Pick(2)) out += "+-"[Pick(2)];
      for (int i = 1 + Pick(2); i > 0; --i) out += static_cast<char>('0' + Pick(10));
    }
  }
  void String(std::string& out) {
    static const char* kPieces[] = {"a", "Z", " ", "\\\"", "\\\\", "\\/", "\\n", "\\t", "\\u00e9",
                                    "\\uD83D\\uDE00", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "{", "]"};
    out += '"';
    for (int i = Pick(6); i > 0; --i) out += kPieces[Pick(15)];
    out += '"';
  }

  std::mt19937_64 rng_;
};

// The byte at `at` is a digit of a number that, with it, is 10^308 or more: the automaton's own
// bound (JSON's grammar, and the tamed exponents nlohmann judges here, allow it).
bool DigitTakesANumberPastTheBound(const std::string& text, size_t at) {
  if (!std::isdigit(static_cast<unsigned char>(text[at]))) return false;
  size_t start = at;
  while (start > 0 && std::string_view("0123456789.eE+-").find(text[start - 1]) != std::string_view::npos) --start;
  const std::string number = text.substr(start, at + 1 - start);
  return std::fabs(std::strtod(number.c_str(), nullptr)) >= 1e308;
}

TEST(JsonAutomaton, AgreesWithNlohmannOnRandomTexts) {
  RandomJson random(20261201);
  int whole = 0, prefix = 0, invalid = 0, beyond_bound = 0;
  for (int i = 0; i < 100000; ++i) {
    const std::string text = random.Mutate(random.Text());
    size_t nlohmann_failed_at = 0;
    const JsonVerdict verdict = testing::JudgeJson(text, &nlohmann_failed_at);
    JsonAutomaton a(TopLevel::kAnyValue);
    const size_t refused = FirstRefused(text, TopLevel::kAnyValue, &a);
    if (refused == text.size()) {
      // Everything accepted: a whole value exactly when nlohmann says so, otherwise a prefix.
      ASSERT_EQ(verdict, a.complete() ? JsonVerdict::kWhole : JsonVerdict::kPrefix) << text;
    } else if (DigitTakesANumberPastTheBound(text, refused)) {
      ++beyond_bound;
      ASSERT_NE(testing::JudgeJson(text.substr(0, refused)), JsonVerdict::kInvalid) << text;
    } else {
      // A byte refused: the text is not JSON (whitespace before or after the value is, to
      // nlohmann, but not here), and nlohmann gives up no earlier. It may not
      // give up at all before the input ends ("\"a\"\"" fails in the lexer, at the end): then
      // no short completion of the text up to the refused byte is JSON to it.
      const bool space = std::string_view(" \t\n\r").find(text[refused]) != std::string_view::npos;
      const bool outside_value = space && (refused == 0 || Whole(text.substr(0, refused)));
      if (!outside_value) {
        ASSERT_NE(verdict, JsonVerdict::kWhole) << text;
        if (verdict == JsonVerdict::kInvalid) {
          ASSERT_LE(refused, nlohmann_failed_at) << text;
        } else {
          const std::string refused_prefix = text.substr(0, refused + 1);
          for (const char* end : {"", "\"", "0", "}", "]", "\"}", "\"]", "0}", "0]", "\":0}", "e0",
                                  "}}", "]]", "\"\"", "0000\"", "\\u0000\"", "\x80\"", "rue"}) {
            ASSERT_NE(testing::JudgeJson(refused_prefix + end), JsonVerdict::kWhole) << text << " + " << end;
          }
        }
      }
      // ... and what came before it is, to nlohmann, JSON or the start of some.
      ASSERT_NE(testing::JudgeJson(text.substr(0, refused)), JsonVerdict::kInvalid) << text;
    }
    if (verdict == JsonVerdict::kWhole) ++whole;
    if (verdict == JsonVerdict::kPrefix) ++prefix;
    if (verdict == JsonVerdict::kInvalid) ++invalid;
  }
  // The generator covers all three verdicts in good numbers.
  EXPECT_GT(whole, 10000);
  EXPECT_GT(prefix, 1000);
  EXPECT_GT(invalid, 10000);
  EXPECT_GT(beyond_bound, 0) << "no random number reached the bound: that case went untested";
}

// The position of the first byte refused in `text` (its size when all are taken).
size_t RefusedAt(std::string_view text) {
  JsonAutomaton a(TopLevel::kAnyValue);
  for (size_t i = 0; i < text.size(); ++i) {
    if (!a.Feed(static_cast<uint8_t>(text[i]))) return i;
  }
  return text.size();
}

TEST(JsonAutomaton, NumbersStayFiniteDoubles) {
  // Go's and nlohmann's parsers refuse a number past the largest double; Python's and
  // JavaScript's read infinity. A digit that takes the value to 10^308 is refused.
  for (const char* finite : {"9e307", "-9.99e307", "99e306", "1.7e+307", "0.05e309", "0.000001e313", "0e99999",
                             "0.000e99999", "-0e400", "1e-99999", "123.456e-400", "1e0000000307"}) {
    EXPECT_EQ(RefusedAt(finite), std::strlen(finite)) << finite;
    EXPECT_TRUE(std::isfinite(std::strtod(finite, nullptr))) << finite;
  }
  EXPECT_EQ(RefusedAt("1e308"), 4u);
  EXPECT_EQ(RefusedAt("10e307"), 5u);
  EXPECT_EQ(RefusedAt("0.5e309"), 6u);
  EXPECT_EQ(RefusedAt("[2884.7E+753]"), 11u);  // 2884.7e+75 is fine; the 3 takes it past
  // An integer part of 308 digits is the longest.
  const std::string digits(308, '9');
  EXPECT_EQ(RefusedAt(digits), digits.size());
  EXPECT_EQ(RefusedAt(digits + "9"), digits.size());
  EXPECT_EQ(RefusedAt(digits + ".5"), digits.size() + 2);
  // Refused a digit, the number can still end: '0' continues any exponent's start, and the
  // number read so far is whole.
  JsonAutomaton a(TopLevel::kAnyValue);
  ASSERT_TRUE(a.Feed(digits + "e"));
  JsonAutomaton one = a;
  EXPECT_FALSE(one.Feed('1'));
  ASSERT_TRUE(a.Feed('0'));
  EXPECT_TRUE(a.complete());
  JsonAutomaton in_array(TopLevel::kAnyValue);
  ASSERT_TRUE(in_array.Feed("[1e30"));
  JsonAutomaton eight = in_array;
  EXPECT_FALSE(eight.Feed('8'));
  ASSERT_TRUE(in_array.Feed("7]"));
  EXPECT_TRUE(in_array.complete());
}

}  // namespace
}  // namespace bmad::sampling
