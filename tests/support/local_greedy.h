// The text `bmad generate --model` gives (greedy, in this process, one thread): what every
// end-to-end test compares a cluster's answers with.
#pragma once

#include <cstdint>
#include <string>

namespace bmad::testing {

std::string LocalGreedyText(const std::string& model, const std::string& prompt,
                            uint32_t max_tokens, bool ignore_eos = false);
// The same with response_format json_object (`bmad generate --json`), or json_schema when
// `schema` is given (`bmad generate --json-schema`).
std::string LocalGreedyJson(const std::string& model, const std::string& prompt, uint32_t max_tokens,
                            const std::string& schema = "");

}  // namespace bmad::testing
