#include "worker/sampling/regex_nfa.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <string>
#include <utility>

#include "common/utf8_lead.h"

namespace bmad::sampling {
namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr int kMaxGroupDepth = 100;

struct CodePoints {
  uint32_t lo;
  uint32_t hi;
};
using CharSet = std::vector<CodePoints>;

// Sorted, disjoint, not adjacent; surrogates (never valid UTF-8) removed.
CharSet Normalized(CharSet set) {
  CharSet split;
  for (const CodePoints& r : set) {
    if (r.lo > r.hi) continue;
    if (r.hi < 0xD800 || r.lo > 0xDFFF) {
      split.push_back(r);
      continue;
    }
    if (r.lo < 0xD800) split.push_back({r.lo, 0xD7FF});
    if (r.hi > 0xDFFF) split.push_back({0xE000, r.hi});
  }
  std::sort(split.begin(), split.end(), [](const CodePoints& a, const CodePoints& b) { return a.lo < b.lo; });
  CharSet out;
  for (const CodePoints& r : split) {
    if (!out.empty() && r.lo <= out.back().hi + 1) {
      out.back().hi = std::max(out.back().hi, r.hi);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

CharSet Complement(const CharSet& set) {
  const CharSet normal = Normalized(set);
  CharSet out;
  uint32_t next = 0;
  for (const CodePoints& r : normal) {
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return Normalized(out);
}

CharSet Digits() { return {{'0', '9'}}; }
CharSet WordChars() { return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; }
CharSet Spaces() { return {{'\t', '\r'}, {' ', ' '}}; }  // \t \n \v \f \r and the space

std::string EncodeUtf8(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

// The UTF-8 byte ranges of the code points lo..hi, all of one encoded length: each sequence is
// one range per byte, and together they cover exactly those code points.
void AppendUtf8Sequences(uint32_t lo, uint32_t hi, std::vector<std::vector<std::pair<uint8_t, uint8_t>>>& out) {
  static constexpr uint32_t kLast[] = {0x7F, 0x7FF, 0xFFFF, kMaxCodePoint};
  for (int length = 1; length <= 4; ++length) {
    const uint32_t first = length == 1 ? 0 : kLast[length - 2] + 1;
    if (hi < first || lo > kLast[length - 1]) continue;
    if (lo < first || hi > kLast[length - 1]) {
      AppendUtf8Sequences(std::max(lo, first), std::min(hi, kLast[length - 1]), out);
      continue;
    }
    // Split until every byte after the first covers its whole continuation range or one value.
    for (int i = 1; i < length; ++i) {
      const uint32_t low_bits = (1u << (6 * i)) - 1;
      if ((lo & ~low_bits) == (hi & ~low_bits)) continue;
      if ((lo & low_bits) != 0) {
        AppendUtf8Sequences(lo, lo | low_bits, out);
        AppendUtf8Sequences((lo | low_bits) + 1, hi, out);
        return;
      }
      if ((hi & low_bits) != low_bits) {
        AppendUtf8Sequences(lo, (hi & ~low_bits) - 1, out);
        AppendUtf8Sequences(hi & ~low_bits, hi, out);
        return;
      }
    }
    const std::string a = EncodeUtf8(lo);
    const std::string b = EncodeUtf8(hi);
    std::vector<std::pair<uint8_t, uint8_t>> sequence;
    for (size_t k = 0; k < a.size(); ++k) {
      sequence.emplace_back(static_cast<uint8_t>(a[k]), static_cast<uint8_t>(b[k]));
    }
    out.push_back(std::move(sequence));
    return;
  }
}

struct Node {
  enum class Kind { kEmpty, kChars, kConcat, kAlt, kRepeat };
  Kind kind = Kind::kEmpty;
  CharSet chars;
  std::vector<Node> children;
  int32_t min = 0;
  int32_t max = 0;  // -1: unbounded
};

class Parser {
 public:
  explicit Parser(std::string_view pattern) : p_(pattern) {}

  Result<Node> Parse() {
    if (!p_.empty() && p_[0] == '^') pos_ = 1;
    BMAD_ASSIGN_OR_RETURN(Node node, ParseAlternation(0));
    if (pos_ < p_.size()) return Error("unbalanced ')'");
    return node;
  }

 private:
  Status Error(const std::string& what) const {
    return InvalidArgument("the pattern " + what + " at byte " + std::to_string(pos_));
  }
  bool More() const { return pos_ < p_.size(); }
  char Peek() const { return p_[pos_]; }

  Result<Node> ParseAlternation(int depth) {
    Node alt{Node::Kind::kAlt, {}, {}, 0, 0};
    while (true) {
      BMAD_ASSIGN_OR_RETURN(Node branch, ParseConcatenation(depth));
      alt.children.push_back(std::move(branch));
      if (!More() || Peek() != '|') break;
      ++pos_;
    }
    if (alt.children.size() == 1) return std::move(alt.children.front());
    return alt;
  }

  Result<Node> ParseConcatenation(int depth) {
    Node concat{Node::Kind::kConcat, {}, {}, 0, 0};
    while (More() && Peek() != '|' && Peek() != ')') {
      if (Peek() == '$') {
        if (pos_ + 1 != p_.size()) return Error("has '$' other than at its end");
        ++pos_;
        break;
      }
      if (Peek() == '^') return Error("has '^' other than at its start");
      BMAD_ASSIGN_OR_RETURN(Node atom, ParseAtom(depth));
      BMAD_ASSIGN_OR_RETURN(atom, ParseQuantifiers(std::move(atom)));
      concat.children.push_back(std::move(atom));
    }
    if (concat.children.empty()) return Node{};
    if (concat.children.size() == 1) return std::move(concat.children.front());
    return concat;
  }

  // A '{' at pos_ that opens {m}, {m,}, {m,n} or {,n}: its m and n (-1: unbounded), and the
  // position after '}'.
  std::optional<std::pair<std::pair<int64_t, int64_t>, size_t>> BraceQuantifier() const {
    size_t i = pos_ + 1;
    auto number = [&](int64_t* value) {
      const size_t from = i;
      *value = 0;
      while (i < p_.size() && p_[i] >= '0' && p_[i] <= '9') {
        *value = std::min<int64_t>(*value * 10 + (p_[i] - '0'), 1'000'000);
        ++i;
      }
      return i > from;
    };
    int64_t m = 0;
    int64_t n = 0;
    const bool has_m = number(&m);
    if (i < p_.size() && p_[i] == '}') {
      if (!has_m) return std::nullopt;
      return std::make_pair(std::make_pair(m, m), i + 1);
    }
    if (i >= p_.size() || p_[i] != ',') return std::nullopt;
    ++i;
    const bool has_n = number(&n);
    if (i >= p_.size() || p_[i] != '}') return std::nullopt;  // {,} is {0,}, as in Python
    return std::make_pair(std::make_pair(has_m ? m : 0, has_n ? n : -1), i + 1);
  }

  Result<Node> ParseQuantifiers(Node atom) {
    bool quantified = false;
    while (More()) {
      int64_t min = 0;
      int64_t max = 0;
      const char c = Peek();
      if (c == '*' || c == '+' || c == '?') {
        min = c == '+' ? 1 : 0;
        max = c == '?' ? 1 : -1;
        ++pos_;
      } else if (const auto brace = c == '{' ? BraceQuantifier() : std::nullopt; brace) {
        const auto [bounds, after] = *brace;
        min = bounds.first;
        max = bounds.second;
        if (max >= 0 && min > max) return Error("has a repeat {m,n} with m > n");
        if (min > RegexNfa::kMaxRepeat || max > RegexNfa::kMaxRepeat) {
          return Error("repeats more than " + std::to_string(RegexNfa::kMaxRepeat) + " times");
        }
        pos_ = after;
      } else {
        break;
      }
      if (quantified) return Error("repeats a repeat (put the first in a group)");
      quantified = true;
      if (More() && Peek() == '?') ++pos_;  // lazy: the same texts
      Node repeat{Node::Kind::kRepeat, {}, {}, static_cast<int32_t>(min), static_cast<int32_t>(max)};
      repeat.children.push_back(std::move(atom));
      atom = std::move(repeat);
    }
    return atom;
  }

  Result<Node> ParseAtom(int depth) {
    const char c = Peek();
    if (c == '(') return ParseGroup(depth);
    if (c == '[') return ParseClass();
    if (c == '*' || c == '+' || c == '?' || (c == '{' && BraceQuantifier())) return Error("has nothing to repeat");
    if (c == '.') {
      ++pos_;
      return Chars(Complement({{'\n', '\n'}}));
    }
    if (c == '\\') {
      BMAD_ASSIGN_OR_RETURN(CharSet set, ParseEscape(/*in_class=*/false));
      return Chars(std::move(set));
    }
    BMAD_ASSIGN_OR_RETURN(const uint32_t cp, ParseCharacter());
    return Chars({{cp, cp}});
  }

  static Node Chars(CharSet set) { return Node{Node::Kind::kChars, Normalized(std::move(set)), {}, 0, 0}; }

  Result<Node> ParseGroup(int depth) {
    if (depth >= kMaxGroupDepth) return Error("nests groups more than " + std::to_string(kMaxGroupDepth) + " deep");
    ++pos_;  // (
    if (More() && Peek() == '?') {
      const std::string_view rest = p_.substr(pos_);
      if (rest.starts_with("?:")) {
        pos_ += 2;
      } else if (rest.starts_with("?P<") || (rest.starts_with("?<") && !rest.starts_with("?<=") &&
                                              !rest.starts_with("?<!"))) {
        pos_ += rest[1] == 'P' ? 3 : 2;
        // A name is an identifier (ASCII here), as Python requires.
        const size_t name_at = pos_;
        while (More() && (std::isalnum(static_cast<unsigned char>(Peek())) || Peek() == '_')) ++pos_;
        if (!More() || Peek() != '>' || pos_ == name_at || std::isdigit(static_cast<unsigned char>(p_[name_at]))) {
          return Error("has a bad group name");
        }
        ++pos_;
      } else {
        return Error("has a '(?' construct other than (?:...) and named groups (lookarounds, "
                     "backreferences and flags are not supported)");
      }
    }
    BMAD_ASSIGN_OR_RETURN(Node inner, ParseAlternation(depth + 1));
    if (!More() || Peek() != ')') return Error("is missing a ')'");
    ++pos_;
    return inner;
  }

  Result<CharSet> ParseClassMember() {
    if (Peek() == '\\') return ParseEscape(/*in_class=*/true);
    BMAD_ASSIGN_OR_RETURN(const uint32_t cp, ParseCharacter());
    return CharSet{{cp, cp}};
  }

  Result<Node> ParseClass() {
    ++pos_;  // [
    bool negated = false;
    if (More() && Peek() == '^') {
      negated = true;
      ++pos_;
    }
    CharSet set;
    bool first = true;
    while (true) {
      if (!More()) return Error("has an unterminated '['");
      if (Peek() == ']' && !first) break;
      first = false;
      const size_t member_at = pos_;
      BMAD_ASSIGN_OR_RETURN(CharSet member, ParseClassMember());
      const bool single = member.size() == 1 && member[0].lo == member[0].hi;
      const bool range = pos_ + 1 < p_.size() && Peek() == '-' && p_[pos_ + 1] != ']';
      if (range && !single) return Error("has a range starting with a class");
      if (range) {
        ++pos_;
        BMAD_ASSIGN_OR_RETURN(const CharSet upper, ParseClassMember());
        if (upper.size() != 1 || upper[0].lo != upper[0].hi) return Error("has a range ending in a class");
        if (upper[0].lo < member[0].lo) {
          pos_ = member_at;
          return Error("has a range whose end comes before its start");
        }
        member[0].hi = upper[0].lo;
      }
      set.insert(set.end(), member.begin(), member.end());
    }
    ++pos_;  // ]
    return Chars(negated ? Complement(set) : set);
  }

  // One UTF-8 character of the pattern, as itself.
  Result<uint32_t> ParseCharacter() {
    const auto first = static_cast<uint8_t>(p_[pos_]);
    const std::optional<Utf8Lead> lead = ReadUtf8Lead(first);
    if (!lead || pos_ + static_cast<size_t>(lead->length) > p_.size()) return Error("is not valid UTF-8");
    static constexpr uint8_t kLeadBits[] = {0, 0x7F, 0x1F, 0x0F, 0x07};
    uint32_t cp = first & kLeadBits[lead->length];
    for (int k = 1; k < lead->length; ++k) {
      const auto b = static_cast<uint8_t>(p_[pos_ + static_cast<size_t>(k)]);
      const bool in_range = k == 1 ? b >= lead->second_min && b <= lead->second_max : (b & 0xC0) == 0x80;
      if (!in_range) return Error("is not valid UTF-8");
      cp = (cp << 6) | (b & 0x3Fu);
    }
    pos_ += static_cast<size_t>(lead->length);
    return cp;
  }

  Result<uint32_t> ParseHex(size_t digits) {
    if (pos_ + digits > p_.size()) return Error("has a short hexadecimal escape");
    uint32_t value = 0;
    for (size_t k = 0; k < digits; ++k) {
      const char h = p_[pos_ + k];
      const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
      if (d < 0) return Error("has a bad hexadecimal escape");
      value = value * 16 + static_cast<uint32_t>(d);
    }
    pos_ += digits;
    if (value > kMaxCodePoint) return Error("escapes a code point beyond U+10FFFF");
    return value;
  }

  Result<CharSet> ParseEscape(bool in_class) {
    ++pos_;  // backslash
    if (!More()) return Error("ends in a lone backslash");
    const char c = Peek();
    const auto one = [](uint32_t cp) { return CharSet{{cp, cp}}; };
    switch (c) {
      case 'd': ++pos_; return Digits();
      case 'w': ++pos_; return WordChars();
      case 's': ++pos_; return Spaces();
      case 'D': ++pos_; return Complement(Digits());
      case 'W': ++pos_; return Complement(WordChars());
      case 'S': ++pos_; return Complement(Spaces());
      case 'n': ++pos_; return one('\n');
      case 't': ++pos_; return one('\t');
      case 'r': ++pos_; return one('\r');
      case 'f': ++pos_; return one('\f');
      case 'v': ++pos_; return one('\v');
      case 'a': ++pos_; return one('\a');
      case '0': {  // \0 and up to two more octal digits, as in Python
        ++pos_;
        uint32_t value = 0;
        for (int k = 0; k < 2 && More() && Peek() >= '0' && Peek() <= '7'; ++k, ++pos_) value = value * 8 + static_cast<uint32_t>(Peek() - '0');
        return one(value);
      }
      case 'x': ++pos_; { BMAD_ASSIGN_OR_RETURN(const uint32_t cp, ParseHex(2)); return one(cp); }
      case 'u': ++pos_; { BMAD_ASSIGN_OR_RETURN(const uint32_t cp, ParseHex(4)); return one(cp); }
      case 'U': ++pos_; { BMAD_ASSIGN_OR_RETURN(const uint32_t cp, ParseHex(8)); return one(cp); }
      case 'b':
        if (in_class) {  // backspace inside a class, as in Python
          ++pos_;
          return one('\b');
        }
        break;
      default: break;
    }
    if (c >= '1' && c <= '9') {
      // Python's octal escapes: in a class \1 to \7 with up to two more octal digits; outside,
      // three octal digits starting with 0 to 3. Anything else is a backreference.
      const auto octal = [&](size_t k) { return pos_ + k < p_.size() && p_[pos_ + k] >= '0' && p_[pos_ + k] <= '7'; };
      const bool three = c <= '3' && octal(1) && octal(2);
      if (in_class ? c <= '7' : three) {
        uint32_t value = 0;
        for (int k = 0; k < 3 && octal(0); ++k, ++pos_) value = value * 8 + static_cast<uint32_t>(Peek() - '0');
        return one(value);
      }
      return Error("has a backreference, which is not supported");
    }
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      return Error(std::string("has the escape \\") + c + ", which is not supported");
    }
    BMAD_ASSIGN_OR_RETURN(const uint32_t cp, ParseCharacter());  // punctuation or any other character
    return one(cp);
  }

  std::string_view p_;
  size_t pos_ = 0;
};

}  // namespace

// Builds the NFA from the parsed pattern (Thompson's construction): each node a fragment with
// a start state and the dangling exits that the next fragment is patched into.
class RegexCompiler {
 public:
  struct Exit {
    int32_t state;
    bool alt;
  };
  struct Fragment {
    int32_t start;
    std::vector<Exit> exits;
  };

  Result<std::shared_ptr<const RegexNfa>> Build(const Node& root) {
    auto nfa = std::make_shared<RegexNfa>();
    nfa_ = nfa.get();
    const Fragment whole = Compile(root);
    const int32_t match = Add({RegexNfa::State::Kind::kMatch, 0, 0, -1, -1});
    if (too_large_) {
      return InvalidArgument("the pattern needs more than " + std::to_string(RegexNfa::kMaxStates) +
                             " automaton states (its repeats expand it)");
    }
    Patch(whole.exits, match);
    nfa->start_ = whole.start;
    MarkLive(match);
    nfa->FindByteClasses();
    if (nfa->Closure({nfa->start_}).empty()) return InvalidArgument("the pattern matches no text");
    return std::shared_ptr<const RegexNfa>(std::move(nfa));
  }

 private:
  int32_t Add(RegexNfa::State state) {
    if (nfa_->states_.size() >= RegexNfa::kMaxStates) {
      too_large_ = true;
      return 0;
    }
    nfa_->states_.push_back(state);
    return static_cast<int32_t>(nfa_->states_.size() - 1);
  }
  void Patch(const std::vector<Exit>& exits, int32_t target) {
    if (too_large_) return;
    for (const Exit& e : exits) {
      RegexNfa::State& s = nfa_->states_[static_cast<size_t>(e.state)];
      (e.alt ? s.alt : s.next) = target;
    }
  }
  Fragment Empty() {
    const int32_t e = Add({});
    return {e, {{e, false}}};
  }
  // Fragments tried in turn: a chain of splits, each leading to one of them or the next split.
  Fragment Either(std::vector<Fragment> options) {
    if (options.empty()) {  // matches nothing: a byte range no byte is in
      const int32_t never = Add({RegexNfa::State::Kind::kRange, 1, 0, -1, -1});
      return {never, {{never, false}}};
    }
    Fragment out{options.back().start, options.back().exits};
    for (size_t i = options.size() - 1; i-- > 0;) {
      const int32_t split = Add({RegexNfa::State::Kind::kSplit, 0, 0, options[i].start, out.start});
      out.start = split;
      out.exits.insert(out.exits.end(), options[i].exits.begin(), options[i].exits.end());
    }
    return out;
  }
  Fragment Sequence(const Fragment& first, const Fragment& second) {
    Patch(first.exits, second.start);
    return {first.start, second.exits};
  }

  Fragment Compile(const Node& node) {
    if (too_large_) return {0, {}};
    switch (node.kind) {
      case Node::Kind::kEmpty: return Empty();
      case Node::Kind::kChars: {
        std::vector<std::vector<std::pair<uint8_t, uint8_t>>> sequences;
        for (const CodePoints& r : node.chars) AppendUtf8Sequences(r.lo, r.hi, sequences);
        std::vector<Fragment> options;
        for (const auto& sequence : sequences) {
          Fragment chain{-1, {}};
          int32_t previous = -1;
          for (const auto& [lo, hi] : sequence) {
            const int32_t s = Add({RegexNfa::State::Kind::kRange, lo, hi, -1, -1});
            if (previous < 0) {
              chain.start = s;
            } else if (!too_large_) {
              nfa_->states_[static_cast<size_t>(previous)].next = s;
            }
            previous = s;
          }
          chain.exits = {{previous, false}};
          options.push_back(std::move(chain));
        }
        return Either(std::move(options));
      }
      case Node::Kind::kConcat: {
        Fragment out = Compile(node.children.front());
        for (size_t i = 1; i < node.children.size(); ++i) out = Sequence(out, Compile(node.children[i]));
        return out;
      }
      case Node::Kind::kAlt: {
        std::vector<Fragment> options;
        for (const Node& child : node.children) options.push_back(Compile(child));
        return Either(std::move(options));
      }
      case Node::Kind::kRepeat: {
        const Node& child = node.children.front();
        Fragment out = Empty();
        for (int32_t i = 0; i < node.min && !too_large_; ++i) out = Sequence(out, Compile(child));
        if (node.max < 0) {
          const int32_t loop = Add({RegexNfa::State::Kind::kSplit, 0, 0, -1, -1});
          const Fragment body = Compile(child);
          if (!too_large_) nfa_->states_[static_cast<size_t>(loop)].next = body.start;
          Patch(body.exits, loop);
          return Sequence(out, Fragment{loop, {{loop, true}}});
        }
        if (node.max == node.min) return out;
        // The optional copies nested, x(x(x)?)?)? rather than x?x?x?: after k of them have been
        // read, only the next one or the end is open (the flat form keeps every later copy
        // open, and the DFA's states grow with the count).
        int32_t first = -1;
        std::vector<Exit> exits;
        std::vector<Exit> previous_body_exits;
        for (int32_t i = node.min; i < node.max && !too_large_; ++i) {
          const int32_t split = Add({RegexNfa::State::Kind::kSplit, 0, 0, -1, -1});
          if (first < 0) {
            first = split;
          } else {
            Patch(previous_body_exits, split);
          }
          const Fragment body = Compile(child);
          if (!too_large_) nfa_->states_[static_cast<size_t>(split)].next = body.start;
          exits.push_back({split, true});
          previous_body_exits = body.exits;
        }
        exits.insert(exits.end(), previous_body_exits.begin(), previous_body_exits.end());
        return Sequence(out, Fragment{first, std::move(exits)});
      }
    }
    return Empty();
  }

  // live[i]: the match state is reachable from i.
  void MarkLive(int32_t match) {
    const std::vector<RegexNfa::State>& states = nfa_->states_;
    std::vector<std::vector<int32_t>> into(states.size());
    for (size_t i = 0; i < states.size(); ++i) {
      const RegexNfa::State& s = states[i];
      if (s.kind == RegexNfa::State::Kind::kRange && s.lo > s.hi) continue;  // never taken
      if (s.next >= 0) into[static_cast<size_t>(s.next)].push_back(static_cast<int32_t>(i));
      if (s.kind == RegexNfa::State::Kind::kSplit && s.alt >= 0) into[static_cast<size_t>(s.alt)].push_back(static_cast<int32_t>(i));
    }
    nfa_->live_.assign(states.size(), false);
    std::vector<int32_t> stack = {match};
    nfa_->live_[static_cast<size_t>(match)] = true;
    while (!stack.empty()) {
      const int32_t i = stack.back();
      stack.pop_back();
      for (const int32_t from : into[static_cast<size_t>(i)]) {
        if (nfa_->live_[static_cast<size_t>(from)]) continue;
        nfa_->live_[static_cast<size_t>(from)] = true;
        stack.push_back(from);
      }
    }
  }

  RegexNfa* nfa_ = nullptr;
  bool too_large_ = false;
};

Result<std::shared_ptr<const RegexNfa>> RegexNfa::Compile(std::string_view pattern) {
  BMAD_ASSIGN_OR_RETURN(const Node root, Parser(pattern).Parse());
  return RegexCompiler().Build(root);
}

std::vector<int32_t> RegexNfa::Closure(const std::vector<int32_t>& from) const {
  std::vector<int32_t> out;
  std::vector<bool> seen(states_.size(), false);
  std::vector<int32_t> stack(from.rbegin(), from.rend());
  while (!stack.empty()) {
    const int32_t i = stack.back();
    stack.pop_back();
    if (i < 0 || seen[static_cast<size_t>(i)] || !live_[static_cast<size_t>(i)]) continue;
    seen[static_cast<size_t>(i)] = true;
    const State& s = states_[static_cast<size_t>(i)];
    if (s.kind == State::Kind::kSplit) {
      stack.push_back(s.alt);
      stack.push_back(s.next);
    } else {
      out.push_back(i);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

void RegexNfa::FindByteClasses() {
  std::array<bool, 257> starts_class{};  // a class starts at 0, and wherever a range starts or ends
  starts_class[0] = true;
  for (const State& s : states_) {
    if (s.kind != State::Kind::kRange) continue;
    starts_class[s.lo] = true;
    starts_class[static_cast<size_t>(s.hi) + 1] = true;
  }
  classes_.clear();
  for (int b = 0; b < 256; ++b) {
    if (starts_class[static_cast<size_t>(b)]) classes_.push_back({static_cast<uint8_t>(b), static_cast<uint8_t>(b)});
    classes_.back().last = static_cast<uint8_t>(b);
    class_of_[static_cast<size_t>(b)] = static_cast<uint8_t>(classes_.size() - 1);
  }
}

}  // namespace bmad::sampling
