#include "worker/tools/bench_decode.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <random>

#include "common/cli/flags.h"
#include "common/config/config.h"
#include "kernels/cpu/cpu_backend.h"
#include "worker/model/llama/llama_model.h"
#include "worker/server/replica_memory.h"
#include "worker/model/tokenizer/utf8.h"

namespace bmad::tools {
namespace {

constexpr int64_t kMaxLength = int64_t{1} << 24;
constexpr int64_t kMaxBatch = 4096;
constexpr int64_t kMaxBlockSize = 1024;

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

Status InFlagRange(const char* flag, int64_t value, int64_t max) {
  if (value >= 1 && value <= max) return Status::Ok();
  return InvalidArgument(std::string("--") + flag + " must be in [1, " + std::to_string(max) +
                         "], got " + std::to_string(value));
}

}  // namespace

Status ValidateBenchDecodeOptions(const BenchDecodeOptions& o) {
  BMAD_RETURN_IF_ERROR(InFlagRange("prompt-len", o.prompt_len, kMaxLength));
  BMAD_RETURN_IF_ERROR(InFlagRange("gen-len", o.gen_len, kMaxLength));
  BMAD_RETURN_IF_ERROR(InFlagRange("prefill-chunk", o.prefill_chunk, kMaxLength));
  BMAD_RETURN_IF_ERROR(InFlagRange("block-size", o.block_size, kMaxBlockSize));
  if (o.batches.empty()) return InvalidArgument("--batch needs at least one batch size");
  for (int64_t b : o.batches) BMAD_RETURN_IF_ERROR(InFlagRange("batch", b, kMaxBatch));
  return Status::Ok();
}

Result<std::vector<BenchDecodeResult>> RunBenchDecode(const BenchDecodeOptions& o,
                                                      std::string* model_summary) {
  BMAD_RETURN_IF_ERROR(ValidateBenchDecodeOptions(o));
  // The arena the weights, KV blocks and scratch live in (made below, once the model is open):
  // declared first so that it outlives the backend and the model, which point into it.
  std::unique_ptr<worker::ReplicaMemory> memory;
  kernels::CpuBackendOptions backend_options;
  backend_options.threads = static_cast<int>(o.threads);
  BMAD_ASSIGN_OR_RETURN(std::unique_ptr<kernels::CpuBackend> owned_backend,
                        kernels::CpuBackend::Create(backend_options));
  kernels::CpuBackend& backend = *owned_backend;
  BMAD_ASSIGN_OR_RETURN(std::unique_ptr<model::LlamaModel> model,
                        model::LlamaModel::Open(o.model_path, backend));
  const model::LlamaConfig& c = model->config();
  if (o.prompt_len + o.gen_len > c.n_ctx_train) {
    return OutOfRange("prompt-len + gen-len (" + std::to_string(o.prompt_len + o.gen_len) +
                      ") exceeds the model's context length " + std::to_string(c.n_ctx_train));
  }
  *model_summary = c.Summary() + "; backend cpu/" + backend.isa() + ", " +
                   std::to_string(backend.threads()) + " threads";

  // The memory a worker runs in (worker/server/replica_memory.h): one arena, sized for the
  // largest batch, holding the prepared weights, the KV blocks, each step's activations and
  // the kernels' scratch.
  const int64_t blocks_per_seq = (o.prompt_len + o.gen_len + o.block_size - 1) / o.block_size;
  const int64_t max_batch = *std::max_element(o.batches.begin(), o.batches.end());
  // The largest step: a prefill chunk (no longer than all the prompts together) or a decode.
  const int64_t max_step_tokens = std::max(std::min(o.prefill_chunk, max_batch * o.prompt_len), max_batch);
  worker::ReplicaMemorySizes sizes =
      worker::SizeReplicaMemory(*model, max_step_tokens, max_batch, o.block_size);
  sizes.kv_blocks = max_batch * blocks_per_seq + 1;  // block 0 is reserved
  const int64_t memory_bytes = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  if (memory_bytes > 0 && static_cast<double>(sizes.Total()) > 0.9 * static_cast<double>(memory_bytes)) {
    return ResourceExhausted("batch " + std::to_string(max_batch) + " needs " +
                             std::to_string(sizes.Total() >> 20) + " MiB for the weights, KV "
                             "cache and workspace; this machine has " +
                             std::to_string(memory_bytes >> 20) + " MiB of memory");
  }
  BMAD_ASSIGN_OR_RETURN(memory, worker::ReplicaMemory::Create(sizes, 0));
  backend.SetMemoryHooks(memory->BackendHooks());
  model->PrepareWeights();
  memory::BumpAllocator& workspace = memory->workspace();
  auto forward = [&](std::span<const model::SequenceStep> steps, const model::KvCache& cache,
                     float* logits) {
    workspace.Reset();
    return model->Forward(steps, cache, logits, &workspace);
  };

  std::vector<BenchDecodeResult> results;
  std::mt19937 rng(1234);
  // Random prompts; past the first ids, which are usually BOS, EOS and unknown.
  const auto last_id = static_cast<int32_t>(c.n_vocab - 1);
  std::uniform_int_distribution<int32_t> token(std::min(3, last_id), last_id);
  for (int64_t batch : o.batches) {
    model::KvCache cache(model->CacheShape(batch * blocks_per_seq + 1, o.block_size), memory->KvMemory());
    std::vector<std::vector<int32_t>> tables(static_cast<size_t>(batch));
    std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(batch));
    for (int64_t s = 0; s < batch; ++s) {
      tables[static_cast<size_t>(s)].resize(static_cast<size_t>(blocks_per_seq));
      std::iota(tables[static_cast<size_t>(s)].begin(), tables[static_cast<size_t>(s)].end(),
                static_cast<int32_t>(1 + s * blocks_per_seq));
      for (int64_t t = 0; t < o.prompt_len; ++t) prompts[static_cast<size_t>(s)].push_back(token(rng));
    }
    std::vector<float> logits(static_cast<size_t>(batch * c.n_vocab));

    // Prefill: the prompts packed into steps of at most prefill_chunk tokens.
    BenchDecodeResult r;
    r.batch = batch;
    auto start = std::chrono::steady_clock::now();
    std::vector<model::SequenceStep> steps;
    std::vector<int64_t> done(static_cast<size_t>(batch), 0);
    // Each sequence's first generated token, greedy, from the logits row of the step that
    // ended its prompt (Forward writes rows only for such steps, in step order).
    std::vector<int32_t> next(static_cast<size_t>(batch));
    std::vector<size_t> ending;
    int64_t seq = 0;
    while (seq < batch) {
      steps.clear();
      ending.clear();
      int64_t budget = o.prefill_chunk;
      for (int64_t s = seq; s < batch && budget > 0; ++s) {
        const auto i = static_cast<size_t>(s);
        const int64_t take = std::min(budget, o.prompt_len - done[i]);
        const bool last = done[i] + take == o.prompt_len;
        steps.push_back({std::span<const int32_t>(prompts[i]).subspan(static_cast<size_t>(done[i]),
                                                                      static_cast<size_t>(take)),
                         static_cast<int32_t>(done[i]), tables[i], last});
        if (last) ending.push_back(i);
        done[i] += take;
        budget -= take;
      }
      BMAD_RETURN_IF_ERROR(forward(steps, cache, logits.data()));
      for (size_t row = 0; row < ending.size(); ++row) {
        backend.Argmax(logits.data() + row * static_cast<size_t>(c.n_vocab), 1, c.n_vocab,
                       &next[ending[row]]);
      }
      while (seq < batch && done[static_cast<size_t>(seq)] == o.prompt_len) ++seq;
    }
    r.prefill_seconds = Seconds(start);

    // Decode: every sequence one token per step, greedy.
    start = std::chrono::steady_clock::now();
    for (int64_t g = 0; g < o.gen_len; ++g) {
      steps.clear();
      for (int64_t s = 0; s < batch; ++s) {
        const auto i = static_cast<size_t>(s);
        steps.push_back({std::span<const int32_t>(&next[i], 1),
                         static_cast<int32_t>(o.prompt_len + g), tables[i], true});
      }
      BMAD_RETURN_IF_ERROR(forward(steps, cache, logits.data()));
      backend.Argmax(logits.data(), batch, c.n_vocab, next.data());
    }
    r.decode_seconds = Seconds(start);
    r.prefill_tokens_per_second = double(batch * o.prompt_len) / r.prefill_seconds;
    r.decode_tokens_per_second = double(batch * o.gen_len) / r.decode_seconds;
    results.push_back(r);
    std::fprintf(stderr, "batch %4lld: prefill %8.1f tok/s (%.2f s), decode %8.1f tok/s (%.2f s)\n",
                 static_cast<long long>(batch), r.prefill_tokens_per_second, r.prefill_seconds,
                 r.decode_tokens_per_second, r.decode_seconds);
  }
  return results;
}

namespace {

int RunBenchDecodeCommand(const std::vector<std::string>& args) {
  BenchDecodeOptions o;
  std::string batches = "1,8,32";
  cli::Flags flags("bmad bench decode --model FILE.gguf [--batch 1,8,32] [flags]");
  flags.AddString("model", &o.model_path, "GGUF model to run.");
  flags.AddString("batch", &batches, "Comma-separated batch sizes (concurrent sequences).");
  flags.AddInt("prompt-len", &o.prompt_len, "Prompt tokens per sequence (default 128).", 1, kMaxLength);
  flags.AddInt("gen-len", &o.gen_len, "Generated tokens per sequence (default 128).", 1, kMaxLength);
  flags.AddInt("threads", &o.threads, "Compute threads (default: every core).", 0,
                kMaxComputeThreads);
  flags.AddInt("prefill-chunk", &o.prefill_chunk, "Tokens per prefill step (default 2048).", 1,
                kMaxLength);
  flags.AddInt("block-size", &o.block_size, "Tokens per KV block (default: cache.block_size's, 8).",
               1, kMaxBlockSize);
  std::vector<std::string> positional;
  Status s = flags.Parse(args, &positional);
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (s.ok() && o.model_path.empty()) s = InvalidArgument("--model is required");
  if (s.ok() && !positional.empty()) s = InvalidArgument("unexpected argument '" + positional[0] + "'");
  if (s.ok()) {
    auto list = cli::ParseIntList(batches, "--batch");
    if (list.ok()) {
      o.batches = *list;
    } else {
      s = list.status();
    }
  }
  if (s.ok()) s = ValidateBenchDecodeOptions(o);  // flag errors: exit 2, like every command
  if (!s.ok()) {
    std::fprintf(stderr, "bmad bench decode: %s\n", s.message().c_str());
    return 2;
  }
  std::string summary;
  auto results = RunBenchDecode(o, &summary);
  if (!results.ok()) {
    std::fprintf(stderr, "bmad bench decode: %s\n", results.status().message().c_str());
    return 1;
  }
  std::printf("model: %s\n", summary.c_str());
  std::printf("%6s %14s %14s\n", "batch", "prefill tok/s", "decode tok/s");
  for (const auto& r : *results) {
    std::printf("%6lld %14.1f %14.1f\n", static_cast<long long>(r.batch),
                r.prefill_tokens_per_second, r.decode_tokens_per_second);
  }
  std::string json = "{\"bench\":\"decode\",\"model\":" + tokenizer::JsonString(o.model_path) +
                     ",\"prompt_len\":" + std::to_string(o.prompt_len) +
                     ",\"gen_len\":" + std::to_string(o.gen_len) + ",\"results\":[";
  for (size_t i = 0; i < results->size(); ++i) {
    const auto& r = (*results)[i];
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "%s{\"batch\":%lld,\"prefill_tokens_per_second\":%.2f,"
                  "\"decode_tokens_per_second\":%.2f}",
                  i ? "," : "", static_cast<long long>(r.batch), r.prefill_tokens_per_second,
                  r.decode_tokens_per_second);
    json += buf;
  }
  std::printf("%s]}\n", json.c_str());
  return 0;
}

}  // namespace

std::vector<cli::Command> BenchDecodeCommands() {
  return {{{"bench", "decode"},
           "Prefill and decode tokens/s of a model in this process, per batch size.",
           RunBenchDecodeCommand}};
}

}  // namespace bmad::tools
