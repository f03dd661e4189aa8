// How deep a JSON text's arrays and objects nest, and where its first one ends, found without
// parsing it: the JSON library
// (nlohmann) copies, compares, writes and frees values recursively, so text from a client is
// measured first and refused when it nests too deep.
#pragma once

#include <cstddef>
#include <string_view>

namespace bmad {

// The deepest nesting of arrays and objects in `text`, counting brackets outside strings only.
// The text need not be valid JSON: an unclosed string or container is measured as far as it goes.
size_t JsonNestingDepth(std::string_view text);

// Where the first array or object of `text` closes (the index past its closer), brackets counted
// outside strings; npos when it does not close in `text`. Finds the end of one JSON value among
// others (a model's calls separated by ';') before it is parsed.
size_t JsonContainerEnd(std::string_view text);

}  // namespace bmad
