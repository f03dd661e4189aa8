// SchemaAutomaton against an independent judge (tests/support/schema_verdict.h, the JSON Schema
// specification's rules): random walks through the bytes it accepts never reach a dead end and
// always end in a value the schema allows; values written in its form (keys in the order
// declared, enum values compact) are accepted byte by byte; and hand-picked texts are refused at
// the first byte no allowed value can have there.
#include "worker/sampling/schema_automaton.h"

// GCC 12 warns, wrongly, of overlapping copies in the std::string concatenations the instance
// writer below inlines (GCC bug 105651).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/support/json_verdict.h"
#include "tests/support/schema_verdict.h"
#include "tests/worker/sampling/compiled_schema.h"

namespace bmad::sampling {
namespace {

using testing::CompiledSchema;
using OrderedJson = nlohmann::ordered_json;

// Schemas of the kinds clients send: a Pydantic model with a nested model, a nullable field,
// an enum and bounded arrays; a recursive tree; a root that is no object; type lists; every
// property optional; oneOf of an object and an array; nesting without limit.
const std::vector<std::string> kSchemas = {
    R"({"$defs":{"Address":{"type":"object","properties":{"street":{"type":"string"},"zip":{"type":"integer"}},
          "required":["street","zip"],"title":"Address"}},
        "type":"object","title":"Person","additionalProperties":false,
        "properties":{"name":{"type":"string","description":"full name"},"age":{"type":"integer"},
          "nickname":{"anyOf":[{"type":"string"},{"type":"null"}],"default":null},
          "role":{"enum":["admin","user","guest"]},
          "scores":{"type":"array","items":{"type":"number"},"minItems":1,"maxItems":3},
          "address":{"$ref":"#/$defs/Address"},"active":{"type":"boolean"},
          "tags":{"type":"array","items":{"type":"string","enum":["a","ab","b"]}}},
        "required":["name","age","role","address"]})",
    R"({"$defs":{"Node":{"type":"object","properties":{"value":{"type":"integer"},
          "children":{"type":"array","items":{"$ref":"#/$defs/Node"},"maxItems":2}},"required":["value"]}},
        "$ref":"#/$defs/Node"})",
    R"({"enum":[1,12,"x",[1,2],{"k":null},true,null,-0.5]})",
    R"({"type":["string","integer","null","array"],"items":{"type":"boolean"}})",
    R"({"type":"object","properties":{"a":{"type":"string"},"b":{"const":3},"c":{},"d":{"type":"object"},"e":false}})",
    R"({"oneOf":[{"type":"object","properties":{"x":{"type":"number"}},"required":["x"]},
                 {"type":"array","items":{"type":"integer"},"maxItems":0}]})",
    R"({"$defs":{"L":{"type":"array","items":{"anyOf":[{"$ref":"#/$defs/L"},{"type":"string"}]}}},"$ref":"#/$defs/L"})",
    R"({"type":"object","additionalProperties":false})",
    R"({"type":"number"})",
    R"({})",
    R"({"type":"object","properties":{"code":{"type":"string","minLength":2,"maxLength":4},
          "age":{"type":"integer","minimum":18,"maximum":120},
          "delta":{"type":"integer","exclusiveMinimum":-50,"exclusiveMaximum":-3},
          "small":{"type":["integer","null"],"minimum":-5,"maximum":5.5},"id":{"minLength":1},
          "big":{"minimum":1000000000000}},
        "required":["code","age","delta","id"]})",
    // Tagged unions: tool_choice "required"'s list of calls (tags that begin one another), and
    // oneOf objects told apart by "kind" beside another type.
    R"({"type":"array","minItems":1,"items":{"anyOf":[
          {"type":"object","properties":{"name":{"const":"get_weather"},"arguments":{"type":"object",
            "properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city"]}},
           "required":["name","arguments"]},
          {"type":"object","properties":{"name":{"const":"get"},"arguments":{"type":"object","additionalProperties":false}},
           "required":["name","arguments"]},
          {"type":"object","properties":{"name":{"enum":["get_time"]},"arguments":{"type":"array","items":{"type":"integer"}}},
           "required":["name"]}]}})",
    R"({"oneOf":[{"type":"object","properties":{"kind":{"const":"circle"},"r":{"type":"number"}},"required":["kind","r"]},
                 {"type":"object","properties":{"kind":{"const":"dot"}},"required":["kind"]},
                 {"type":"null"}]})",
};

std::vector<uint8_t> Accepted(const SchemaAutomaton& a) {
  std::vector<uint8_t> bytes;
  for (int b = 0; b < 256; ++b) {
    SchemaAutomaton probe = a;
    if (probe.Feed(static_cast<uint8_t>(b))) bytes.push_back(static_cast<uint8_t>(b));
  }
  return bytes;
}

// `text` parsed. nlohmann throws out_of_range for a number beyond a double (a walk once wrote
// "2e9132", valid JSON): the automaton no longer writes one, and the walks check that too.
nlohmann::json ParseForJudge(const std::string& text) { return nlohmann::json::parse(text); }

// Past its budget a walk heads for the end: closers first, then separators, then anything
// that opens nothing.
uint8_t Choose(const std::vector<uint8_t>& bytes, bool wind_up, std::mt19937& rng) {
  if (wind_up) {
    for (std::string_view tier : {std::string_view("\"}]"), std::string_view(",:")}) {
      std::vector<uint8_t> in;
      for (uint8_t b : bytes) {
        if (tier.find(static_cast<char>(b)) != std::string_view::npos) in.push_back(b);
      }
      if (!in.empty()) return in[rng() % in.size()];
    }
    std::vector<uint8_t> rest;
    for (uint8_t b : bytes) {
      if (std::string_view(" \t\r\n{[").find(static_cast<char>(b)) == std::string_view::npos) rest.push_back(b);
    }
    if (!rest.empty()) return rest[rng() % rest.size()];
  }
  return bytes[rng() % bytes.size()];
}

TEST(SchemaAutomaton, RandomWalksNeverDeadEndAndEndInAllowedValues) {
  std::mt19937 rng(5);
  for (const std::string& text : kSchemas) {
    auto schema = CompiledSchema(text);
    ASSERT_TRUE(schema);
    const nlohmann::json judge_schema = nlohmann::json::parse(text);
    for (int walk = 0; walk < 150; ++walk) {
      SchemaAutomaton a(schema.get());
      std::string out;
      const size_t budget = rng() % 120;
      bool ended = false;
      for (int step = 0; step < 4000 && !ended; ++step) {
        const std::vector<uint8_t> bytes = Accepted(a);
        if (bytes.empty() || (a.complete() && (out.size() >= budget || rng() % 8 == 0))) {
          ASSERT_TRUE(a.complete()) << "dead end after " << out << "\nschema " << text;
          ended = true;
          break;
        }
        const uint8_t b = Choose(bytes, out.size() >= budget, rng);
        ASSERT_TRUE(a.Feed(b));
        out.push_back(static_cast<char>(b));
      }
      ASSERT_TRUE(ended) << "no end in 4000 bytes: " << out;
      ASSERT_EQ(testing::JudgeJson(out), testing::JsonVerdict::kWhole) << out;
      const std::string why = testing::SchemaViolation(ParseForJudge(out), judge_schema);
      EXPECT_EQ(why, "") << out << "\nschema " << text;
    }
  }
}

// Writes values of a schema in the automaton's form: keys in the order declared (each optional
// one at random), enum values as compact JSON, random whitespace between tokens.
class InstanceWriter {
 public:
  InstanceWriter(const OrderedJson& root, std::mt19937& rng) : root_(root), rng_(rng) {}

  std::string Write(const OrderedJson& s, int depth = 0) {
    if (s.is_boolean()) return AnyValue(depth);  // true (false is never written)
    if (s.contains("$ref")) return Write(root_.at(OrderedJson::json_pointer(s["$ref"].get<std::string>().substr(1))), depth);
    if (s.contains("allOf")) return Write(s["allOf"][0], depth);
    for (const char* keyword : {"anyOf", "oneOf"}) {
      if (!s.contains(keyword)) continue;
      const OrderedJson& alts = s[keyword];
      // Deep down, the last alternative (the leaf, in these schemas).
      return Write(depth > 4 ? alts.back() : alts[rng_() % alts.size()], depth);
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      for (const OrderedJson& t : s["type"].is_array() ? s["type"] : OrderedJson::array({s["type"]})) {
        types.push_back(t.get<std::string>());
      }
    }
    if (s.contains("enum") || s.contains("const")) {
      const OrderedJson values = s.contains("enum") ? s["enum"] : OrderedJson::array({s["const"]});
      return values[rng_() % values.size()].dump();
    }
    if (types.empty()) {
      if (s.contains("properties")) types = {"object"};
      else if (s.contains("items")) types = {"array"};
      else if (s.contains("minLength") || s.contains("maxLength")) types = {"string"};
      else if (s.contains("minimum") || s.contains("maximum")) types = {"integer"};
      else return AnyValue(depth);
    }
    const std::string type = types[rng_() % types.size()];
    if (type == "string") return s.contains("minLength") || s.contains("maxLength") ? BoundedString(s) : String();
    if (type == "number") return Pick({"0", "-1.5", "2e3", "12.25E-2", "-0", "7"});
    if (type == "integer") {
      return s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
                     s.contains("exclusiveMaximum")
                 ? BoundedInteger(s)
                 : Pick({"0", "-7", "42", "1234567890123"});
    }
    if (type == "boolean") return Pick({"true", "false"});
    if (type == "null") return "null";
    if (type == "object") return Object(s, depth);
    return Array(s, depth);
  }

 private:
  std::string Pick(std::initializer_list<const char*> options) {
    return *(options.begin() + rng_() % options.size());
  }
  std::string Ws() { return Pick({"", "", "", " ", "\n", "\n  ", "\n\t\t"}); }
  std::string String() {
    return Pick({"\"\"", "\"plain\"", "\"caf\xC3\xA9 \\u00e9 \\\" \\\\ \\n\"", "\"\\uD83D\\uDE00 \xF0\x9F\x98\x80\"",
                 "\"a\\/b\""});
  }
  // Characters of every kind: ASCII, two and four UTF-8 bytes, an escape, a surrogate pair.
  std::string BoundedString(const OrderedJson& s) {
    const size_t low = s.value("minLength", size_t{0});
    const size_t high = std::min(s.value("maxLength", size_t{1000}), low + 5);
    const size_t length = low + rng_() % (high - low + 1);
    std::string out = "\"";
    for (size_t i = 0; i < length; ++i) out += Pick({"a", "\xC3\xA9", "\xF0\x9F\x98\x80", "\\n", "\\uD83D\\uDE00", "\\u00e9"});
    return out + "\"";
  }
  std::string BoundedInteger(const OrderedJson& s) {
    double low = -1e15, high = 1e15;
    if (s.contains("minimum")) low = std::max(low, std::ceil(s["minimum"].get<double>()));
    if (s.contains("exclusiveMinimum")) low = std::max(low, std::floor(s["exclusiveMinimum"].get<double>()) + 1);
    if (s.contains("maximum")) high = std::min(high, std::floor(s["maximum"].get<double>()));
    if (s.contains("exclusiveMaximum")) high = std::min(high, std::ceil(s["exclusiveMaximum"].get<double>()) - 1);
    const auto a = static_cast<int64_t>(low), b = static_cast<int64_t>(high);
    const int64_t span = std::min<int64_t>(b - a, 1000);
    switch (rng_() % 3) {
      case 0: return std::to_string(a);
      case 1: return std::to_string(b);
      default: return std::to_string(a + static_cast<int64_t>(rng_() % static_cast<uint64_t>(span + 1)));
    }
  }
  std::string AnyValue(int depth) {
    if (depth > 4) return Pick({"1", "null", "\"s\""});
    return Pick({"1", "-2.5e-3", "true", "null", "\"s\"", "[]", "{}", "[1, {\"a\": [null]}]", "{\"k\" : \"v\"}"});
  }
  std::string Object(const OrderedJson& s, int depth) {
    if (!s.contains("properties") && s.value("additionalProperties", OrderedJson(true)) != OrderedJson(false)) {
      return Pick({"{}", "{\"any\": [1, 2]}", "{ \"a\" :{\"b\":null} }"});
    }
    std::set<std::string> required;
    for (const OrderedJson& r : s.value("required", OrderedJson::array())) required.insert(r.get<std::string>());
    std::string out = "{" + Ws();
    bool first = true;
    const OrderedJson properties = s.value("properties", OrderedJson::object());
    for (const auto& [key, value] : properties.items()) {
      if (!required.contains(key) && (depth > 4 || rng_() % 2 == 0 || value == OrderedJson(false))) continue;
      out += (first ? "" : "," + Ws()) + OrderedJson(key).dump() + Ws() + ":" + Ws() + Write(value, depth + 1) + Ws();
      first = false;
    }
    return out + "}";
  }
  std::string Array(const OrderedJson& s, int depth) {
    const size_t low = s.value("minItems", size_t{0});
    const size_t high = std::min(s.value("maxItems", size_t{1000}), low + (depth > 4 ? 0 : 3));
    const size_t count = low + rng_() % (high - low + 1);
    const OrderedJson items = s.value("items", OrderedJson(true));
    std::string out = "[" + Ws();
    for (size_t i = 0; i < count; ++i) out += (i ? "," + Ws() : "") + Write(items, depth + 1) + Ws();
    return out + "]";
  }

  const OrderedJson& root_;
  std::mt19937& rng_;
};

TEST(SchemaAutomaton, AcceptsValuesWrittenInItsFormByteByByte) {
  std::mt19937 rng(9);
  for (const std::string& text : kSchemas) {
    auto schema = CompiledSchema(text);
    ASSERT_TRUE(schema);
    const OrderedJson document = OrderedJson::parse(text);
    InstanceWriter writer(document, rng);
    for (int i = 0; i < 150; ++i) {
      const std::string value = writer.Write(document);
      ASSERT_EQ(testing::SchemaViolation(nlohmann::json::parse(value), nlohmann::json::parse(text)), "") << value;
      SchemaAutomaton a(schema.get());
      for (size_t at = 0; at < value.size(); ++at) {
        EXPECT_FALSE(a.complete() && value.find_first_not_of("0123456789.eE+-", at) != std::string::npos &&
                     text != R"({"type":"number"})" && text != "{}")
            << value << " complete before byte " << at;
        ASSERT_TRUE(a.Feed(static_cast<uint8_t>(value[at]))) << value << "\nrefused at byte " << at << "\nschema " << text;
      }
      EXPECT_TRUE(a.complete()) << value;
    }
  }
}

// vLLM's disable_any_whitespace: the schema's values without whitespace outside strings, in
// its objects and arrays and in a free ({}) value inside it.
TEST(SchemaAutomaton, CompactTakesNoWhitespaceOutsideStrings) {
  auto schema = CompiledSchema(R"({"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}},
                                  "b":{"type":"string"},"c":{}},"required":["a","b","c"]})");
  ASSERT_TRUE(schema);
  const auto accepts = [&](std::string_view text, bool compact) {
    SchemaAutomaton a(schema.get(), compact);
    return a.Feed(text) && a.complete();
  };
  EXPECT_TRUE(accepts(R"({"a":[1,2],"b":"x y","c":{"d":[true]}})", true));
  for (const std::string_view spaced : {R"({ "a":[1,2],"b":"x","c":1})", R"({"a": [1,2],"b":"x","c":1})",
                                        R"({"a":[1, 2],"b":"x","c":1})", R"({"a":[1,2],"b":"x","c":{"d": 1}})",
                                        "{\"a\":[1,2],\n\"b\":\"x\",\"c\":1}"}) {
    EXPECT_FALSE(accepts(spaced, true)) << spaced;
    EXPECT_TRUE(accepts(spaced, false)) << spaced;
  }
  // Copies keep it.
  SchemaAutomaton compact(schema.get(), true);
  SchemaAutomaton copy = compact;
  EXPECT_FALSE(copy.Feed(std::string_view("{ ")));
}

// The index of the first byte refused, or text.size() when none is.
size_t FirstRefused(const JsonSchema& schema, std::string_view text, bool* complete = nullptr) {
  SchemaAutomaton a(&schema);
  for (size_t i = 0; i < text.size(); ++i) {
    if (!a.Feed(static_cast<uint8_t>(text[i]))) return i;
  }
  if (complete) *complete = a.complete();
  return text.size();
}

TEST(SchemaAutomaton, RefusesAtTheFirstByteNoAllowedValueHas) {
  auto person = CompiledSchema(kSchemas[0]);
  ASSERT_TRUE(person);
  // '|' marks the byte refused.
  const std::string head = R"({"name":"x","age":1,)";
  const std::string role = head + R"("role":"user",)";
  const std::vector<std::string> cases = {
      R"({"|age":1})",                                     // "name" comes first
      R"({"name":"x","age":1,"role":"admin"|})",           // "address" is missing
      R"({"name":"x","age":1|.5})",                        // an integer has no fraction
      head + R"("role":"|root")",                          // no enum value starts with "r"
      head + R"("role|x")",                                // no such key
      head + R"("|zzz")",                                  // no such key at all
      head + R"("|scores":[1])",                           // "role" is required first
      role + R"("scores":[|])",                            // minItems 1
      role + R"("scores":[1,2,3|,)",                       // maxItems 3
      head + R"("nickname":|3)",                           // a string or null
      head + R"("nickname":"n","|address")",               // "role" is required next
      R"(| {)",                                            // nothing before the value
      R"({"name":"x","age":1,"role":"user","address":{"street":"s","zip":1}}| )",  // nor after
      R"({"name"|"x")",                                    // a colon after a key
      R"({"name":"x",|})",                                 // no key after the comma
      "{ | ",                                              // one space, or
      "{\n" + std::string(20, ' ') + "| ",                 // a newline and 20 indents
      "{\n\t|\n",
      "{|\t",
  };
  for (const std::string& marked : cases) {
    const size_t at = marked.find('|');
    const std::string text = marked.substr(0, at) + marked.substr(at + 1);
    EXPECT_EQ(FirstRefused(*person, text), at) << marked;
  }
  bool complete = false;
  EXPECT_EQ(FirstRefused(*person, R"({"name":"x","age":1,"role":"user","address":{"street":"s","zip":1}})", &complete), 67u);
  EXPECT_TRUE(complete);
  // Keys in another order than declared are valid JSON Schema but not written: documented.
  EXPECT_EQ(FirstRefused(*person, R"({"name":"x","role":"user","age":1})"), 13u);
}

TEST(SchemaAutomaton, NumbersHaveBoundedDigits) {
  auto number = CompiledSchema(R"({"type":"array","items":{"type":"number"}})");
  ASSERT_TRUE(number);
  const std::string sixteen(16, '7');
  bool complete = false;
  const std::string whole = "[-" + sixteen + "." + sixteen + "e+123," + sixteen + "E9,0.5]";
  EXPECT_EQ(FirstRefused(*number, whole, &complete), whole.size());
  EXPECT_TRUE(complete);
  EXPECT_EQ(FirstRefused(*number, "[" + sixteen + "7"), 17u);
  EXPECT_EQ(FirstRefused(*number, "[1." + sixteen + "7"), 19u);
  EXPECT_EQ(FirstRefused(*number, "[1e-1234"), 7u);
  // Inside a value the schema leaves free, numbers are JSON's.
  auto any = CompiledSchema(R"({"type":"array"})");
  ASSERT_TRUE(any);
  const std::string long_number = "[" + std::string(40, '9') + "]";
  EXPECT_EQ(FirstRefused(*any, long_number), long_number.size());
}

TEST(SchemaAutomaton, EnumValuesEndWhereTheyDiffer) {
  auto s = CompiledSchema(kSchemas[2]);  // 1, 12, "x", [1,2], {"k":null}, true, null, -0.5
  ASSERT_TRUE(s);
  for (const char* whole : {"1", "12", "\"x\"", "[1,2]", "{\"k\":null}", "true", "null", "-0.5"}) {
    bool complete = false;
    EXPECT_EQ(FirstRefused(*s, whole, &complete), std::string_view(whole).size()) << whole;
    EXPECT_TRUE(complete) << whole;
  }
  bool complete = true;
  EXPECT_EQ(FirstRefused(*s, "[1", &complete), 2u);
  EXPECT_FALSE(complete);
  EXPECT_EQ(FirstRefused(*s, "123"), 2u);
  EXPECT_EQ(FirstRefused(*s, "[1, 2]"), 3u);  // enum values are compact
  EXPECT_EQ(FirstRefused(*s, "2"), 0u);
}

// A large enum whose values share prefixes and hold bytes past 0x7F (UTF-8): each value, and
// nothing else, is accepted, the run of values still matching narrowed byte by byte.
TEST(SchemaAutomaton, LargeEnumsMatchEachValueExactly) {
  OrderedJson values = OrderedJson::array();
  std::set<std::string> written;
  for (int i = 0; i < 1000; ++i) {
    const std::string v = (i % 3 == 0 ? "\u00e9" : i % 3 == 1 ? "z" : "\u00e9t\u00e9") + std::to_string(i);
    values.push_back(v);
    written.insert(OrderedJson(v).dump());
  }
  values.push_back("\u00e9");  // a prefix of a third of the others
  written.insert(OrderedJson("\u00e9").dump());
  auto s = CompiledSchema(OrderedJson{{"enum", values}}.dump());
  ASSERT_TRUE(s);
  for (const std::string& v : written) {
    bool complete = false;
    ASSERT_EQ(FirstRefused(*s, v, &complete), v.size()) << v;
    EXPECT_TRUE(complete) << v;
  }
  for (const std::string& not_one : {std::string("\"\u00e91000\""), std::string("\"z0\""), std::string("\"y1\""),
                                     std::string("\"\u00e9t\u00e93\"")}) {
    bool complete = true;
    const size_t at = FirstRefused(*s, not_one, &complete);
    EXPECT_TRUE(at < not_one.size() || !complete) << not_one;
  }
  // The ending byte is refused where no value ends, and taken where one does.
  EXPECT_EQ(FirstRefused(*s, "\"\u00e9t\""), std::string("\"\u00e9t").size());
}

// minLength and maxLength count characters: a UTF-8 sequence, an escape and a surrogate pair
// of escapes are one each. The closing quote comes only from minLength on, and after maxLength
// characters nothing else.
TEST(SchemaAutomaton, StringLengthsCountCharacters) {
  auto s = CompiledSchema(R"({"type":"string","minLength":2,"maxLength":3})");
  ASSERT_TRUE(s);
  for (const std::string whole : {"\"ab\"", "\"abc\"", "\"\xC3\xA9\xF0\x9F\x98\x80\"", "\"\\n\\uD83D\\uDE00\\\"\""}) {
    bool complete = false;
    EXPECT_EQ(FirstRefused(*s, whole, &complete), whole.size()) << whole;
    EXPECT_TRUE(complete) << whole;
  }
  EXPECT_EQ(FirstRefused(*s, "\"a\""), 2u);                  // one character: too short
  EXPECT_EQ(FirstRefused(*s, "\"\""), 1u);
  EXPECT_EQ(FirstRefused(*s, "\"abcd"), 4u);                  // a fourth: too long
  EXPECT_EQ(FirstRefused(*s, "\"ab\\u00e9\\"), 9u);        // the escape was the third
  EXPECT_EQ(FirstRefused(*s, "\"\xF0\x9F\x98\x80\xF0\x9F\x98\x80\xF0\x9F\x98\x80\xC3"), 13u);
  // Plain text may be taken unread only up to the room the string has left.
  SchemaAutomaton a(s.get());
  ASSERT_TRUE(a.Feed("\""));
  EXPECT_TRUE(a.between_string_characters());
  EXPECT_EQ(a.string_room(), 3u);
  ASSERT_TRUE(a.Feed("\xC3\xA9" "b"));
  EXPECT_EQ(a.string_room(), 1u);
  auto free_text = CompiledSchema(R"({"type":"string"})");
  ASSERT_TRUE(free_text);
  SchemaAutomaton b(free_text.get());
  ASSERT_TRUE(b.Feed("\"abc"));
  EXPECT_TRUE(b.between_string_characters());
  EXPECT_EQ(b.string_room(), UINT32_MAX);
}

// An integer's bounds hold at every prefix: a digit or '-' is taken only when some ending
// lands in range, and the value ends only in range.
TEST(SchemaAutomaton, IntegerBoundsHoldAtEveryPrefix) {
  auto s = CompiledSchema(R"({"type":"array","items":{"type":"integer","minimum":-12,"exclusiveMaximum":205}})");
  ASSERT_TRUE(s);
  bool complete = false;
  const std::string whole = "[-12,-1,0,-0,7,19,204,150]";
  EXPECT_EQ(FirstRefused(*s, whole, &complete), whole.size());
  EXPECT_TRUE(complete);
  EXPECT_EQ(FirstRefused(*s, "[-13"), 3u);   // -13 and beyond are out of range
  EXPECT_EQ(FirstRefused(*s, "[-20"), 3u);    // -20..-29 are out of range
  EXPECT_EQ(FirstRefused(*s, "[205"), 3u);
  EXPECT_EQ(FirstRefused(*s, "[3000"), 3u);
  EXPECT_EQ(FirstRefused(*s, "[30,"), 4u);   // 30 is in range: its comma is taken
  // Exhaustively: every integer of three digits or fewer, either sign, taken exactly when in range.
  for (int v = -999; v <= 999; ++v) {
    const std::string text = "[" + std::to_string(v) + "]";
    bool whole_value = false;
    const bool in_range = v >= -12 && v < 205;
    EXPECT_EQ(FirstRefused(*s, text, &whole_value) == text.size() && whole_value, in_range) << v;
  }
  // A top-level integer is complete only in range: "1" must go on to 10..19.
  auto teens = CompiledSchema(R"({"type":"integer","minimum":10,"maximum":19})");
  ASSERT_TRUE(teens);
  SchemaAutomaton a(teens.get());
  ASSERT_TRUE(a.Feed("1"));
  EXPECT_FALSE(a.complete());
  EXPECT_EQ(Accepted(a), std::vector<uint8_t>({'0', '1', '2', '3', '4', '5', '6', '7', '8', '9'}));
  ASSERT_TRUE(a.Feed("9"));
  EXPECT_TRUE(a.complete());
  EXPECT_TRUE(Accepted(a).empty());
  // A '-' only where a negative value is in range: not for 0..5, though "-0" would be 0.
  auto small = CompiledSchema(R"({"type":"integer","minimum":0,"maximum":5})");
  ASSERT_TRUE(small);
  EXPECT_EQ(FirstRefused(*small, "-0"), 0u);
  EXPECT_EQ(FirstRefused(*small, "6"), 0u);
}

TEST(SchemaAutomaton, StopsOpeningContainersAtTheDepthLimit) {
  auto lists = CompiledSchema(kSchemas[6]);  // arrays of arrays (or strings), without limit
  ASSERT_TRUE(lists);
  SchemaAutomaton a(lists.get());
  for (int i = 0; i < JsonSchema::kMaxDepth; ++i) ASSERT_TRUE(a.Feed('[')) << i;
  SchemaAutomaton deeper = a;
  EXPECT_FALSE(deeper.Feed('['));
  SchemaAutomaton string = a;
  EXPECT_TRUE(string.Feed("\"s\"]"));
  for (int i = 0; i < JsonSchema::kMaxDepth; ++i) ASSERT_TRUE(a.Feed(']')) << i;
  EXPECT_TRUE(a.complete());
  // An optional property whose value needs more room than is left is not offered.
  auto tree = CompiledSchema(kSchemas[1]);
  ASSERT_TRUE(tree);
  SchemaAutomaton t(tree.get());
  for (int i = 0; i < JsonSchema::kMaxDepth / 2; ++i) {
    ASSERT_TRUE(t.Feed(R"({"value":1,"children":[)")) << i;
  }
  // 32 containers open: "children" (an array, needing one more) cannot come.
  EXPECT_FALSE(SchemaAutomaton(t).Feed("{"));
}

// A tagged union offers only the tags whose alternatives fit: one that needs more containers
// than are left, or admits no finite value, is never begun (it would be a dead end).
TEST(SchemaAutomaton, TaggedUnionOffersOnlyTagsThatFit) {
  // 32 objects nested, each required (the innermost, any object, is read as one value).
  std::string deep = R"({"type":"object"})";
  for (int i = 0; i < JsonSchema::kMaxDepth; ++i) {
    deep = R"({"type":"object","properties":{"y":)" + deep + R"(},"required":["y"]})";
  }
  const std::string schema =
      R"({"$defs":{"Loop":{"type":"object","properties":{"t":{"const":"c"},"next":{"$ref":"#/$defs/Loop"}},"required":["t","next"]}},
          "anyOf":[{"type":"object","properties":{"t":{"const":"a"}},"required":["t"]},
                   {"type":"object","properties":{"t":{"const":"b"},"x":)" + deep + R"(},"required":["t","x"]},
                   {"$ref":"#/$defs/Loop"}]})";
  auto tagged = CompiledSchema(schema);
  ASSERT_TRUE(tagged);
  SchemaAutomaton a(tagged.get());
  ASSERT_TRUE(a.Feed(R"({"t":")"));
  EXPECT_EQ(Accepted(a), std::vector<uint8_t>({'a'}));  // "b" needs 33 containers, "c" never ends
  EXPECT_TRUE(a.Feed(R"(a"})"));
  EXPECT_TRUE(a.complete());
  // With room, "b" is offered: the same union one level down.
  auto shallow = CompiledSchema(R"({"anyOf":[{"type":"object","properties":{"t":{"const":"a"}},"required":["t"]},
                                             {"type":"object","properties":{"t":{"const":"b"},"x":{"type":"object"}},"required":["t","x"]}]})");
  ASSERT_TRUE(shallow);
  SchemaAutomaton b(shallow.get());
  ASSERT_TRUE(b.Feed(R"({"t":")"));
  EXPECT_EQ(Accepted(b), std::vector<uint8_t>({'a', 'b'}));
  EXPECT_TRUE(b.Feed(R"(b","x":{}})"));
  EXPECT_TRUE(b.complete());
}

TEST(SchemaAutomaton, AnyObjectIsJsonMode) {
  // JsonSchema::AnyObject accepts what JsonAutomaton's object mode does, on hand-picked texts.
  auto any = JsonSchema::AnyObject();
  for (const char* text : {"{}", R"({"a": [1, {"b": null}], "c": "\u00e9"})", "[1]", " {}", "{} ", "\"s\""}) {
    JsonAutomaton reference(JsonAutomaton::TopLevel::kObject);
    SchemaAutomaton a(any.get());
    for (const char* c = text; *c; ++c) {
      const bool ok = reference.Feed(static_cast<uint8_t>(*c));
      ASSERT_EQ(a.Feed(static_cast<uint8_t>(*c)), ok) << text << " at " << (c - text);
      if (!ok) break;
      EXPECT_EQ(a.complete(), reference.complete()) << text;
    }
  }
}

}  // namespace
}  // namespace bmad::sampling
