#include "worker/tools/model_check.h"

#include <cstdio>
#include <memory>

#include "common/cli/flags.h"
#include "common/config/config_loader.h"
#include "kernels/backend.h"
#include "worker/model/gguf/gguf_file.h"
#include "worker/model/llama/llama_config.h"
#include "worker/model/llama/llama_shard.h"
#include "worker/model/llama/llama_split_check.h"
#include "worker/model/llama/llama_weights.h"
#include "worker/model/tokenizer/tokenizer.h"

namespace bmad::tools {

Result<std::string> CheckModelServes(const ServerConfig& c) {
  BMAD_ASSIGN_OR_RETURN(std::unique_ptr<gguf::GgufFile> file, gguf::GgufFile::Open(c.model.path));
  BMAD_ASSIGN_OR_RETURN(model::LlamaConfig llama, model::ReadLlamaConfig(*file));
  BMAD_RETURN_IF_ERROR(tokenizer::LoadModelTokenizer(*file, llama.n_vocab, c.model.path).status());
  // Every tensor's name, shape and type as the loader wants them (views into the mapped file:
  // only f16 norm vectors are converted, a few KiB).
  BMAD_RETURN_IF_ERROR(model::MapLlamaWeights(*file, llama, model::WholeModel(llama)).status());
  BMAD_ASSIGN_OR_RETURN(const int64_t context,
                        model::ContextLengthToServe(llama, c.model.context_length, c.model.path));
  BMAD_RETURN_IF_ERROR(model::CheckLlamaSplit(*file, llama, c.parallel.tp, c.parallel.pp, c.parallel.stage_layers));
  const std::string_view backend = c.worker.backend == Backend::kCuda ? "cuda" : "cpu";
  BMAD_RETURN_IF_ERROR(model::CheckBackendWeightTypes(
      *file, backend, [&](kernels::WeightType type) { return kernels::BackendHasWeightType(backend, type); }));
  return std::to_string(llama.n_layer) + " layers, " + std::to_string(llama.n_head) + " heads (" +
         std::to_string(llama.n_head_kv) + " KV), vocabulary " + std::to_string(llama.n_vocab) + ", context " +
         std::to_string(context) + "; split over tp " + std::to_string(c.parallel.tp) + " x pp " +
         std::to_string(c.parallel.pp);
}

namespace {

int RunModelCheck(const std::vector<std::string>& args) {
  constexpr const char* kCommand = "bmad model check";
  std::string config_path;
  std::vector<std::string> overrides;
  cli::Flags flags("bmad model check --config FILE [--set section.key=value]...");
  flags.AddString("config", &config_path, "The config file whose model.path and parallel layout to check.");
  flags.AddList("set", &overrides, "Override one key after loading the file.");
  std::vector<std::string> positional;
  Status s = flags.Parse(args, &positional);
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (s.ok() && !positional.empty()) s = InvalidArgument("unexpected argument '" + positional[0] + "'");
  if (s.ok() && !flags.Seen("config")) s = InvalidArgument("--config is required");
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", kCommand, s.message().c_str());
    return 2;
  }
  Result<ServerConfig> config = ReadConfigFile(config_path, overrides);
  if (!config.ok()) {
    std::fprintf(stderr, "%s: %s\n", kCommand, config.status().message().c_str());
    return 2;
  }
  Result<std::string> serves = CheckModelServes(*config);
  if (!serves.ok()) {
    std::fprintf(stderr, "%s: %s\n", kCommand, serves.status().ToString().c_str());
    return 1;
  }
  std::printf("%s serves under %s: %s\n", config->model.path.c_str(), config_path.c_str(), serves->c_str());
  return 0;
}

}  // namespace

std::vector<cli::Command> ModelCheckCommands() {
  return {{{"model", "check"}, "Check that the config's model opens and splits as its parallel keys say.",
           RunModelCheck}};
}

}  // namespace bmad::tools
