// `bmad tokenize --model FILE.gguf --text "..." [--no-special] [--pieces]`: prints the token ids
// of a text as llama.cpp's llama-tokenize would compute them, as one JSON array.
#pragma once

#include <vector>

#include "common/cli/command.h"

namespace bmad {

// {"tokenize"}: on success prints `[1, 9038, 2501]` (or, with --pieces,
// `[{"id": 1, "piece": ""}, ...]`, pieces JSON-escaped with invalid UTF-8 as U+FFFD) and exits
// 0. A flag error or missing --model/--text is one line on stderr and exit code 2; a model that
// cannot be opened or has no usable vocabulary is one line and exit code 1.
std::vector<cli::Command> TokenizeCommands();

}  // namespace bmad
