// bmad_gpu_bench: the GPU parity checks and benchmarks of tests/gpu/run.sh, one subcommand each;
// each prints a Markdown section on stdout (progress on stderr) and exits 1 on failure.
//   bmad_gpu_bench parity --model FILE --prompt 1,403,... [--expected ids] [--tokens 32]
//                         [--strict 32] [--batch 4]
//   bmad_gpu_bench attention
//   bmad_gpu_bench gemm
//   bmad_gpu_bench decode --model FILE (synthesized when missing) [--batch 1,32,256]
//                         [--prompt-len 128] [--gen-len 64]
#include <cstdio>
#include <string>
#include <vector>

#include "common/cli/flags.h"
#include "tests/gpu/gpu_bench.h"

namespace {

using bmad::Status;

std::vector<int32_t> ToIds(const std::vector<int64_t>& v) { return {v.begin(), v.end()}; }

int Finish(const Status& s, const std::string& report, const char* what) {
  std::fputs(report.c_str(), stdout);
  std::fflush(stdout);
  if (!s.ok()) {
    std::printf("\n**%s failed:** %s\n\n", what, s.ToString().c_str());
    std::fprintf(stderr, "bmad_gpu_bench %s: %s\n", what, s.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bmad_gpu_bench parity|attention|gemm|decode [flags]\n");
    return 2;
  }
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  std::vector<std::string> positional;
  std::string report;
  if (command == "parity") {
    bmad::gpu_tests::ParityOptions o;
    std::string prompt, expected;
    bmad::cli::Flags flags("bmad_gpu_bench parity --model FILE --prompt IDS [flags]");
    flags.AddString("model", &o.model, "GGUF model.");
    flags.AddString("prompt", &prompt, "Prompt token ids, comma-separated (BOS included).");
    flags.AddString("expected", &expected, "llama.cpp's greedy ids for the prompt (optional).");
    flags.AddInt("tokens", &o.tokens, "Greedy tokens per sequence (default 32).");
    flags.AddInt("strict", &o.strict, "Leading tokens that must match (default 32).");
    flags.AddInt("batch", &o.batch, "Sequences decoded together (default 4).");
    Status s = flags.Parse(args, &positional);
    if (s.ok()) {
      auto ids = bmad::cli::ParseIntList(prompt, "--prompt");
      s = ids.status();
      if (s.ok()) o.prompt = ToIds(*ids);
    }
    if (s.ok() && !expected.empty()) {
      auto ids = bmad::cli::ParseIntList(expected, "--expected");
      s = ids.status();
      if (s.ok()) o.expected = ToIds(*ids);
    }
    if (s.ok()) s = bmad::gpu_tests::RunParity(o, &report);
    return Finish(s, report, "parity");
  }
  if (command == "attention")
    return Finish(bmad::gpu_tests::RunAttentionBench(&report), report, "attention");
  if (command == "gemm") return Finish(bmad::gpu_tests::RunGemmBench(&report), report, "gemm");
  if (command == "decode") {
    bmad::gpu_tests::DecodeBenchOptions o;
    std::string batches = "1,32,256";
    bmad::cli::Flags flags("bmad_gpu_bench decode --model FILE [flags]");
    flags.AddString("model", &o.model,
                    "GGUF model (a ~1B F16 Llama is synthesized there if missing).");
    flags.AddString("batch", &batches, "Batch sizes (default 1,32,256).");
    flags.AddInt("prompt-len", &o.prompt_len, "Prompt tokens per sequence (default 128).");
    flags.AddInt("gen-len", &o.gen_len, "Generated tokens per sequence (default 64).");
    Status s = flags.Parse(args, &positional);
    if (s.ok()) {
      auto b = bmad::cli::ParseIntList(batches, "--batch");
      s = b.status();
      if (s.ok()) o.batches = *b;
    }
    if (s.ok() && o.model.empty()) s = bmad::InvalidArgument("--model is required");
    if (s.ok()) s = bmad::gpu_tests::RunDecodeBench(o, &report);
    return Finish(s, report, "decode");
  }
  std::fprintf(stderr, "bmad_gpu_bench: unknown command %s\n", command.c_str());
  return 2;
}
