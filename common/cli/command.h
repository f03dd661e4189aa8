// The `bmad` command's subcommands. Each library contributes a list of Commands; the `bmad`
// executable is a dispatcher that owns none of them.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace bmad::cli {

struct Command {
  std::vector<std::string> path;  // e.g. {"config", "check"}
  std::string summary;            // one line for `bmad --help`
  // Runs with the arguments after the path; returns the process exit code.
  std::function<int(const std::vector<std::string>& args)> run;
};

// Finds the longest command path matching argv and runs it; prints help for no match.
int Dispatch(const std::vector<Command>& commands, int argc, char** argv);

}  // namespace bmad::cli
