// JsonSchema's compiler: what it builds from the keywords it enforces, and the error, with its
// place in the schema, for everything it does not enforce or that no value could satisfy.
#include "worker/sampling/json_schema.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/worker/sampling/compiled_schema.h"

namespace bmad::sampling {
namespace {

using testing::CompiledSchema;
using ::testing::HasSubstr;
using Kind = JsonSchema::Kind;

std::string Refusal(std::string_view text) {
  Result<std::shared_ptr<const JsonSchema>> s = JsonSchema::Compile(text);
  EXPECT_FALSE(s.ok()) << text;
  if (!s.ok()) {
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  }
  return s.ok() ? "" : s.status().message();
}

TEST(JsonSchema, AnObjectKeepsItsPropertiesInTheOrderDeclared) {
  auto s = CompiledSchema(R"({"type":"object","properties":{"z":{"type":"string"},"a":{"type":"integer"},
                        "m":{"type":"boolean"}},"required":["a"],"title":"T","description":"d"})");
  ASSERT_TRUE(s);
  const JsonSchema::Node& root = s->node(s->root());
  ASSERT_EQ(root.kind, Kind::kObject);
  ASSERT_EQ(root.properties.size(), 3u);
  EXPECT_EQ(root.properties[0].key, "\"z\"");
  EXPECT_EQ(root.properties[1].key, "\"a\"");
  EXPECT_FALSE(root.properties[0].required);
  EXPECT_TRUE(root.properties[1].required);
  EXPECT_EQ(root.next_required, (std::vector<uint16_t>{1, 1, 3, 3}));
  EXPECT_EQ(s->node(root.properties[0].node).kind, Kind::kString);
  EXPECT_EQ(s->node(root.properties[1].node).kind, Kind::kInteger);
  EXPECT_EQ(s->node(root.properties[2].node).literals, (std::vector<std::string>{"false", "true"}));
  EXPECT_EQ(root.min_depth, 1);
}

TEST(JsonSchema, KeysAndEnumValuesAreWrittenAsJson) {
  auto s = CompiledSchema(R"({"properties":{"say \"hi\"":{"enum":["b","a\n",3,null,[1,2],{"k":true}]}}})");
  ASSERT_TRUE(s);
  const JsonSchema::Node& root = s->node(s->root());
  ASSERT_EQ(root.kind, Kind::kObject);  // "properties" without a type: an object
  EXPECT_EQ(root.properties[0].key, R"("say \"hi\"")");
  EXPECT_EQ(s->node(root.properties[0].node).literals,
            (std::vector<std::string>{"\"a\\n\"", "\"b\"", "3", "[1,2]", "null", "{\"k\":true}"}));
}

TEST(JsonSchema, EnumValuesOfAnotherTypeAreDropped) {
  auto s = CompiledSchema(R"({"type":"integer","enum":[1,"1",2.0,2.5]})");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->node(s->root()).literals, (std::vector<std::string>{"1", "2.0"}));
  EXPECT_THAT(Refusal(R"({"type":"string","enum":[1,2]})"), HasSubstr("no value of 'enum'/'const' has the schema's 'type'"));
  auto c = CompiledSchema(R"({"enum":["a","b"],"const":"b"})");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->node(c->root()).literals, (std::vector<std::string>{"\"b\""}));
}

TEST(JsonSchema, AlternativesArePickedByTheirFirstByte) {
  auto s = CompiledSchema(R"({"anyOf":[{"type":"string"},{"type":"null"},{"type":"array","items":{"type":"integer"}}],
                        "default":null})");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->node(s->node(s->root()).kind == Kind::kUnion ? s->Resolve(s->root(), '"') : 0).kind, Kind::kString);
  EXPECT_EQ(s->node(s->Resolve(s->root(), 'n')).kind, Kind::kLiterals);
  EXPECT_EQ(s->node(s->Resolve(s->root(), '[')).kind, Kind::kArray);
  EXPECT_EQ(s->Resolve(s->root(), '1'), JsonSchema::kNoNode);
  EXPECT_EQ(s->node(s->root()).min_depth, 0);  // a string needs no container
  // A list of types is the same; "number" holds "integer".
  auto t = CompiledSchema(R"({"type":["integer","number","boolean"]})");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->node(t->Resolve(t->root(), '-')).kind, Kind::kNumber);
  EXPECT_EQ(t->node(t->Resolve(t->root(), 't')).kind, Kind::kLiterals);
  // Nested alternatives are followed to the one that starts so.
  auto n = CompiledSchema(R"({"oneOf":[{"anyOf":[{"type":"object"},{"const":7}]},{"type":"string"}]})");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->node(n->Resolve(n->root(), '{')).kind, Kind::kAnyObject);
  EXPECT_EQ(n->node(n->Resolve(n->root(), '7')).literals, (std::vector<std::string>{"7"}));
}

TEST(JsonSchema, ReferencesReachDefinitionsAndMayRecurse) {
  auto s = CompiledSchema(R"({"$defs":{"Node":{"type":"object","properties":{"v":{"type":"integer"},
                          "kids":{"type":"array","items":{"$ref":"#/$defs/Node"}}},"required":["v"]}},
                        "$ref":"#/$defs/Node"})");
  ASSERT_TRUE(s);
  const JsonSchema::Node& root = s->node(s->root());
  ASSERT_EQ(root.kind, Kind::kObject);
  const JsonSchema::Node& kids = s->node(root.properties[1].node);
  ASSERT_EQ(kids.kind, Kind::kArray);
  EXPECT_EQ(kids.items, s->root());  // the same node: recursion
  // "#" is the root; a pointer may go anywhere in the document, with ~1 for '/'.
  auto r = CompiledSchema(R"({"type":"array","items":{"anyOf":[{"$ref":"#"},{"$ref":"#/$defs/x~1y"}]},
                        "$defs":{"x/y":{"type":"number"}}})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->Resolve(r->node(r->root()).items, '['), r->root());
  EXPECT_EQ(r->node(r->Resolve(r->node(r->root()).items, '3')).kind, Kind::kNumber);
  // allOf of one schema (how Pydantic describes a field that refers to a model).
  auto a = CompiledSchema(R"({"properties":{"p":{"allOf":[{"$ref":"#/$defs/P"}],"description":"x"}},
                        "$defs":{"P":{"type":"string"}}})");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->node(a->node(a->root()).properties[0].node).kind, Kind::kString);
}

TEST(JsonSchema, ObjectsWithoutPropertiesAndEmptySchemas) {
  auto any = CompiledSchema("{}");
  ASSERT_TRUE(any);
  EXPECT_EQ(any->node(any->root()).kind, Kind::kAny);
  auto yes = CompiledSchema("true");
  ASSERT_TRUE(yes);
  EXPECT_EQ(yes->node(yes->root()).kind, Kind::kAny);
  auto object = CompiledSchema(R"({"type":"object","additionalProperties":true})");
  ASSERT_TRUE(object);
  EXPECT_EQ(object->node(object->root()).kind, Kind::kAnyObject);
  auto empty = CompiledSchema(R"({"type":"object","additionalProperties":false})");
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->node(empty->root()).kind, Kind::kObject);
  EXPECT_TRUE(empty->node(empty->root()).properties.empty());
  EXPECT_EQ(JsonSchema::AnyObject()->node(JsonSchema::AnyObject()->root()).kind, Kind::kAnyObject);
  // A property that must be absent is never written.
  auto absent = CompiledSchema(R"({"properties":{"gone":false,"kept":{"type":"null"}}})");
  ASSERT_TRUE(absent);
  ASSERT_EQ(absent->node(absent->root()).properties.size(), 1u);
  EXPECT_EQ(absent->node(absent->root()).properties[0].key, "\"kept\"");
}

TEST(JsonSchema, RefusesWhatItDoesNotEnforceNamingWhere) {
  EXPECT_THAT(Refusal(R"({"type":"object","properties":{"age":{"type":"integer","multipleOf":2}}})"),
              HasSubstr("at /properties/age: keyword 'multipleOf' is not supported"));
  EXPECT_THAT(Refusal(R"({"type":"string","pattern":"^a"})"), HasSubstr("at the root: keyword 'pattern' is not supported"));
  EXPECT_THAT(Refusal(R"({"type":"array","prefixItems":[{}]})"), HasSubstr("keyword 'prefixItems'"));
  EXPECT_THAT(Refusal(R"({"anyOf":[{"type":"string"},{"type":"string","enum":["a"]}]})"),
              HasSubstr("at /anyOf: two alternatives can both start with '\"'"));
  EXPECT_THAT(Refusal(R"({"anyOf":[{"type":"integer"},{"type":"number"}]})"), HasSubstr("both start with '-'"));
  EXPECT_THAT(Refusal(R"({"anyOf":[{},{"type":"null"}]})"), HasSubstr("both start with 'n'"));
  EXPECT_THAT(Refusal(R"({"type":"string","anyOf":[{"enum":["a"]}]})"),
              HasSubstr("'anyOf' beside 'type' is not supported"));
  EXPECT_THAT(Refusal(R"({"allOf":[{"type":"string"},{"enum":["a"]}]})"), HasSubstr("'allOf' is supported with one schema only"));
  EXPECT_THAT(Refusal(R"({"properties":{"a":{}},"required":["b"]})"),
              HasSubstr("required property 'b' is not in 'properties'"));
  EXPECT_THAT(Refusal(R"({"type":"object","additionalProperties":{"type":"string"}})"),
              HasSubstr("'additionalProperties' with a schema is supported only beside 'properties'"));
  EXPECT_THAT(Refusal(R"({"enum":["a"],"properties":{}})"), HasSubstr("'enum' beside 'properties' is not supported"));
  EXPECT_THAT(Refusal(R"({"type":"strin"})"), HasSubstr("'type' \"strin\" is not a JSON Schema type"));
  EXPECT_THAT(Refusal(R"({"type":[]})"), HasSubstr("'type' is an empty list"));
  EXPECT_THAT(Refusal(R"({"enum":[]})"), HasSubstr("'enum' must be a non-empty array"));
  EXPECT_THAT(Refusal(R"({"type":"array","minItems":-1})"), HasSubstr("'minItems' must be a non-negative integer"));
  EXPECT_THAT(Refusal(R"({"type":"array","minItems":3,"maxItems":2})"), HasSubstr("'minItems' is larger than 'maxItems'"));
  EXPECT_THAT(Refusal(R"({"properties":{"a":false},"required":["a"]})"), HasSubstr("at /properties/a: the schema false admits no value"));
  EXPECT_THAT(Refusal("[1]"), HasSubstr("a schema must be an object or a boolean"));
  EXPECT_THAT(Refusal("{\"type\":"), HasSubstr("the schema is not valid JSON"));
}

TEST(JsonSchema, RefusesReferencesThatLeadNowhere) {
  EXPECT_THAT(Refusal(R"({"$ref":"#/$defs/Missing"})"), HasSubstr("'$ref' \"#/$defs/Missing\" names nothing in the schema"));
  EXPECT_THAT(Refusal(R"({"$ref":"https://example.com/s.json"})"), HasSubstr("'$ref' must be \"#\" or \"#/...\""));
  EXPECT_THAT(Refusal(R"({"$ref":"#"})"), HasSubstr("refers to itself"));
  EXPECT_THAT(Refusal(R"({"$defs":{"A":{"$ref":"#/$defs/B"},"B":{"$ref":"#/$defs/A"}},"$ref":"#/$defs/A"})"),
              HasSubstr("refers to itself"));
  EXPECT_THAT(Refusal(R"({"$defs":{"A":{"anyOf":[{"$ref":"#/$defs/A"},{"type":"null"}]}},"$ref":"#/$defs/A"})"),
              HasSubstr("the alternatives refer back to themselves before any value starts"));
}

TEST(JsonSchema, RefusesSchemasWithNoValueWithinTheLimits) {
  // Every object needs another inside it: no finite value.
  EXPECT_THAT(Refusal(R"({"$defs":{"N":{"type":"object","properties":{"n":{"$ref":"#/$defs/N"}},"required":["n"]}},
                          "$ref":"#/$defs/N"})"),
              HasSubstr("the schema admits no finite JSON value"));
  EXPECT_THAT(Refusal(R"({"type":"array","items":false,"minItems":1})"), HasSubstr("'minItems' with 'items' false admits no value"));
  // 33 arrays, each needing the next: deeper than JsonSchema::kMaxDepth.
  std::string deep = R"({"type":"integer"})";
  for (int i = 0; i < 33; ++i) deep = R"({"type":"array","minItems":1,"items":)" + deep + "}";
  EXPECT_THAT(Refusal(deep), HasSubstr("every value of the schema nests 33 objects and arrays; at most 32 are supported"));
  // Optional nesting beyond the limit is fine: the automaton stops short of it.
  std::string optional = R"({"type":"integer"})";
  for (int i = 0; i < 40; ++i) optional = R"({"type":"array","items":)" + optional + "}";
  EXPECT_TRUE(CompiledSchema(optional));
}

TEST(JsonSchema, RefusesSchemasPastItsSizeLimits) {
  EXPECT_THAT(Refusal(std::string(JsonSchema::kMaxTextBytes + 1, ' ')), HasSubstr("bytes; at most 65536 are supported"));
  std::string many = R"({"type":"object","properties":{)";
  for (int i = 0; i < 65; ++i) many += std::string(i ? "," : "") + "\"p" + std::to_string(i) + "\":{}";
  EXPECT_THAT(Refusal(many + "}}"), HasSubstr("'properties' has 65 entries; at most 64 are supported"));
  std::string nested = "{}";
  for (int i = 0; i < 130; ++i) nested = R"({"items":)" + nested + "}";
  EXPECT_THAT(Refusal(nested), HasSubstr("the schema nests more than 128 levels deep"));
  std::string big_enum = R"({"enum":[)";
  for (int i = 0; i < 1025; ++i) big_enum += std::string(i ? "," : "") + std::to_string(i);
  EXPECT_THAT(Refusal(big_enum + "]}"), HasSubstr("'enum' has 1025 values; at most 1024 are supported"));
  std::string wide = R"({"anyOf":[)";
  for (int i = 0; i < 5000; ++i) wide += i ? ",{}" : "{}";
  EXPECT_THAT(Refusal(wide + "]}"), HasSubstr("the schema has more than 4096 parts"));
  // Text nested deeper than any schema within the limits is refused before it is parsed (the
  // JSON library's copies and writes recurse), strings and all.
  const std::string deep_enum = R"({"enum":[)" + std::string(30000, '[') + std::string(30000, ']') + "]}";
  EXPECT_THAT(Refusal(deep_enum), HasSubstr("the schema text nests 30002 objects and arrays deep; at most 272"));
  EXPECT_TRUE(CompiledSchema(R"({"enum":[")" + std::string(1000, '[') + R"("]})"));
}

// Alternatives shared through $ref, doubled at each of 40 levels: 2^40 paths to the bottom.
// Each union's first bytes are found once, so this is refused (the two alternatives of each
// level are the same) at once rather than after 2^40 steps (the test would never end).
TEST(JsonSchema, SharedAlternativesAreWalkedOnce) {
  std::string defs = R"("d0":{"type":"string"})";
  for (int i = 1; i <= 40; ++i) {
    const std::string below = "{\"$ref\":\"#/$defs/d" + std::to_string(i - 1) + "\"}";
    defs += ",\"d" + std::to_string(i) + "\":{\"anyOf\":[" + below + "," + below + "]}";
  }
  EXPECT_THAT(Refusal(R"({"$ref":"#/$defs/d40","$defs":{)" + defs + "}}"),
              HasSubstr("two alternatives can both start with '\"'"));
}

// Objects among a union's alternatives share their first byte: they are taken only as a tagged
// union, each opening with the same required property set to its own constant string.
TEST(JsonSchema, TaggedUnionsOfObjects) {
  auto tagged = CompiledSchema(R"({"anyOf":[{"type":"object","properties":{"t":{"const":"a"},"x":{}},"required":["t"]},
                                            {"properties":{"t":{"enum":["b"]}},"required":["t"]},{"type":"string"}]})");
  ASSERT_TRUE(tagged);
  const uint16_t object = tagged->Resolve(tagged->root(), '{');
  ASSERT_NE(object, JsonSchema::kNoNode);
  const JsonSchema::Node& node = tagged->node(object);
  EXPECT_EQ(node.kind, Kind::kObject);
  ASSERT_EQ(node.properties.size(), 1u);
  EXPECT_EQ(node.properties[0].key, "\"t\"");
  EXPECT_EQ(tagged->node(node.properties[0].node).literals, (std::vector<std::string>{"\"a\"", "\"b\""}));
  EXPECT_EQ(node.tagged.size(), 2u);
  const std::string a = R"({"type":"object","properties":{"t":{"const":"a"}},"required":["t"]})";
  auto both = [&](const std::string& other) { return R"({"anyOf":[)" + a + "," + other + "]}"; };
  EXPECT_THAT(Refusal(both(R"({"type":"object","properties":{"t":{"const":"b"}}})")),
              HasSubstr("at /anyOf: two alternatives can both start with '{' (an object's first property is not "
                        "required); only alternatives that differ in their first byte"));
  EXPECT_THAT(Refusal(both(R"({"type":"object","properties":{"u":{"const":"b"}},"required":["u"]})")),
              HasSubstr("(the objects' first properties differ)"));
  EXPECT_THAT(Refusal(both(a)), HasSubstr("(two objects have the tag \"a\")"));
  EXPECT_THAT(Refusal(both(R"({"type":"object","properties":{"t":{"const":1}},"required":["t"]})")),
              HasSubstr("(an object's first property is not one constant string)"));
  EXPECT_THAT(Refusal(both(R"({"type":"object"})")), HasSubstr("(one is not an object with properties)"));
}

// A schema with no "type" stands for the type its keywords describe; under oneOf that is not
// enough, since JSON Schema lets every value of another type through it.
TEST(JsonSchema, KeywordsWithoutATypeDescribeOneType) {
  auto closed = CompiledSchema(R"({"additionalProperties":false})");
  ASSERT_TRUE(closed);
  EXPECT_EQ(closed->node(closed->root()).kind, Kind::kObject);
  EXPECT_TRUE(closed->node(closed->root()).properties.empty());
  EXPECT_THAT(Refusal(R"({"properties":{"m":{"additionalProperties":{"type":"integer"}}}})"),
              HasSubstr("at /properties/m: 'additionalProperties' with a schema is supported only beside 'properties'"));
  auto any_object = CompiledSchema(R"({"type":"object","additionalProperties":{}})");
  ASSERT_TRUE(any_object);
  EXPECT_EQ(any_object->node(any_object->root()).kind, Kind::kAnyObject);
  EXPECT_THAT(Refusal(R"({"oneOf":[{"type":"string"},{"properties":{"a":{}}}]})"),
              HasSubstr("at /oneOf/1: an alternative of 'oneOf' needs a 'type'"));
  EXPECT_THAT(Refusal(R"({"oneOf":[{"type":"null"},{"anyOf":[{"items":{}},{"type":"string"}]}]})"),
              HasSubstr("at /oneOf/1/anyOf/0: an alternative of 'oneOf' needs a 'type'"));
  EXPECT_TRUE(CompiledSchema(R"({"oneOf":[{"type":"string"},{"type":"object","properties":{"a":{}}}]})"));
  EXPECT_TRUE(CompiledSchema(R"({"anyOf":[{"type":"string"},{"properties":{"a":{}}}]})"));
}

// String lengths and integer bounds; 2020-12's exclusive bounds are numbers, and every bound
// becomes an inclusive integer range.
TEST(JsonSchema, LengthsAndIntegerBounds) {
  auto code = CompiledSchema(R"({"type":"string","minLength":2,"maxLength":4})");
  ASSERT_TRUE(code);
  EXPECT_EQ(code->node(code->root()).min_length, 2u);
  EXPECT_EQ(code->node(code->root()).max_length, 4u);
  EXPECT_TRUE(code->node(code->root()).length_bounded());
  auto range = CompiledSchema(R"({"type":"integer","minimum":-3.5,"exclusiveMinimum":-3,"exclusiveMaximum":10,"maximum":12})");
  ASSERT_TRUE(range);
  EXPECT_EQ(range->node(range->root()).minimum, -2);
  EXPECT_EQ(range->node(range->root()).maximum, 9);
  auto fractional = CompiledSchema(R"({"type":"integer","exclusiveMinimum":0.5,"exclusiveMaximum":2.5})");
  ASSERT_TRUE(fractional);
  EXPECT_EQ(fractional->node(fractional->root()).minimum, 1);
  EXPECT_EQ(fractional->node(fractional->root()).maximum, 2);
  auto free = CompiledSchema(R"({"type":"integer"})");
  ASSERT_TRUE(free);
  EXPECT_FALSE(free->node(free->root()).range_bounded());
  // Without a type, the keywords say which: lengths a string, bounds an integer.
  auto inferred = CompiledSchema(R"({"properties":{"s":{"maxLength":3},"n":{"minimum":0}}})");
  ASSERT_TRUE(inferred);
  const auto& properties = inferred->node(inferred->root()).properties;
  ASSERT_EQ(properties.size(), 2u);
  EXPECT_EQ(inferred->node(properties[0].node).kind, Kind::kString);
  EXPECT_EQ(inferred->node(properties[1].node).kind, Kind::kInteger);
  // Each type takes its own keywords: the string's length, the integer's bounds.
  auto both = CompiledSchema(R"({"type":["string","integer"],"maxLength":1,"maximum":5})");
  ASSERT_TRUE(both);

  EXPECT_THAT(Refusal(R"({"type":"number","minimum":0,"maximum":1})"),
              HasSubstr("at the root: 'minimum' is supported on type \"integer\" only, not \"number\""));
  EXPECT_THAT(Refusal(R"({"type":"integer","exclusiveMinimum":true,"minimum":1})"),
              HasSubstr("'exclusiveMinimum' must be a number, got true"));
  EXPECT_THAT(Refusal(R"({"type":"integer","minimum":5,"exclusiveMaximum":5})"), HasSubstr("no integer is within the bounds"));
  EXPECT_THAT(Refusal(R"({"type":"integer","exclusiveMinimum":0.2,"exclusiveMaximum":0.9})"),
              HasSubstr("no integer is within the bounds"));
  EXPECT_THAT(Refusal(R"({"type":"integer","maximum":1e300})"), HasSubstr("'maximum' of 2^53 or more (either sign) is not supported"));
  EXPECT_THAT(Refusal(R"({"type":"integer","exclusiveMinimum":9007199254740992})"), HasSubstr("of 2^53 or more"));
  EXPECT_TRUE(CompiledSchema(R"({"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991})"));
  EXPECT_THAT(Refusal(R"({"type":"string","minLength":3,"maxLength":2})"), HasSubstr("'minLength' is larger than 'maxLength'"));
  EXPECT_THAT(Refusal(R"({"type":"string","maxLength":-1})"), HasSubstr("'maxLength' must be a non-negative integer"));
  EXPECT_THAT(Refusal(R"({"enum":["a","bb"],"minLength":2})"), HasSubstr("'enum' beside 'minLength' is not supported"));
}

TEST(JsonSchema, RefusesWhatWouldChangeAValueOrAReferenceUnseen) {
  EXPECT_THAT(Refusal(R"({"enum":[{"x":1}],"additionalProperties":false})"),
              HasSubstr("'enum' beside 'additionalProperties' is not supported"));
  EXPECT_THAT(Refusal(R"({"$defs":{"A":{"$id":"https://example.com/a","type":"string"}},"$ref":"#/$defs/A"})"),
              HasSubstr("at /$defs/A: '$id' is supported at the root only"));
  EXPECT_TRUE(CompiledSchema(R"({"$id":"https://example.com/root","type":"string"})"));
}

}  // namespace
}  // namespace bmad::sampling
