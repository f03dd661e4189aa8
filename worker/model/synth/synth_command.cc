#include "worker/model/synth/synth_command.h"

#include <cstdio>
#include <memory>
#include <string>

#include "common/cli/flags.h"
#include "worker/model/gguf/gguf_file.h"
#include "worker/model/synth/model_synth.h"

namespace bmad::synth {
namespace {

constexpr char kUsage[] =
    "bmad model synth --out FILE --layers L --dim D --heads H [--kv-heads K] --ffn F "
    "(--vocab V | --vocab-from FILE.gguf) [--ctx N] [--dtype f32|f16|bf16|q8_0|q4_0|q5_0|q4_1|q5_1|q4_k|q6_k|q4_k_m|q5_k_m] [--seed S] "
    "[--name N] [--text-only]";

int UsageError(const std::string& message) {
  std::fprintf(stderr, "bmad model synth: %s\n", message.c_str());
  return 2;
}

// "1,234,567": parameter counts are read by people.
std::string WithThousands(int64_t n) {
  const std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && digits[i - 1] != '-' && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

int RunModelSynth(const std::vector<std::string>& args) {
  SynthSpec spec;
  std::string out, dtype = "f16";
  int64_t layers = 0, dim = 0, heads = 0, kv_heads = 0, ffn = 0, vocab = 0, ctx = spec.ctx;
  int64_t seed = 0;
  cli::Flags flags(kUsage);
  flags.AddString("out", &out, "The GGUF file to write (required).");
  flags.AddInt("layers", &layers, "Transformer blocks (required).");
  flags.AddInt("dim", &dim, "Embedding width (required).");
  flags.AddInt("heads", &heads, "Attention heads; must divide --dim (required).");
  flags.AddInt("kv-heads", &kv_heads, "Key/value heads; must divide --heads (default: --heads).");
  flags.AddInt("ffn", &ffn, "Feed-forward width (required).");
  flags.AddInt("vocab", &vocab, "Vocabulary size (required without --vocab-from, >= 259).");
  flags.AddInt("ctx", &ctx, "Context length written to the file (default 2048).");
  flags.AddString("dtype", &dtype, "Matrix type: f32, f16 (default), bf16, q8_0, q4_0, q5_0, q4_1, q5_1, q4_k, q6_k, or q4_k_m / q5_k_m (q4_k / q5_k with q6_k where llama.cpp's Q4_K_M / Q5_K_M put it).");
  flags.AddInt("seed", &seed, "Seed of the random weights (default 0).");
  flags.AddString("vocab-from", &spec.vocab_from,
                  "Copy the vocabulary (every tokenizer.* key) from this GGUF file.");
  flags.AddString("name", &spec.name, "general.name (default bmad-synth).");
  flags.AddBool("text-only", &spec.text_only,
                "Zero the output rows of byte, control and unknown tokens, so greedy output is "
                "always valid UTF-8 text (for benchmarks against servers that need it).");
  std::vector<std::string> positional;
  if (Status s = flags.Parse(args, &positional); !s.ok()) return UsageError(s.message());
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (!positional.empty()) return UsageError("unexpected argument '" + positional[0] + "'");
  for (const char* required : {"out", "layers", "dim", "heads", "ffn"}) {
    if (!flags.Seen(required)) return UsageError(std::string("--") + required + " is required");
  }
  if (!flags.Seen("vocab") && spec.vocab_from.empty()) {
    return UsageError("--vocab or --vocab-from is required");
  }
  if (out.empty()) return UsageError("--out must name a file");
  if (seed < 0) return UsageError("--seed must not be negative, got " + std::to_string(seed));
  Result<SynthDtype> parsed_dtype = ParseSynthDtype(dtype);
  if (!parsed_dtype.ok()) return UsageError("--dtype: " + parsed_dtype.status().message());

  spec.layers = layers;
  spec.dim = dim;
  spec.heads = heads;
  spec.kv_heads = flags.Seen("kv-heads") ? kv_heads : heads;
  spec.ffn = ffn;
  spec.vocab = vocab;
  spec.ctx = ctx;
  spec.dtype = *parsed_dtype;
  spec.seed = static_cast<uint64_t>(seed);
  if (Status s = ValidateSynthSpec(spec); !s.ok()) return UsageError(s.message());

  if (Status s = SynthesizeModel(spec, out); !s.ok()) {
    std::fprintf(stderr, "bmad model synth: %s\n", s.message().c_str());
    return 1;
  }
  // Reading the file back proves it is whole and gives the numbers people check.
  Result<std::unique_ptr<gguf::GgufFile>> written = gguf::GgufFile::Open(out);
  if (!written.ok()) {
    std::fprintf(stderr, "bmad model synth: wrote %s but cannot read it back: %s\n", out.c_str(),
                 written.status().message().c_str());
    return 1;
  }
  int64_t parameters = 0;
  for (const gguf::TensorInfo& t : (*written)->tensors()) parameters += t.elements();
  const uint64_t bytes = (*written)->file_size();
  std::printf("%s: %s parameters, %s, %.1f MiB (%s bytes)\n", out.c_str(),
              WithThousands(parameters).c_str(), std::string(SynthDtypeName(spec.dtype)).c_str(),
              static_cast<double>(bytes) / (1024.0 * 1024.0),
              WithThousands(static_cast<int64_t>(bytes)).c_str());
  return 0;
}

}  // namespace

std::vector<cli::Command> ModelSynthCommands() {
  return {{{"model", "synth"},
           "Write a Llama GGUF model with random weights (any size, deterministic).",
           RunModelSynth}};
}

}  // namespace bmad::synth
