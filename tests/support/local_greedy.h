// The text `bmad generate --model` gives (greedy, in this process, one thread): what every
// end-to-end test compares a cluster's answers with.
#pragma once

#include <cstdint>
#include <string>

namespace bmad::testing {

std::string LocalGreedyText(const std::string& model, const std::string& prompt,
                            uint32_t max_tokens, bool ignore_eos = false);

}  // namespace bmad::testing
