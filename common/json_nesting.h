// How deep a JSON text's arrays and objects nest, found without parsing it: the JSON library
// (nlohmann) copies, compares, writes and frees values recursively, so text from a client is
// measured first and refused when it nests too deep.
#pragma once

#include <cstddef>
#include <string_view>

namespace bmad {

// The deepest nesting of arrays and objects in `text`, counting brackets outside strings only.
// The text need not be valid JSON: an unclosed string or container is measured as far as it goes.
size_t JsonNestingDepth(std::string_view text);

}  // namespace bmad
