// A byte-at-a-time recognizer of the JSON texts a JsonSchema allows, for constrained decoding:
// it says whether a byte can continue what has been read towards such a text, and when the text
// is complete. Like JsonAutomaton (which it uses for strings, numbers and "any" values), every
// prefix it accepts has a completion: a key, an item or a value is only allowed when the
// containers its schema needs still fit under JsonSchema::kMaxDepth, a comma only when something
// may follow it, a closer only when nothing required is missing.
//
// The text starts with its value, and nothing follows it. Between the schema's tokens stands at
// most one space, or a newline and up to kMaxIndent spaces or tabs (the rule of llama.cpp's
// grammars for JSON schemas): enough for compact and pretty-printed JSON, and too little for a
// small model to fill its output with blank lines. Inside values the schema leaves free
// (strings, "any" values) JsonAutomaton's rules apply. A number of the schema has at most
// kMaxNumberDigits digits before its point and after it, and kMaxExponentDigits in its exponent:
// a small model would otherwise write digits until its tokens run out.
//
// State: a stack of the open objects and arrays (12 bytes each) and the one value being read
// inside the innermost (a string, number or "any" value through a JsonAutomaton; a key or an
// enum value by matching its text). Copies take the open containers only: copying is how a
// caller probes a continuation. The schema must outlive the automaton.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "worker/sampling/json_automaton.h"
#include "worker/sampling/json_schema.h"

namespace bmad::sampling {

class SchemaAutomaton {
 public:
  static constexpr int kMaxIndent = 20;
  // Digits of a number's integer part and of its fraction (llama.cpp's grammars allow as many),
  // and of its exponent (3 reach past a double's range).
  static constexpr int kMaxNumberDigits = 16;
  static constexpr int kMaxExponentDigits = 3;

  // `compact`: no whitespace between the tokens of the structure (vLLM's disable_any_whitespace).
  explicit SchemaAutomaton(const JsonSchema* schema, bool compact = false) : schema_(schema), compact_(compact) {}
  SchemaAutomaton(const SchemaAutomaton& other) { *this = other; }
  SchemaAutomaton& operator=(const SchemaAutomaton& other);

  // Reads one byte. False when no text the schema allows begins with the bytes read so far and
  // this one; the automaton is then spent (probe a copy).
  bool Feed(uint8_t byte);
  // Each byte in turn; false at the first one refused.
  bool Feed(std::string_view bytes);

  // The bytes read are a whole text the schema allows (a top-level number may still go on).
  bool complete() const;
  // Inside a string value of free text, between characters: text of whole characters without a
  // quote, a backslash or a control character is accepted, up to string_room() characters, and
  // leaves the state as it is but for the count of characters.
  bool between_string_characters() const {
    return leaf_ == Leaf::kJson && json_.between_string_characters();
  }
  // In a string: the characters it may still take (maxLength's rest; UINT32_MAX without one).
  uint32_t string_room() const {
    const JsonSchema::Node& node = schema_->node(leaf_node_);
    return node.max_length == UINT32_MAX ? UINT32_MAX : node.max_length - string_chars_;
  }

 private:
  enum class Phase : uint8_t {
    kOpen,   // after '{' or '[': a key, an item, or the closer
    kNext,   // after ',': a key or an item
    kColon,  // object: after a key
    kValue,  // object: after ':'
    kAfter,  // after a key's value or an item: ',' or the closer
  };
  // No member initializers: the stack's unused frames are never read, and are not written when
  // an automaton is made or copied.
  struct Frame {
    uint16_t node;
    Phase phase;
    uint8_t whitespace;
    uint16_t property;  // object: the property whose key was read last
    uint16_t next;      // object: the first property that may still come
    uint32_t items;     // array: items read
  };
  // What is being read inside the innermost container (or at the top level).
  enum class Leaf : uint8_t { kNone, kJson, kLiteral, kKey };
  enum class LeafResult : uint8_t { kTaken, kEnded, kRefused };

  bool FeedFrame(uint8_t byte);
  bool FeedObject(Frame& f, uint8_t byte);
  bool FeedArray(Frame& f, uint8_t byte);
  // A value of node `index` starting with `byte`, below the open containers.
  bool StartValue(uint16_t index, uint8_t byte);
  LeafResult FeedLeaf(uint8_t byte);
  // A number of the schema (kNumber, kInteger) may go on with `byte`: no fraction or exponent
  // for an integer, no digit past the part's limit. True for other values.
  bool NumberAllows(uint8_t byte) const;
  // A bounded integer can still end in its range with `digits` (at least 1) digits read so far,
  // of value `magnitude`, after a '-' when `negative`.
  static bool IntegerReachable(const JsonSchema::Node& node, bool negative, int64_t magnitude, int digits);
  bool IntegerInRange(const JsonSchema::Node& node) const;
  bool LeafComplete() const;
  // The value just read ends: its container goes on after it (or the text is done).
  void EndValue();
  // The value of node `index` can still be written below the open containers (and `extra` more).
  bool Fits(uint16_t index, int extra = 0) const;
  // Reading a tagged union's tag, literals [low, high) of it still match: whether one of them
  // names an alternative that fits below the open containers (always true for other literals).
  bool TagFits(uint32_t low, uint32_t high) const;
  // Object: the properties whose key may come next (bit i: property i).
  uint64_t KeyCandidates(const Frame& f) const;
  bool Whitespace(Frame& f, uint8_t byte);

  const JsonSchema* schema_;
  bool compact_ = false;
  std::array<Frame, JsonSchema::kMaxDepth> frames_;
  uint8_t depth_ = 0;
  bool done_ = false;
  Leaf leaf_ = Leaf::kNone;
  uint16_t leaf_node_ = 0;      // kJson, kLiteral: the value's node
  uint32_t literal_low_ = 0;    // kLiteral: the node's literals still matching, [low, high)
  uint32_t literal_high_ = 0;
  uint32_t matched_ = 0;        // kLiteral, kKey: bytes matched
  uint64_t keys_ = 0;           // kKey: the candidates still matching
  uint8_t number_digits_ = 0;   // kJson number: digits in the part being read
  bool in_exponent_ = false;    // kJson number: that part is the exponent
  bool negative_ = false;       // kJson integer: a '-' was read
  int64_t magnitude_ = 0;       // kJson integer: the digits read, as a number
  uint32_t string_chars_ = 0;   // kJson string: characters read
  JsonAutomaton json_;          // kJson
};

}  // namespace bmad::sampling
