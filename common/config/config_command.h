// `bmad config check FILE`: validates a config file and prints the effective configuration.
#pragma once

#include <vector>

#include "common/cli/command.h"

namespace bmad {

std::vector<cli::Command> ConfigCommands();

}  // namespace bmad
