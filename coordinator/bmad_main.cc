// `bmad`: one executable for users; every subcommand lives in a library.
#include <vector>

#include "common/cli/command.h"
#include "common/config/config_command.h"

int main(int argc, char** argv) {
  std::vector<bmad::cli::Command> commands;
  for (auto& c : bmad::ConfigCommands()) commands.push_back(std::move(c));
  return bmad::cli::Dispatch(commands, argc, argv);
}
