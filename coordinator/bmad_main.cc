// `bmad`: one executable for users; every subcommand lives in a library.
#include <vector>

#include "common/cli/command.h"
#include "common/config/config_command.h"
#include "worker/model/synth/synth_command.h"
#include "worker/model/tokenizer/tokenize_command.h"
#include "worker/tools/bench_decode.h"
#include "worker/tools/bench_serve.h"
#include "worker/tools/local_generate.h"

int main(int argc, char** argv) {
  std::vector<bmad::cli::Command> commands;
  for (auto& c : bmad::ConfigCommands()) commands.push_back(std::move(c));
  for (auto& c : bmad::synth::ModelSynthCommands()) commands.push_back(std::move(c));
  for (auto& c : bmad::TokenizeCommands()) commands.push_back(std::move(c));
  for (auto& c : bmad::tools::LocalGenerateCommands()) commands.push_back(std::move(c));
  for (auto& c : bmad::tools::BenchDecodeCommands()) commands.push_back(std::move(c));
  for (auto& c : bmad::tools::BenchServeCommands()) commands.push_back(std::move(c));
  return bmad::cli::Dispatch(commands, argc, argv);
}
