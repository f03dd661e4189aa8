#include "worker/sampling/json_automaton.h"

#include <algorithm>
#include <climits>

#include "common/utf8_lead.h"

namespace bmad::sampling {
namespace {

constexpr std::string_view kLiterals[] = {"true", "false", "null"};

bool IsDigit(uint8_t b) { return b >= '0' && b <= '9'; }

int HexValue(uint8_t b) {
  if (b >= '0' && b <= '9') return b - '0';
  if (b >= 'a' && b <= 'f') return b - 'a' + 10;
  if (b >= 'A' && b <= 'F') return b - 'A' + 10;
  return -1;
}

bool IsWhitespace(uint8_t b) { return b == ' ' || b == '\t' || b == '\n' || b == '\r'; }

}  // namespace

bool JsonAutomaton::Feed(std::string_view bytes) {
  for (char c : bytes) {
    if (!Feed(static_cast<uint8_t>(c))) return false;
  }
  return true;
}

bool JsonAutomaton::complete() const {
  if (mode_ == Mode::kDone) return true;
  const bool number_whole = mode_ == Mode::kZero || mode_ == Mode::kInteger ||
                            mode_ == Mode::kFraction || mode_ == Mode::kExponent;
  return depth_ == 0 && number_whole;
}

bool JsonAutomaton::Whitespace() {
  if (compact_ || whitespace_run_ >= kMaxWhitespaceRun) return false;
  ++whitespace_run_;
  return true;
}

bool JsonAutomaton::Push(bool object) {
  if (depth_ >= kMaxDepth) return false;
  if (object) {
    object_bits_ |= uint64_t{1} << depth_;
  } else {
    object_bits_ &= ~(uint64_t{1} << depth_);
  }
  ++depth_;
  mode_ = object ? Mode::kObjectFirst : Mode::kArrayFirst;
  return true;
}

void JsonAutomaton::StartNumber(uint8_t first_digit) {
  number_nonzero_ = first_digit != '0';
  number_magnitude_ = number_nonzero_ ? 1 : 0;
  zeros_after_point_ = 0;
  exponent_ = 0;
  exponent_negative_ = false;
}

bool JsonAutomaton::IntegerDigit() {
  // Only after a nonzero first digit (a leading zero takes no more).
  if (number_magnitude_ >= kMaxDecimalMagnitude) return false;
  ++number_magnitude_;
  return true;
}

void JsonAutomaton::FractionDigit(uint8_t byte) {
  if (number_nonzero_) return;  // the value's magnitude is set by its first nonzero digit
  if (byte == '0') {
    zeros_after_point_ = std::min(zeros_after_point_ + 1, INT32_MAX / 4);
    return;
  }
  number_nonzero_ = true;
  number_magnitude_ = -zeros_after_point_;  // 0.00d...: below 10^-2
}

bool JsonAutomaton::ExponentDigit(uint8_t byte) {
  // Zero times anything, and a negative exponent, cannot overflow. Otherwise the digit '0' is
  // always taken at the exponent's start (the value itself is below the bound), so a number
  // refused a digit can still end.
  if (!number_nonzero_ || exponent_negative_) return true;
  const int64_t exponent = int64_t{exponent_} * 10 + (byte - '0');
  if (number_magnitude_ + exponent > kMaxDecimalMagnitude) return false;
  exponent_ = static_cast<int32_t>(exponent);
  return true;
}

void JsonAutomaton::EndValue() { mode_ = depth_ == 0 ? Mode::kDone : Mode::kAfterValue; }

bool JsonAutomaton::EndNumber(uint8_t byte) {
  EndValue();
  return Feed(byte);
}

bool JsonAutomaton::StartValue(uint8_t byte) {
  if (object_only_ && depth_ == 0 && byte != '{') return false;
  switch (byte) {
    case '{':
      return Push(true);
    case '[':
      return Push(false);
    case '"':
      mode_ = Mode::kString;
      in_key_ = false;
      return true;
    case '-':
      mode_ = Mode::kMinus;
      return true;
    case '0':
      mode_ = Mode::kZero;
      StartNumber(byte);
      return true;
    default:
      break;
  }
  if (IsDigit(byte)) {
    mode_ = Mode::kInteger;
    StartNumber(byte);
    return true;
  }
  for (uint8_t i = 0; i < 3; ++i) {
    if (byte == static_cast<uint8_t>(kLiterals[i][0])) {
      mode_ = Mode::kLiteral;
      literal_ = i;
      pending_ = 1;
      return true;
    }
  }
  return false;
}

bool JsonAutomaton::StringByte(uint8_t byte) {
  if (low_surrogate_next_) {
    // Only the escape of the pair's second half may follow a high surrogate.
    if (byte != '\\') return false;
    mode_ = Mode::kEscape;
    return true;
  }
  if (byte == '"') {
    if (in_key_) {
      in_key_ = false;
      mode_ = Mode::kColon;
    } else {
      EndValue();
    }
    return true;
  }
  if (byte == '\\') {
    mode_ = Mode::kEscape;
    return true;
  }
  if (byte < 0x20) return false;  // control characters must be escaped
  if (byte < 0x80) return true;
  // A UTF-8 lead byte; the first continuation byte's range rules out overlong forms,
  // surrogates and code points above U+10FFFF.
  const std::optional<Utf8Lead> lead = ReadUtf8Lead(byte);
  if (!lead) return false;
  pending_ = static_cast<uint8_t>(lead->length - 1);
  next_low_ = lead->second_min;
  next_high_ = lead->second_max;
  mode_ = Mode::kUtf8;
  return true;
}

bool JsonAutomaton::UnicodeDigit(uint8_t byte) {
  const int value = HexValue(byte);
  if (value < 0) return false;
  const int position = 4 - pending_;  // 0 for the first digit
  unit_ = static_cast<uint16_t>((unit_ << 4) | value);
  // Surrogates are decided by the first two digits: refuse there, not at the fourth.
  if (position == 1) {
    const bool low = unit_ >= 0xDC && unit_ <= 0xDF;
    const bool high = unit_ >= 0xD8 && unit_ <= 0xDB;
    if (low_surrogate_next_ != low) return false;  // a lone half, or a pair's half missing
    low_surrogate_next_ = high;
  } else if (position == 0 && low_surrogate_next_ && value != 0xD) {
    return false;
  }
  if (--pending_ == 0) mode_ = Mode::kString;
  return true;
}

bool JsonAutomaton::Feed(uint8_t byte) {
  switch (mode_) {
    case Mode::kValue:
    case Mode::kArrayFirst:
      if (IsWhitespace(byte)) return !at_start() && Whitespace();
      whitespace_run_ = 0;
      if (mode_ == Mode::kArrayFirst && byte == ']') {
        --depth_;
        EndValue();
        return true;
      }
      return StartValue(byte);
    case Mode::kObjectFirst:
    case Mode::kObjectKey:
      if (IsWhitespace(byte)) return Whitespace();
      whitespace_run_ = 0;
      if (mode_ == Mode::kObjectFirst && byte == '}') {
        --depth_;
        EndValue();
        return true;
      }
      if (byte != '"') return false;
      mode_ = Mode::kString;
      in_key_ = true;
      return true;
    case Mode::kColon:
      if (IsWhitespace(byte)) return Whitespace();
      whitespace_run_ = 0;
      if (byte != ':') return false;
      mode_ = Mode::kValue;
      return true;
    case Mode::kAfterValue:
      if (IsWhitespace(byte)) return Whitespace();
      whitespace_run_ = 0;
      if (byte == ',') {
        mode_ = in_object() ? Mode::kObjectKey : Mode::kValue;
        return true;
      }
      if (byte == (in_object() ? '}' : ']')) {
        --depth_;
        EndValue();
        return true;
      }
      return false;
    case Mode::kDone:
      return false;
    case Mode::kString:
      return StringByte(byte);
    case Mode::kEscape:
      if (byte == 'u') {
        mode_ = Mode::kUnicode;
        pending_ = 4;
        unit_ = 0;
        return true;
      }
      if (low_surrogate_next_) return false;
      switch (byte) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
          mode_ = Mode::kString;
          return true;
        default:
          return false;
      }
    case Mode::kUnicode:
      return UnicodeDigit(byte);
    case Mode::kUtf8:
      if (byte < next_low_ || byte > next_high_) return false;
      next_low_ = 0x80;
      next_high_ = 0xBF;
      if (--pending_ == 0) mode_ = Mode::kString;
      return true;
    case Mode::kLiteral: {
      const std::string_view literal = kLiterals[literal_];
      if (byte != static_cast<uint8_t>(literal[pending_])) return false;
      if (++pending_ == literal.size()) EndValue();
      return true;
    }
    case Mode::kMinus:
      if (!IsDigit(byte)) return false;
      mode_ = byte == '0' ? Mode::kZero : Mode::kInteger;
      StartNumber(byte);
      return true;
    case Mode::kZero:
    case Mode::kInteger:
    case Mode::kFraction:
      if (IsDigit(byte) && mode_ == Mode::kInteger) return IntegerDigit();
      if (IsDigit(byte) && mode_ == Mode::kFraction) {
        FractionDigit(byte);
        return true;
      }
      if (byte == '.' && mode_ != Mode::kFraction) {
        mode_ = Mode::kDot;
        return true;
      }
      if (byte == 'e' || byte == 'E') {
        mode_ = Mode::kExponentMark;
        return true;
      }
      if (IsDigit(byte)) return false;  // a leading zero
      return EndNumber(byte);
    case Mode::kDot:
      if (!IsDigit(byte)) return false;
      mode_ = Mode::kFraction;
      FractionDigit(byte);
      return true;
    case Mode::kExponentMark:
      if (byte == '+' || byte == '-') {
        mode_ = Mode::kExponentSign;
        exponent_negative_ = byte == '-';
        return true;
      }
      [[fallthrough]];
    case Mode::kExponentSign:
      if (!IsDigit(byte) || !ExponentDigit(byte)) return false;
      mode_ = Mode::kExponent;
      return true;
    case Mode::kExponent:
      if (IsDigit(byte)) return ExponentDigit(byte);
      return EndNumber(byte);
  }
  return false;
}

}  // namespace bmad::sampling
