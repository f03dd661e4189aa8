#include "common/json_nesting.h"

#include <algorithm>

namespace bmad {
namespace {

// Calls `bracket(i, opens)` for each bracket of `text` outside strings, in order, while it
// returns true.
template <typename Bracket>
void ForEachBracket(std::string_view text, Bracket bracket) {
  bool in_string = false;
  bool escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if ((c == '[' || c == '{' || c == ']' || c == '}') && !bracket(i, c == '[' || c == '{')) {
      return;
    }
  }
}

}  // namespace

size_t JsonNestingDepth(std::string_view text) {
  size_t depth = 0;
  size_t deepest = 0;
  ForEachBracket(text, [&](size_t, bool opens) {
    if (opens) {
      deepest = std::max(deepest, ++depth);
    } else if (depth > 0) {
      --depth;
    }
    return true;
  });
  return deepest;
}

size_t JsonContainerEnd(std::string_view text) {
  size_t depth = 0;
  size_t end = std::string_view::npos;
  ForEachBracket(text, [&](size_t i, bool opens) {
    if (opens) {
      ++depth;
      return true;
    }
    if (depth > 0 && --depth == 0) {
      end = i + 1;
      return false;
    }
    return true;
  });
  return end;
}

}  // namespace bmad
