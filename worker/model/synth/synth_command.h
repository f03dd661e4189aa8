// `bmad model synth`: writes a random-weight Llama model (see model_synth.h).
#pragma once

#include <vector>

#include "common/cli/command.h"

namespace bmad::synth {

// Exit codes: 0 written; 2 usage (bad or missing flag, invalid shape); 1 failure (cannot read
// --vocab-from, cannot write --out).
std::vector<cli::Command> ModelSynthCommands();

}  // namespace bmad::synth
