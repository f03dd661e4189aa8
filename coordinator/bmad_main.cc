// `bmad`: one executable for users; every subcommand lives in a library.
#include <vector>

#include "common/cli/command.h"
#include "common/config/config_command.h"
#include "coordinator/client/client_commands.h"
#include "worker/model/synth/synth_command.h"
#include "worker/model/tokenizer/tokenize_command.h"
#include "worker/tools/bench_decode.h"
#include "worker/tools/bench_serve.h"
#include "worker/tools/local_generate.h"
#include "worker/tools/model_check.h"

int main(int argc, char** argv) {
  std::vector<bmad::cli::Command> commands;
  auto add = [&](std::vector<bmad::cli::Command> more) {
    for (auto& c : more) commands.push_back(std::move(c));
  };
  add(bmad::ConfigCommands());
  add(bmad::synth::ModelSynthCommands());
  add(bmad::tools::ModelCheckCommands());
  add(bmad::TokenizeCommands());
  // `generate` runs the model here (--model) or asks a cluster (--coordinator).
  for (bmad::cli::Command& local : bmad::tools::LocalGenerateCommands()) {
    auto run_local = local.run;
    local.summary = "Generate text: --model FILE runs it here, --coordinator ENDPOINT asks a cluster.";
    local.run = [run_local](const std::vector<std::string>& args) {
      return bmad::client::WantsRemoteGenerate(args) ? bmad::client::RunRemoteGenerate(args)
                                                     : run_local(args);
    };
    commands.push_back(std::move(local));
  }
  add(bmad::client::ClientCommands());
  add(bmad::tools::BenchDecodeCommands());
  add(bmad::tools::BenchServeCommands());
  return bmad::cli::Dispatch(commands, argc, argv);
}
