// A JSON Schema (OpenAI's response_format "json_schema"), compiled into the small graph a
// SchemaAutomaton walks to hold an output to it.
//
// What is enforced (and only that: any other keyword that constrains a value is refused by name,
// never ignored, so an output this schema allows is always valid under the schema the client
// sent):
//   type              "object", "array", "string", "number", "integer", "boolean", "null", or a
//                     list of them
//   properties        written in the order declared; each property in `required` always, the
//                     others when the model chooses to (never one whose schema is false). No
//                     other key is written, whatever additionalProperties says (an object with
//                     no properties is any object, or only {} under additionalProperties false)
//   items             one schema for every item; minItems, maxItems
//   minLength,        a string's characters (Unicode code points; an escape is the character
//   maxLength         it stands for)
//   minimum, maximum, an integer's bounds (2020-12: the exclusive ones are numbers); on type
//   exclusiveMinimum, "number" they are refused (a decimal's bounds would hold under a double
//   exclusiveMaximum  validator's rounding only approximately)
//   enum, const       the values as compact JSON, an object's keys in the order given
//   anyOf, oneOf      alternatives that differ in their first byte (their JSON types, or literals
//                     other than strings that start differently, as true and null): the first
//                     byte of the value picks one. Objects among them may share it when each
//                     opens with the same required property set to a different constant string
//                     (a tagged union, {"name": "f", ...} | {"name": "g", ...}): that value picks
//                     one. oneOf's alternatives each need a "type" (or enum/const), so that
//                     "exactly one" holds too. allOf of one schema is that schema
//   no "type"         the type the keywords describe (properties, required or
//                     additionalProperties: an object; items, minItems or maxItems: an array;
//                     minLength or maxLength: a string; a bound: an integer), else any value
//   $ref              "#" and JSON pointers into the document ("#/$defs/Item"); recursion works
//   true / {}         any JSON value
// Annotations are ignored: title, description, default, examples, format (an annotation unless a
// validator opts in, JSON Schema 2020-12 section 7.2), $schema, $id (at the root only),
// $comment, $defs, definitions, deprecated, readOnly, writeOnly, additionalProperties (see
// properties).
//
// Limits keep a hostile schema cheap: 64 KiB of text nesting at most 272 deep, 4096 parts,
// 128 levels of schemas; the compile is linear in the parts.
//
// The compiler also proves the schema has an instance that nests at most kMaxDepth containers
// deep, so the automaton can keep every prefix it accepts completable.
//
// Thread-safety: immutable once compiled; share it.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace bmad::sampling {

class JsonSchema {
 public:
  static constexpr size_t kMaxTextBytes = 64 * 1024;
  static constexpr size_t kMaxNodes = 4096;
  static constexpr size_t kMaxProperties = 64;  // per object: a key's candidates are a bit mask
  static constexpr size_t kMaxEnumValues = 1024;
  // Containers of the schema's objects and arrays nested in one another (the inside of an "any"
  // value has JsonAutomaton's own limit).
  static constexpr int kMaxDepth = 32;
  static constexpr uint16_t kNoNode = 0xFFFF;
  // The largest integer of 16 digits, the most a number of the schema is written with.
  static constexpr int64_t kLargestInteger = 9'999'999'999'999'999;

  enum class Kind : uint8_t {
    kAny,        // any JSON value
    kAnyObject,  // any JSON object
    kString,
    kNumber,
    kInteger,
    kLiterals,   // one of `literals` (enum, const, boolean, null)
    kObject,     // `properties`, in order
    kArray,      // `items`, min_items..max_items of them
    kUnion,      // the alternative `by_first_byte` names
  };

  struct Property {
    std::string key;  // as written: a JSON string with its quotes
    uint16_t node = kNoNode;
    bool required = false;
  };

  struct Node {
    Kind kind = Kind::kAny;
    std::vector<Property> properties;
    // next_required[i]: the first required property at or after i (properties.size() if none).
    std::vector<uint16_t> next_required;
    uint16_t items = kNoNode;
    uint32_t min_items = 0;
    uint32_t max_items = UINT32_MAX;
    // kString: characters (code points), min_length..max_length.
    uint32_t min_length = 0;
    uint32_t max_length = UINT32_MAX;
    // kInteger: the values allowed, minimum..maximum, inclusive (exclusive and fractional bounds
    // are made so); at most kMaxNumberDigits digits either way.
    int64_t minimum = -kLargestInteger;
    int64_t maximum = kLargestInteger;
    std::vector<std::string> literals;  // sorted, distinct
    std::array<uint16_t, 256> by_first_byte{};
    // kObject of a tagged union (anyOf/oneOf objects told apart by a constant first property):
    // its one property is that tag, and once its value (literal i of the property's node) is
    // read the object goes on as tagged[i], from that alternative's second property.
    std::vector<uint16_t> tagged;
    // The fewest of the schema's containers an instance needs, itself included.
    int min_depth = 0;

    bool length_bounded() const { return min_length > 0 || max_length != UINT32_MAX; }
    bool range_bounded() const { return minimum != -kLargestInteger || maximum != kLargestInteger; }
  };

  // The schema in `text` (a JSON document), or kInvalidArgument naming the problem and where it
  // is, as a JSON pointer: "at /properties/age: keyword 'minimum' is not supported".
  static Result<std::shared_ptr<const JsonSchema>> Compile(std::string_view text);
  // Any JSON object: OpenAI's response_format "json_object".
  static std::shared_ptr<const JsonSchema> AnyObject();

  const Node& node(uint16_t index) const { return nodes_[index]; }
  uint16_t root() const { return root_; }
  // The node a value starting with `byte` takes at `index` (a union's alternative, or the node
  // itself), or kNoNode when no value there starts so.
  uint16_t Resolve(uint16_t index, uint8_t byte) const;

 private:
  friend class JsonSchemaCompiler;
  std::vector<Node> nodes_;
  uint16_t root_ = 0;
};

}  // namespace bmad::sampling
