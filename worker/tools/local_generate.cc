#include "worker/tools/local_generate.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>

#include "common/cli/flags.h"
#include "common/cli/sampling_flags.h"
#include "common/config/config.h"
#include "worker/engine/output_processor.h"
#include "worker/model/llama/llama_model.h"
#include "worker/model/tokenizer/tokenizer.h"
#include "worker/sampling/sampler.h"
#include "worker/sampling/sampling_params_validation.h"
#include "worker/server/replica.h"
#include "worker/server/replica_memory.h"

namespace bmad::tools {
namespace {

constexpr int64_t kBlockSize = 16;

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

Result<LocalGenerateStats> LocalGenerate(const LocalGenerateOptions& o,
                                         const std::function<void(std::string_view)>& on_text) {
  // The memory outlives the backend, which returns its scratch to it when destroyed.
  std::unique_ptr<worker::ReplicaMemory> memory;
  BMAD_ASSIGN_OR_RETURN(std::unique_ptr<kernels::Backend> backend,
                        worker::MakeBackend(o.backend, o.threads));
  // Overflow chunks of the last step go back to the backend before it is destroyed.
  struct ResetWorkspace {
    std::unique_ptr<worker::ReplicaMemory>& memory;
    ~ResetWorkspace() {
      if (memory) memory->workspace().Reset();
    }
  } reset_workspace{memory};
  BMAD_ASSIGN_OR_RETURN(std::unique_ptr<model::LlamaModel> model,
                        model::LlamaModel::Open(o.model_path, *backend));
  const model::LlamaConfig& c = model->config();
  BMAD_ASSIGN_OR_RETURN(tokenizer::Tokenizer tok, tokenizer::LoadModelTokenizer(model->file(), c.n_vocab, o.model_path));
  BMAD_RETURN_IF_ERROR(sampling::ValidateSamplingParams(o.sampling, tok.vocab_size()));

  const std::vector<int32_t> prompt = tok.Encode(o.prompt);
  if (prompt.empty()) return InvalidArgument("the prompt is empty (and the model adds no BOS)");
  const int64_t room = c.n_ctx_train - static_cast<int64_t>(prompt.size());
  if (room < 1) {
    return OutOfRange("the prompt has " + std::to_string(prompt.size()) +
                      " tokens; the model's context length is " + std::to_string(c.n_ctx_train) +
                      ", which leaves no room to generate");
  }
  const int64_t max_new = std::min<int64_t>(o.sampling.max_tokens, room);
  std::vector<float> logits(static_cast<size_t>(c.n_vocab));
  const int64_t total = static_cast<int64_t>(prompt.size()) + max_new;
  const int64_t blocks = (total + kBlockSize - 1) / kBlockSize;
  // The worker's memory layout at this request's size: one arena (device memory on a GPU) for
  // the weights, the request's KV blocks, the step workspace and kernel scratch.
  worker::ReplicaMemorySizes sizes = worker::SizeReplicaMemory(*model, o.prefill_chunk, 1, kBlockSize);
  sizes.kv_blocks = blocks + 1;
  BMAD_ASSIGN_OR_RETURN(memory, worker::ReplicaMemory::Create(
                                    sizes, 0, backend->host_memory() ? nullptr : backend.get()));
  backend->SetMemoryHooks(memory->BackendHooks());
  model->PrepareWeights();
  BMAD_RETURN_IF_ERROR(backend->Synchronize().WithContext("preparing the weights"));
  model::KvCache cache(model->CacheShape(blocks + 1, kBlockSize), memory->KvMemory());
  std::vector<int32_t> table(static_cast<size_t>(blocks));
  std::iota(table.begin(), table.end(), 1);  // block 0 stays reserved, as in the worker
  auto forward = [&](const model::SequenceStep& step) {
    memory->workspace().Reset();
    return model->Forward(std::span(&step, 1), cache, logits.data(), &memory->workspace());
  };

  std::shared_ptr<const sampling::TokenTexts> texts;
  BMAD_ASSIGN_OR_RETURN(std::optional<sampling::OutputConstraint> constraint,
                        engine::MakeOutputConstraint(tok, o.sampling, texts));
  sampling::Sampler sampler(o.sampling, std::random_device{}(), engine::TokensThatEnd(tok, o.sampling),
                            std::move(constraint));
  engine::OutputProcessor output(tok, o.sampling, prompt, max_new);
  LocalGenerateStats stats;
  stats.prompt_tokens = static_cast<int64_t>(prompt.size());
  if (max_new < o.sampling.max_tokens) stats.context_limited_to = max_new;

  auto start = std::chrono::steady_clock::now();
  for (size_t done = 0; done < prompt.size();) {
    const size_t take = std::min(prompt.size() - done, static_cast<size_t>(o.prefill_chunk));
    const model::SequenceStep step{std::span<const int32_t>(prompt).subspan(done, take),
                                   static_cast<int32_t>(done), table,
                                   done + take == prompt.size()};
    BMAD_RETURN_IF_ERROR(forward(step));
    done += take;
  }
  stats.prefill_seconds = SecondsSince(start);

  start = std::chrono::steady_clock::now();
  int32_t position = static_cast<int32_t>(prompt.size());
  while (true) {
    BMAD_ASSIGN_OR_RETURN(sampling::SampleResult s,
                          sampler.Sample(logits, prompt, output.generated()));
    if (s.logprob) stats.logprobs.push_back(*s.logprob);
    engine::TokenOutcome outcome = output.OnToken(s.token_id);
    if (!outcome.text.empty()) on_text(outcome.text);
    if (outcome.finished) {
      stats.finish_reason = outcome.reason;
      break;
    }
    const model::SequenceStep step{std::span<const int32_t>(&s.token_id, 1), position, table,
                                   true};
    BMAD_RETURN_IF_ERROR(forward(step));
    ++position;
  }
  stats.decode_seconds = SecondsSince(start);
  stats.generated_ids = output.generated();
  stats.generated_tokens = static_cast<int64_t>(stats.generated_ids.size());
  return stats;
}

namespace {

int RunGenerate(const std::vector<std::string>& args) {
  LocalGenerateOptions o;
  bool quiet = false, show_ids = false;
  cli::SamplingFlags sampling;
  cli::Flags flags(
      "bmad generate --model FILE.gguf --prompt TEXT [flags]\n"
      "       bmad generate --coordinator ENDPOINT --prompt TEXT [flags]   (a cluster: "
      "bmad generate --coordinator ENDPOINT --help)");
  flags.AddString("model", &o.model_path, "GGUF model to run in this process.");
  flags.AddString("prompt", &o.prompt, "Text to continue.");
  sampling.AddTo(flags);
  flags.AddInt("threads", &o.threads, "Compute threads (default: every core).", 0,
                kMaxComputeThreads);
  std::string backend = "cpu";
  flags.AddString("backend", &backend, "Compute backend: cpu or cuda (default cpu).");
  flags.AddBool("ids", &show_ids, "Also print the generated token ids (JSON) to stderr.");
  flags.AddBool("quiet", &quiet, "No statistics on stderr.");
  std::vector<std::string> positional;
  Status s = flags.Parse(args, &positional);
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (s.ok() && o.model_path.empty()) s = InvalidArgument("--model is required");
  if (s.ok() && !flags.Seen("prompt")) s = InvalidArgument("--prompt is required");
  if (s.ok() && !positional.empty()) s = InvalidArgument("unexpected argument '" + positional[0] + "'");
  if (s.ok() && !EnumFromName(backend, &o.backend)) {
    s = InvalidArgument("--backend must be cpu or cuda, got '" + backend + "'");
  }
  if (s.ok() && (sampling.max_tokens < 1 || sampling.max_tokens > (1 << 24))) {
    s = InvalidArgument("--max-tokens must be between 1 and 16777216");
  }
  // The sampling ranges, before the model loads (exit 2, like every other bad flag); what needs
  // the vocabulary (stop token ids) is checked once it is known.
  Result<proto::SamplingParams> params = sampling.Params();
  if (s.ok()) s = params.status();
  if (s.ok()) s = sampling::ValidateSamplingParams(*params, INT32_MAX);
  if (!s.ok()) {
    std::fprintf(stderr, "bmad generate: %s\n", s.message().c_str());
    return 2;
  }
  o.sampling = *params;
  bool wrote = false;
  auto stats = LocalGenerate(o, [&wrote](std::string_view text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    wrote = true;
  });
  // End the text's line (a partial one too) before anything goes to stderr; an error before
  // any text leaves stdout empty.
  if (wrote || stats.ok()) std::printf("\n");
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    // A full disk or a closed pipe: the text is lost, so this is no success.
    std::fprintf(stderr, "bmad generate: cannot write the output: %s\n", std::strerror(errno));
    return 1;
  }
  if (!stats.ok()) {
    std::fprintf(stderr, "bmad generate: %s\n", stats.status().message().c_str());
    return 1;
  }
  if (show_ids) {
    std::string ids = "[";
    for (size_t i = 0; i < stats->generated_ids.size(); ++i) {
      ids += (i ? ", " : "") + std::to_string(stats->generated_ids[i]);
    }
    std::fprintf(stderr, "%s]\n", ids.c_str());
  }
  if (stats->context_limited_to > 0) {
    std::fprintf(stderr, "[--max-tokens %lld is more than the context leaves: at most %lld generated]\n",
                 static_cast<long long>(sampling.max_tokens),
                 static_cast<long long>(stats->context_limited_to));
  }
  if (!quiet) {
    std::fprintf(stderr,
                 "[%lld prompt tokens, %.1f tok/s prefill; %lld generated, %.1f tok/s; finish: %s]\n",
                 static_cast<long long>(stats->prompt_tokens),
                 double(stats->prompt_tokens) / std::max(stats->prefill_seconds, 1e-9),
                 static_cast<long long>(stats->generated_tokens),
                 // The first token came from the prefill's logits: decode_seconds holds one
                 // forward pass fewer than there are generated tokens.
                 double(std::max<int64_t>(stats->generated_tokens - 1, 0)) /
                     std::max(stats->decode_seconds, 1e-9),
                 std::string(proto::FinishReasonName(stats->finish_reason)).c_str());
  }
  return 0;
}

}  // namespace

std::vector<cli::Command> LocalGenerateCommands() {
  return {{{"generate"},
           "Generate text: --model FILE runs the model in this process.",
           RunGenerate}};
}

}  // namespace bmad::tools
