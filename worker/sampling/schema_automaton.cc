#include "worker/sampling/schema_automaton.h"

#include <algorithm>
#include <bit>

namespace bmad::sampling {
namespace {

using Kind = JsonSchema::Kind;

bool IsWhitespace(uint8_t b) { return b == ' ' || b == '\t' || b == '\n' || b == '\r'; }
bool IsDigit(uint8_t b) { return b >= '0' && b <= '9'; }
bool StartsNumber(uint8_t b) { return b == '-' || IsDigit(b); }

}  // namespace

SchemaAutomaton& SchemaAutomaton::operator=(const SchemaAutomaton& other) {
  schema_ = other.schema_;
  compact_ = other.compact_;
  std::copy_n(other.frames_.begin(), other.depth_, frames_.begin());
  depth_ = other.depth_;
  done_ = other.done_;
  leaf_ = other.leaf_;
  leaf_node_ = other.leaf_node_;
  literal_low_ = other.literal_low_;
  literal_high_ = other.literal_high_;
  matched_ = other.matched_;
  keys_ = other.keys_;
  number_digits_ = other.number_digits_;
  in_exponent_ = other.in_exponent_;
  negative_ = other.negative_;
  magnitude_ = other.magnitude_;
  string_chars_ = other.string_chars_;
  json_ = other.json_;
  return *this;
}

bool SchemaAutomaton::Feed(std::string_view bytes) {
  for (char c : bytes) {
    if (!Feed(static_cast<uint8_t>(c))) return false;
  }
  return true;
}

bool SchemaAutomaton::Feed(uint8_t byte) {
  if (leaf_ != Leaf::kNone) {
    const LeafResult r = FeedLeaf(byte);
    if (r != LeafResult::kEnded) return r == LeafResult::kTaken;
  }
  if (depth_ == 0) return !done_ && StartValue(schema_->root(), byte);
  return FeedFrame(byte);
}

bool SchemaAutomaton::complete() const {
  return done_ || (depth_ == 0 && leaf_ != Leaf::kNone && LeafComplete());
}

bool SchemaAutomaton::Fits(uint16_t index, int extra) const {
  return depth_ + extra + schema_->node(index).min_depth <= JsonSchema::kMaxDepth;
}

bool SchemaAutomaton::TagFits(uint32_t low, uint32_t high) const {
  if (depth_ == 0) return true;
  const Frame& f = frames_[depth_ - 1];
  const JsonSchema::Node& object = schema_->node(f.node);
  if (object.tagged.empty() || f.phase != Phase::kValue) return true;
  // The object's frame is open already: each alternative's depth counts it too.
  for (uint32_t i = low; i < high; ++i) {
    if (Fits(object.tagged[i], -1)) return true;
  }
  return false;
}

bool SchemaAutomaton::StartValue(uint16_t index, uint8_t byte) {
  const uint16_t chosen = schema_->Resolve(index, byte);
  if (chosen == JsonSchema::kNoNode || !Fits(chosen)) return false;
  const JsonSchema::Node& node = schema_->node(chosen);
  switch (node.kind) {
    case Kind::kObject:
    case Kind::kArray:
      if (byte != (node.kind == Kind::kObject ? '{' : '[')) return false;
      frames_[depth_++] = Frame{.node = chosen, .phase = Phase::kOpen, .whitespace = 0, .property = 0,
                                .next = 0, .items = 0};
      return true;
    case Kind::kLiterals:
      leaf_ = Leaf::kLiteral;
      leaf_node_ = chosen;
      literal_low_ = 0;
      literal_high_ = static_cast<uint32_t>(node.literals.size());
      matched_ = 0;
      return FeedLeaf(byte) == LeafResult::kTaken;
    case Kind::kString:
      if (byte != '"') return false;
      break;
    case Kind::kNumber:
    case Kind::kInteger:
      if (!StartsNumber(byte)) return false;
      break;
    case Kind::kAny:
    case Kind::kAnyObject:
      break;
    case Kind::kUnion:
      return false;  // Resolve never answers a union
  }
  leaf_ = Leaf::kJson;
  leaf_node_ = chosen;
  number_digits_ = 0;
  in_exponent_ = false;
  negative_ = false;
  magnitude_ = 0;
  string_chars_ = 0;
  json_ = JsonAutomaton(node.kind == Kind::kAnyObject ? JsonAutomaton::TopLevel::kObject
                                                      : JsonAutomaton::TopLevel::kAnyValue,
                        compact_);
  return FeedLeaf(byte) == LeafResult::kTaken;
}

SchemaAutomaton::LeafResult SchemaAutomaton::FeedLeaf(uint8_t byte) {
  switch (leaf_) {
    case Leaf::kJson: {
      const JsonSchema::Node& node = schema_->node(leaf_node_);
      const bool was_complete = LeafComplete();
      // In a string of bounded length: a character starts here, or the closing quote.
      bool character = false;
      if (node.kind == Kind::kString && node.length_bounded() && json_.between_string_characters()) {
        if (byte == '"' ? string_chars_ < node.min_length : string_chars_ >= node.max_length) {
          return LeafResult::kRefused;
        }
        character = byte != '"';
      }
      if (NumberAllows(byte) && json_.Feed(byte)) {
        if (node.kind == Kind::kNumber || node.kind == Kind::kInteger) {
          // A new part of the number starts its count; a digit adds to it.
          number_digits_ = IsDigit(byte) ? static_cast<uint8_t>(number_digits_ + 1)
                           : byte == '-' || byte == '+' ? number_digits_
                                                        : 0;
          if (byte == 'e' || byte == 'E') in_exponent_ = true;
          if (byte == '-' && number_digits_ == 0) negative_ = true;
          if (node.kind == Kind::kInteger && IsDigit(byte)) magnitude_ = magnitude_ * 10 + (byte - '0');
        }
        if (character) ++string_chars_;
        return LeafResult::kTaken;
      }
      if (!was_complete) return LeafResult::kRefused;
      break;
    }
    case Leaf::kLiteral: {
      const std::vector<std::string>& literals = schema_->node(leaf_node_).literals;
      // The literals still matching share their first matched_ bytes and are sorted (bytes
      // compare unsigned, and one that ends there comes first): those going on with `byte`
      // are a run of them, found by binary search (an enum may hold 1,024 values).
      const auto next_byte = [&](uint32_t i) -> int {
        return literals[i].size() <= matched_ ? -1 : static_cast<uint8_t>(literals[i][matched_]);
      };
      const auto first_at_least = [&](int b) {
        uint32_t lo = literal_low_, hi = literal_high_;
        while (lo < hi) {
          const uint32_t mid = lo + (hi - lo) / 2;
          if (next_byte(mid) < b) lo = mid + 1;
          else hi = mid;
        }
        return lo;
      };
      const uint32_t low = first_at_least(byte);
      const uint32_t high = first_at_least(byte + 1);
      if (low < high && TagFits(low, high)) {
        literal_low_ = low;
        literal_high_ = high;
        ++matched_;
        return LeafResult::kTaken;
      }
      if (!LeafComplete()) return LeafResult::kRefused;
      break;
    }
    case Leaf::kKey: {
      const auto& properties = schema_->node(frames_[depth_ - 1].node).properties;
      uint64_t going_on = 0;
      for (uint64_t bits = keys_; bits != 0; bits &= bits - 1) {
        const int i = std::countr_zero(bits);
        const std::string& key = properties[static_cast<size_t>(i)].key;
        if (key.size() > matched_ && static_cast<uint8_t>(key[matched_]) == byte) going_on |= uint64_t{1} << i;
      }
      if (going_on != 0) {
        keys_ = going_on;
        ++matched_;
        return LeafResult::kTaken;
      }
      for (uint64_t bits = keys_; bits != 0; bits &= bits - 1) {
        const int i = std::countr_zero(bits);
        if (properties[static_cast<size_t>(i)].key.size() != matched_) continue;
        // The key is read: its colon comes next, in the object.
        Frame& f = frames_[depth_ - 1];
        f.property = static_cast<uint16_t>(i);
        f.phase = Phase::kColon;
        f.whitespace = 0;
        leaf_ = Leaf::kNone;
        return LeafResult::kEnded;
      }
      return LeafResult::kRefused;
    }
    case Leaf::kNone:
      return LeafResult::kRefused;
  }
  leaf_ = Leaf::kNone;
  EndValue();
  return LeafResult::kEnded;
}

bool SchemaAutomaton::NumberAllows(uint8_t byte) const {
  const JsonSchema::Node& node = schema_->node(leaf_node_);
  if (node.kind != Kind::kNumber && node.kind != Kind::kInteger) return true;
  if (node.kind == Kind::kInteger && (byte == '.' || byte == 'e' || byte == 'E')) return false;
  if (IsDigit(byte) && number_digits_ >= (in_exponent_ ? kMaxExponentDigits : kMaxNumberDigits)) return false;
  if (node.kind != Kind::kInteger || !node.range_bounded()) return true;
  // A '-' only where a negative value is in range ("-0" is 0, but an odd way to write it).
  if (byte == '-') return number_digits_ == 0 && !negative_ && node.minimum < 0;
  if (!IsDigit(byte)) return true;  // ends the number: LeafComplete checks its value
  return IntegerReachable(node, negative_, magnitude_ * 10 + (byte - '0'), number_digits_ + 1);
}

bool SchemaAutomaton::IntegerReachable(const JsonSchema::Node& node, bool negative, int64_t magnitude,
                                       int digits) {
  // The completions of what is read (a digit at least): a leading 0 takes no more digits;
  // otherwise the magnitude followed by up to the digits left, each count of them a run of
  // consecutive values.
  const auto overlaps = [&](int64_t low, int64_t high) {  // magnitudes low..high
    const int64_t least = negative ? -high : low;
    const int64_t most = negative ? -low : high;
    return least <= node.maximum && most >= node.minimum;
  };
  if (magnitude == 0) return overlaps(0, 0);
  int64_t scale = 1;
  for (int extra = 0; digits + extra <= kMaxNumberDigits; ++extra, scale *= 10) {
    if (overlaps(magnitude * scale, magnitude * scale + scale - 1)) return true;
  }
  return false;
}

bool SchemaAutomaton::IntegerInRange(const JsonSchema::Node& node) const {
  const int64_t value = negative_ ? -magnitude_ : magnitude_;
  return value >= node.minimum && value <= node.maximum;
}

bool SchemaAutomaton::LeafComplete() const {
  switch (leaf_) {
    case Leaf::kJson: {
      const JsonSchema::Node& node = schema_->node(leaf_node_);
      if (node.kind == Kind::kInteger && node.range_bounded() && !IntegerInRange(node)) return false;
      return json_.complete();
    }
    case Leaf::kLiteral: return schema_->node(leaf_node_).literals[literal_low_].size() == matched_;
    case Leaf::kKey:
    case Leaf::kNone: return false;
  }
  return false;
}

void SchemaAutomaton::EndValue() {
  if (depth_ == 0) {
    done_ = true;
    return;
  }
  Frame& f = frames_[depth_ - 1];
  f.whitespace = 0;
  f.phase = Phase::kAfter;
  const JsonSchema::Node& node = schema_->node(f.node);
  if (node.kind == Kind::kObject) {
    // A tagged union's tag (a literal, the value just read) names the alternative that goes on.
    if (!node.tagged.empty()) f.node = node.tagged[literal_low_];
    f.next = static_cast<uint16_t>(f.property + 1);
  } else {
    ++f.items;
  }
}

bool SchemaAutomaton::Whitespace(Frame& f, uint8_t byte) {
  if (compact_) return false;
  // f.whitespace: 0 none yet, 1 one space (the gap is full), 2 + n a newline and n indents.
  if (f.whitespace == 0 && (byte == ' ' || byte == '\n')) {
    f.whitespace = byte == ' ' ? 1 : 2;
    return true;
  }
  if (f.whitespace >= 2 && (byte == ' ' || byte == '\t') && f.whitespace - 2 < kMaxIndent) {
    ++f.whitespace;
    return true;
  }
  return false;
}

uint64_t SchemaAutomaton::KeyCandidates(const Frame& f) const {
  const JsonSchema::Node& node = schema_->node(f.node);
  if (f.next >= node.properties.size()) return 0;
  // Properties are written in order: any optional one up to the next required one, inclusive.
  const size_t last = std::min<size_t>(node.next_required[f.next], node.properties.size() - 1);
  uint64_t keys = 0;
  for (size_t i = f.next; i <= last; ++i) {
    if (Fits(node.properties[i].node)) keys |= uint64_t{1} << i;
  }
  return keys;
}

bool SchemaAutomaton::FeedFrame(uint8_t byte) {
  Frame& f = frames_[depth_ - 1];
  if (IsWhitespace(byte)) return Whitespace(f, byte);
  f.whitespace = 0;
  return schema_->node(f.node).kind == Kind::kObject ? FeedObject(f, byte) : FeedArray(f, byte);
}

bool SchemaAutomaton::FeedObject(Frame& f, uint8_t byte) {
  const JsonSchema::Node& node = schema_->node(f.node);
  const bool nothing_required_left = node.next_required[f.next] == node.properties.size();
  switch (f.phase) {
    case Phase::kOpen:
    case Phase::kNext:
      if (byte == '"') {
        keys_ = KeyCandidates(f);
        if (keys_ == 0) return false;
        leaf_ = Leaf::kKey;
        matched_ = 0;
        return FeedLeaf(byte) == LeafResult::kTaken;
      }
      if (byte == '}' && f.phase == Phase::kOpen && nothing_required_left) break;
      return false;
    case Phase::kColon:
      if (byte != ':') return false;
      f.phase = Phase::kValue;
      return true;
    case Phase::kValue:
      return StartValue(node.properties[f.property].node, byte);
    case Phase::kAfter:
      if (byte == ',' && KeyCandidates(f) != 0) {
        f.phase = Phase::kNext;
        return true;
      }
      if (byte == '}' && nothing_required_left) break;
      return false;
  }
  --depth_;  // the object closes
  EndValue();
  return true;
}

bool SchemaAutomaton::FeedArray(Frame& f, uint8_t byte) {
  const JsonSchema::Node& node = schema_->node(f.node);
  switch (f.phase) {
    case Phase::kOpen:
      if (byte == ']' && node.min_items == 0) break;
      return node.max_items > 0 && StartValue(node.items, byte);
    case Phase::kNext:
      return StartValue(node.items, byte);
    case Phase::kAfter:
      if (byte == ',' && f.items < node.max_items && Fits(node.items)) {
        f.phase = Phase::kNext;
        return true;
      }
      if (byte == ']' && f.items >= node.min_items) break;
      return false;
    case Phase::kColon:
    case Phase::kValue:
      return false;
  }
  --depth_;  // the array closes
  EndValue();
  return true;
}

}  // namespace bmad::sampling
