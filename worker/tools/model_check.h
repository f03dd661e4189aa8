// `bmad model check --config FILE [--set section.key=value]...`: whether the config's model
// serves under it, from the file's metadata alone (nothing is loaded into memory): the GGUF
// opens, the architecture and tokenizer are ones bmad runs, every tensor has the name, shape
// and type bmad computes with (f32, f16, q8_0), the context length fits, and the parallel
// layout (parallel.tp, parallel.pp, parallel.stage_layers) splits it. What every
// process would otherwise find out only once started; deploy/cluster.sh asks it before it stops
// a running cluster.
#pragma once

#include <string>
#include <vector>

#include "common/cli/command.h"
#include "common/config/config.h"
#include "common/status.h"

namespace bmad::tools {

// One line describing the model under `config` ("6 layers, 8 heads (4 KV), ..."), or the first
// problem: kInvalidArgument for a layout that does not split it, the loader's error otherwise.
Result<std::string> CheckModelServes(const ServerConfig& config);

// Exit codes: 0 it serves; 1 it does not (the reason on stderr); 2 usage or an invalid config.
std::vector<cli::Command> ModelCheckCommands();

}  // namespace bmad::tools
