// A byte-at-a-time recognizer of JSON text (RFC 8259), for constrained decoding: it says whether
// a byte can continue what has been read towards a valid JSON value, and when the value is
// complete.
//
// Every byte it accepts leaves a text that some continuation completes: numbers, escapes
// (\uXXXX surrogates must pair, as strict parsers require), UTF-8 (no overlong forms, no
// surrogates, nothing above U+10FFFF) and literals are checked as each byte comes, not when they
// end. So a sampler that only ever draws tokens whose bytes are all accepted never leads the
// output into a dead end.
//
// Limits keep a model from running on in what means nothing (a small model, asked for JSON,
// would rather write spaces): the text starts with its value, with no whitespace before it (as
// llama.cpp's JSON grammar, whose root is the object itself); at most kMaxWhitespaceRun
// whitespace bytes stand between two tokens of the structure (insignificant whitespace; the
// inside of strings is not limited); containers nest at most kMaxDepth deep. Nothing is
// accepted after the top-level value, not even whitespace: the end of the output comes next.
//
// Numbers stay finite doubles: a digit that would take a number's value to 10^308 or beyond
// (a long integer part, or a large exponent) is refused. JSON's grammar allows any number, but
// parsers map them to doubles: Go's and nlohmann's refuse a number past the largest, Python's
// and JavaScript's read infinity. Tiny values are left alone (they read as 0 or a denormal).
//
// The state is a few bytes: copying the automaton is how a caller probes a continuation.
#pragma once

#include <cstdint>
#include <string_view>

namespace bmad::sampling {

class JsonAutomaton {
 public:
  // What the text may be: any JSON value, or an object (OpenAI's JSON mode).
  enum class TopLevel : uint8_t { kAnyValue, kObject };
  static constexpr int kMaxDepth = 64;
  static constexpr int kMaxWhitespaceRun = 32;
  // A number's value stays below 10^kMaxDecimalMagnitude (DBL_MAX is about 1.8 x 10^308).
  static constexpr int32_t kMaxDecimalMagnitude = 308;

  // `compact`: no whitespace between the tokens of the structure at all (vLLM's
  // disable_any_whitespace); inside strings it is text as any other.
  explicit JsonAutomaton(TopLevel top = TopLevel::kObject, bool compact = false)
      : object_only_(top == TopLevel::kObject), compact_(compact) {}

  // Reads one byte. False when no JSON text within the limits begins with the bytes read so far
  // followed by this one; the automaton is then spent (probe a copy).
  bool Feed(uint8_t byte);
  // Each byte in turn; false at the first one refused.
  bool Feed(std::string_view bytes);

  // The bytes read form a whole JSON text. Only a top-level number can go on after that (more
  // digits); anything else that is complete accepts no more bytes.
  bool complete() const;
  // Nothing read yet.
  bool at_start() const { return mode_ == Mode::kValue && depth_ == 0; }
  // Inside a string, between characters, no escape pending: any text of whole characters
  // without a quote, a backslash or a control character is accepted and leaves the state as it
  // is.
  bool between_string_characters() const { return mode_ == Mode::kString && !low_surrogate_next_; }

 private:
  enum class Mode : uint8_t {
    kValue,       // a value starts here
    kArrayFirst,  // after '[': a value or ']'
    kObjectFirst, // after '{': a key or '}'
    kObjectKey,   // after ',' in an object: a key
    kColon,       // after a key
    kAfterValue,  // after a value in a container: ',' or the container's closer
    kDone,        // the top-level value is complete
    kString,      // in a string (a key when `in_key_`)
    kEscape,      // after '\' in a string
    kUnicode,     // in \uXXXX: `pending_` hex digits to go, `unit_` the digits so far
    kUtf8,        // in a multi-byte character: `pending_` continuation bytes to go
    kLiteral,     // in true / false / null: `literal_`, `pending_` letters read
    kMinus,       // number: after '-'
    kZero,        // number: an integer part of "0"
    kInteger,     // number: in the integer part
    kDot,         // number: after '.'
    kFraction,    // number: in the fraction
    kExponentMark,// number: after 'e' or 'E'
    kExponentSign,// number: after the exponent's sign
    kExponent,    // number: in the exponent
  };

  bool StartValue(uint8_t byte);
  bool StringByte(uint8_t byte);
  bool UnicodeDigit(uint8_t byte);
  bool Push(bool object);
  // A value ended: the container's next separator, or the end of the text.
  void EndValue();
  // `byte` is not part of the number being read: the number ends there, and the byte is read
  // in what follows it.
  bool EndNumber(uint8_t byte);
  bool Whitespace();
  // A number starts with `first_digit`; a digit of its integer part, its fraction, its exponent.
  void StartNumber(uint8_t first_digit);
  bool IntegerDigit();
  void FractionDigit(uint8_t byte);
  bool ExponentDigit(uint8_t byte);
  bool in_object() const { return depth_ > 0 && ((object_bits_ >> (depth_ - 1)) & 1) != 0; }

  uint64_t object_bits_ = 0;  // bit d: the container at depth d + 1 is an object
  // The number being read: nonzero once a nonzero digit came before the exponent; then its value
  // (before the exponent) is below 10^number_magnitude_. zeros_after_point_: the fraction's
  // leading zeros while the number is zero. exponent_: a positive exponent's value so far.
  int32_t number_magnitude_ = 0;
  int32_t zeros_after_point_ = 0;
  int32_t exponent_ = 0;
  bool number_nonzero_ = false;
  bool exponent_negative_ = false;
  uint16_t unit_ = 0;         // \u escape: the code unit read so far
  uint8_t depth_ = 0;
  Mode mode_ = Mode::kValue;
  uint8_t pending_ = 0;
  uint8_t literal_ = 0;        // index into the literals
  uint8_t next_low_ = 0x80;    // kUtf8: the range of the next continuation byte
  uint8_t next_high_ = 0xBF;
  uint8_t whitespace_run_ = 0;
  bool in_key_ = false;
  bool low_surrogate_next_ = false;  // a high surrogate escape was read: "\uDC00".."\uDFFF" next
  bool object_only_;
  bool compact_;
};

}  // namespace bmad::sampling
