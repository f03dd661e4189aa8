// `bmad config check` as a user runs it: one error per problem with key and line, exit codes.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <tuple>

#include "tests/support/paths.h"
#include "worker/model/gguf/gguf_file.h"
#include "worker/model/gguf/gguf_writer.h"
#include "tests/support/process.h"

namespace bmad::testing {
namespace {

using namespace std::chrono_literals;

struct CliRun {
  int status;
  std::string output;
};

CliRun RunBmad(const std::vector<std::string>& args, const std::string& dir) {
  std::vector<std::string> argv = {BinaryPath("bmad")};
  argv.insert(argv.end(), args.begin(), args.end());
  ChildProcess p;
  EXPECT_TRUE(p.Start(argv, dir + "/out.log")) << p.error();
  auto status = p.Wait(30s);
  EXPECT_TRUE(status.has_value());
  return {status.value_or(-1), p.ReadLog()};
}

TEST(CliConfigCheck, BadFilePrintsOneErrorPerProblem) {
  const std::string dir = MakeTempDir("bmad-cli-");
  {
    std::ofstream f(dir + "/bad.yaml");
    f << "scheduler:\n"
         "  max_batch_tokens: many\n"   // wrong type, line 2
         "  colour: blue\n"             // unknown key, line 3
         "cache:\n"
         "  block_size: 100000\n";      // out of range, line 5
  }
  CliRun r = RunBmad({"config", "check", dir + "/bad.yaml"}, dir);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("bad.yaml:2:21: scheduler.max_batch_tokens: expected an integer"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("bad.yaml:3:3: scheduler.colour: unknown key"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("bad.yaml:5:15: cache.block_size: must be between 1 and 1024"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("3 errors in " + dir + "/bad.yaml\n"), std::string::npos) << r.output;
  // The summary names where the errors are: the overrides, or the file and the overrides.
  CliRun set = RunBmad({"config", "check", std::string(BMAD_SOURCE_DIR) + "/deploy/config/local.yaml",
                        "--set", "parallel.tp=0"}, dir);
  EXPECT_EQ(set.status, 1);
  EXPECT_NE(set.output.find("1 error in the --set overrides\n"), std::string::npos) << set.output;
  CliRun both = RunBmad({"config", "check", dir + "/bad.yaml", "--set", "parallel.tp=0"}, dir);
  EXPECT_NE(both.output.find("4 errors in " + dir + "/bad.yaml and the --set overrides\n"), std::string::npos)
      << both.output;
  std::filesystem::remove_all(dir);
}

TEST(CliConfigCheck, GoodFilePrintsEffectiveConfig) {
  const std::string dir = MakeTempDir("bmad-cli-");
  CliRun r = RunBmad({"config", "check", std::string(BMAD_SOURCE_DIR) + "/deploy/config/local.yaml"},
                  dir);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("is valid"), std::string::npos);
  EXPECT_NE(r.output.find("max_batch_tokens:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("block_size: 8"), std::string::npos) << r.output;
  std::filesystem::remove_all(dir);
}

TEST(CliConfigCheck, UsageErrors) {
  const std::string dir = MakeTempDir("bmad-cli-");
  EXPECT_EQ(RunBmad({"config", "check"}, dir).status, 2);
  EXPECT_EQ(RunBmad({"config", "check", "--frobnicate", "x"}, dir).status, 2);
  CliRun missing = RunBmad({"config", "check", "/nonexistent.yaml"}, dir);
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.output.find("cannot open"), std::string::npos);
  CliRun unknown = RunBmad({"frobnicate"}, dir);
  EXPECT_EQ(unknown.status, 2);
  EXPECT_NE(unknown.output.find("unknown command"), std::string::npos);
  // A group of commands lists its members.
  CliRun group_help = RunBmad({"bench", "--help"}, dir);
  EXPECT_EQ(group_help.status, 0) << group_help.output;
  EXPECT_NE(group_help.output.find("bench decode"), std::string::npos) << group_help.output;
  EXPECT_EQ(group_help.output.find("tokenize"), std::string::npos) << group_help.output;
  CliRun group_alone = RunBmad({"model"}, dir);
  EXPECT_EQ(group_alone.status, 2) << group_alone.output;
  EXPECT_NE(group_alone.output.find("bmad model: which one?"), std::string::npos);
  EXPECT_NE(group_alone.output.find("model synth"), std::string::npos);
  EXPECT_EQ(RunBmad({"bench", "nonsense"}, dir).status, 2);
  CliRun get_help = RunBmad({"config", "get", "--help"}, dir);
  EXPECT_EQ(get_help.status, 0) << get_help.output;
  EXPECT_NE(get_help.output.find("bmad config get section.key FILE"), std::string::npos) << get_help.output;
  // Every command's --help is an answer, not a usage error (config docs's was exit 2).
  for (const std::vector<std::string>& command :
       std::vector<std::vector<std::string>>{{"config", "docs"}, {"config", "check"}, {"generate"}, {"tokenize"},
                                             {"status"}, {"model", "synth"}, {"model", "check"}, {"bench", "decode"},
                                             {"bench", "serve"}, {"bench", "http"}}) {
    std::vector<std::string> argv = command;
    argv.push_back("--help");
    CliRun help = RunBmad(argv, dir);
    EXPECT_EQ(help.status, 0) << argv[0] << " " << argv[1] << ": " << help.output;
    EXPECT_NE(help.output.find("bmad " + command[0]), std::string::npos) << help.output;
  }
  EXPECT_EQ(RunBmad({"config", "docs", "extra"}, dir).status, 2);
  // The servers refuse a stray argument as every bmad command does.
  ChildProcess stray;
  ASSERT_TRUE(stray.Start({BinaryPath("bmad-coordinator"), "--config", dir + "/none.yaml", "stray"}, dir + "/c.log"));
  EXPECT_EQ(stray.Wait(30s).value_or(-1), 2) << stray.ReadLog();
  EXPECT_NE(stray.ReadLog().find("unexpected argument 'stray'"), std::string::npos) << stray.ReadLog();
  std::filesystem::remove_all(dir);
}

// Every program says which version it is: CMake's project version, read here from the source.
TEST(CliVersion, EveryProgramPrintsTheProjectsVersion) {
  std::ifstream cmake(std::string(BMAD_SOURCE_DIR) + "/CMakeLists.txt");
  const std::string text((std::istreambuf_iterator<char>(cmake)), std::istreambuf_iterator<char>());
  const std::string marker = "project(bmad VERSION ";
  const size_t at = text.find(marker);
  ASSERT_NE(at, std::string::npos);
  const std::string version = text.substr(at + marker.size(), text.find(' ', at + marker.size()) - at - marker.size());
  ASSERT_FALSE(version.empty());
  const std::string dir = MakeTempDir("bmad-cli-");
  const CliRun bmad = RunBmad({"--version"}, dir);
  EXPECT_EQ(bmad.status, 0) << bmad.output;
  EXPECT_EQ(bmad.output, "bmad " + version + "\n");
  for (const std::string program : {"bmad-coordinator", "bmad-worker"}) {
    ChildProcess p;
    ASSERT_TRUE(p.Start({BinaryPath(program), "--version"}, dir + "/" + program + ".log")) << p.error();
    EXPECT_EQ(p.Wait(30s).value_or(-1), 0) << p.ReadLog();
    EXPECT_EQ(p.ReadLog(), program + " " + version + "\n");
  }
  std::filesystem::remove_all(dir);
}

// A sampling value out of range is bad usage like any other flag: exit 2, nothing on stdout.
TEST(CliGenerate, SamplingRangesAreUsageErrors) {
  const std::string dir = MakeTempDir("bmad-cli-");
  const std::string model = SharedModelsDir() + "/stories260K.gguf";
  for (const auto& [flag, value, message] :
       {std::tuple<const char*, const char*, const char*>{"--temperature", "-1", "'temperature' must be"},
        {"--top-p", "1.5", "'top_p' must be"},
        {"--min-p", "2", "'min_p' must be"}}) {
    CliRun bad = RunBmad({"generate", "--model", model, "--prompt", "Hi", "--threads", "1", flag, value}, dir);
    EXPECT_EQ(bad.status, 2) << flag << ": " << bad.output;
    EXPECT_NE(bad.output.find(message), std::string::npos) << bad.output;
    EXPECT_EQ(bad.output.find("bmad generate:"), bad.output.rfind("bmad generate:")) << bad.output;
  }
  std::filesystem::remove_all(dir);
}

// --json-schema FILE: the output is a value the schema allows; a schema the compiler refuses is
// bad usage, named, before the model loads.
TEST(CliGenerate, JsonSchemaHoldsTheOutputAndABadOneIsAUsageError) {
  const std::string dir = MakeTempDir("bmad-cli-");
  const std::string model = SharedModelsDir() + "/stories260K.gguf";
  const std::string schema = dir + "/colour.json";
  std::ofstream(schema) << R"({"type":"object","properties":{"colour":{"enum":["red","green"]}},"required":["colour"]})";
  CliRun ok = RunBmad({"generate", "--model", model, "--prompt", "Hi", "--threads", "1", "--temperature", "0",
                       "--max-tokens", "40", "--json-schema", schema}, dir);
  EXPECT_EQ(ok.status, 0) << ok.output;
  EXPECT_TRUE(ok.output.find("\"colour\"") != std::string::npos &&
              (ok.output.find("\"red\"") != std::string::npos || ok.output.find("\"green\"") != std::string::npos))
      << ok.output;
  std::ofstream(schema) << R"({"type":"string","format":"date","pattern":"^[0-9]"})";
  CliRun bad = RunBmad({"generate", "--model", model, "--prompt", "Hi", "--threads", "1", "--json-schema", schema}, dir);
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("'response_format.json_schema.schema' at the root: keyword 'pattern' is not supported"),
            std::string::npos)
      << bad.output;
  std::filesystem::remove_all(dir);
}

// bench serve: a rate so slow it would wait for hours is a typo, and a seed is not negative;
// both are usage errors before any model loads.
TEST(CliBenchServe, ASlowRateAndANegativeSeedAreUsageErrors) {
  const std::string dir = MakeTempDir("bmad-cli-");
  CliRun bad = RunBmad({"bench", "serve", "--model", "/nonexistent.gguf", "--rate", "1e-300"}, dir);
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("--rate must be 0 (all at once) or at least 0.001"), std::string::npos) << bad.output;
  bad = RunBmad({"bench", "serve", "--model", "/nonexistent.gguf", "--seed", "-1"}, dir);
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("--seed"), std::string::npos) << bad.output;
  // A bad length distribution too (it was found only after the model loaded, and exited 1).
  bad = RunBmad({"bench", "serve", "--model", "/nonexistent.gguf", "--prompt-len", "10-5"}, dir);
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("bmad bench serve: --prompt-len"), std::string::npos) << bad.output;
  bad = RunBmad({"bench", "serve", "--model", "/nonexistent.gguf", "--output-len", "0"}, dir);
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("bmad bench serve: --output-len"), std::string::npos) << bad.output;
  // --kv-bytes takes the size suffixes the config's cache.kv_bytes does: 64KiB passes the flags
  // and fails only at the missing model.
  CliRun sized = RunBmad({"bench", "serve", "--model", "/nonexistent.gguf", "--kv-bytes", "64KiB"}, dir);
  EXPECT_EQ(sized.status, 1) << sized.output;
  EXPECT_NE(sized.output.find("/nonexistent.gguf"), std::string::npos) << sized.output;
  std::filesystem::remove_all(dir);
}

// model check: whether the config's model serves under it, before any process starts: 0 with a
// line describing it, 1 with the reason a rank would give (a layout it cannot be split into, a
// file that is no model), 2 for usage and config errors.
TEST(CliModelCheck, SaysWhetherTheModelServesUnderTheConfig) {
  const std::string dir = MakeTempDir("bmad-cli-");
  const std::string config = std::string(BMAD_SOURCE_DIR) + "/deploy/config/local.yaml";
  const std::string model = "model.path=" + SharedModelsDir() + "/stories260K.gguf";
  CliRun good = RunBmad({"model", "check", "--config", config, "--set", model, "--set", "parallel.pp=5"}, dir);
  EXPECT_EQ(good.status, 0) << good.output;
  EXPECT_NE(good.output.find("stories260K.gguf serves under " + config + ": 5 layers, 8 heads (4 KV), vocabulary "
                             "512, context 512; split over tp 1 x pp 5"),
            std::string::npos) << good.output;
  CliRun split = RunBmad({"model", "check", "--config", config, "--set", model, "--set", "parallel.tp=3"}, dir);
  EXPECT_EQ(split.status, 1) << split.output;
  EXPECT_NE(split.output.find("bmad model check: INVALID_ARGUMENT: cannot split the model: 8 attention heads do not "
                              "divide over 3 tensor-parallel ranks (parallel.tp)"),
            std::string::npos) << split.output;
  CliRun stages = RunBmad({"model", "check", "--config", config, "--set", model, "--set", "parallel.pp=6"}, dir);
  EXPECT_EQ(stages.status, 1) << stages.output;
  EXPECT_NE(stages.output.find("6 pipeline stages (parallel.pp) for a model of 5 layers"), std::string::npos)
      << stages.output;
  std::ofstream(dir + "/text.gguf") << "text\n";
  CliRun not_model = RunBmad({"model", "check", "--config", config, "--set", "model.path=" + dir + "/text.gguf"}, dir);
  EXPECT_EQ(not_model.status, 1) << not_model.output;
  EXPECT_NE(not_model.output.find("not a GGUF file"), std::string::npos) << not_model.output;
  // A tensor of a type bmad does not compute with (f64 here): the file opens, and every rank
  // would refuse it.
  {
    auto src = gguf::GgufFile::Open(SharedModelsDir() + "/stories260K.gguf");
    ASSERT_TRUE(src.ok());
    gguf::GgufWriter w;
    for (const auto& [key, value] : (*src)->metadata()) ASSERT_TRUE(w.SetValue(key, value).ok());
    for (const gguf::TensorInfo& t : (*src)->tensors()) {
      const bool f64 = t.name == "output.weight";  // F32 in the file: twice the bytes as F64
      ASSERT_TRUE(w.AddTensor(t.name, t.shape, f64 ? gguf::TensorType::kF64 : static_cast<gguf::TensorType>(t.type),
                              f64 ? std::vector<uint8_t>(t.nbytes * 2, 0)
                                  : std::vector<uint8_t>(t.data, t.data + t.nbytes))
                      .ok());
    }
    ASSERT_TRUE(w.WriteFile(dir + "/f64.gguf").ok());
  }
  CliRun f64 = RunBmad({"model", "check", "--config", config, "--set", "model.path=" + dir + "/f64.gguf"}, dir);
  EXPECT_EQ(f64.status, 1) << f64.output;
  EXPECT_NE(f64.output.find("tensor 'output.weight' has type f64; bmad computes with f32, f16, bf16, q8_0, q4_0, "
                            "q5_0, q4_1, q5_1, q4_K, q5_K and q6_K weights"),
            std::string::npos) << f64.output;
  // BF16, Q4_0 and Q5_1 files serve on the CPU; the CUDA backend has none of these products
  // and says so.
  for (const std::string dtype : {"bf16", "q4_0", "q5_1"}) {
    CliRun made = RunBmad({"model", "synth", "--out", dir + "/" + dtype + ".gguf", "--layers", "1", "--dim", "64",
                           "--heads", "2", "--ffn", "96", "--vocab", "300", "--dtype", dtype},
                          dir);
    ASSERT_EQ(made.status, 0) << made.output;
    const std::string path = "model.path=" + dir + "/" + dtype + ".gguf";
    CliRun on_cpu = RunBmad({"model", "check", "--config", config, "--set", path}, dir);
    EXPECT_EQ(on_cpu.status, 0) << on_cpu.output;
    CliRun on_cuda = RunBmad({"model", "check", "--config", config, "--set", path, "--set", "worker.backend=cuda"}, dir);
    EXPECT_EQ(on_cuda.status, 1) << on_cuda.output;
    EXPECT_NE(on_cuda.output.find("tensor 'token_embd.weight' has type " + dtype + ", which the cuda backend does not"),
              std::string::npos) << on_cuda.output;
  }
  // A Q4_K_M file serves on the CPU; the CUDA backend has no K-quant products, and says so
  // before a GPU is involved.
  CliRun synth = RunBmad({"model", "synth", "--out", dir + "/q4_k_m.gguf", "--layers", "1", "--dim", "256", "--heads",
                          "2", "--ffn", "256", "--vocab", "300", "--dtype", "q4_k_m"},
                         dir);
  ASSERT_EQ(synth.status, 0) << synth.output;
  const std::string k_model = "model.path=" + dir + "/q4_k_m.gguf";
  CliRun k_cpu = RunBmad({"model", "check", "--config", config, "--set", k_model}, dir);
  EXPECT_EQ(k_cpu.status, 0) << k_cpu.output;
  CliRun k_cuda = RunBmad({"model", "check", "--config", config, "--set", k_model, "--set", "worker.backend=cuda"}, dir);
  EXPECT_EQ(k_cuda.status, 1) << k_cuda.output;
  EXPECT_NE(k_cuda.output.find("tensor 'token_embd.weight' has type q4_K, which the cuda backend does not compute "
                               "with (it takes f32, f16 and q8_0); serve this file on the cpu backend, or convert it "
                               "to q8_0"),
            std::string::npos) << k_cuda.output;
  // A vocabulary one token short of the embedding's rows: every rank would refuse it (the check
  // passed it, so cluster.sh start stopped a running cluster for it).
  {
    auto src = gguf::GgufFile::Open(SharedModelsDir() + "/stories260K.gguf");
    ASSERT_TRUE(src.ok());
    gguf::GgufWriter w;
    for (auto [key, value] : (*src)->metadata()) {
      if (key == "tokenizer.ggml.tokens" || key == "tokenizer.ggml.scores" || key == "tokenizer.ggml.token_type") {
        value.array.pop_back();
      }
      ASSERT_TRUE(w.SetValue(key, value).ok());
    }
    for (const gguf::TensorInfo& t : (*src)->tensors()) {
      ASSERT_TRUE(w.AddTensor(t.name, t.shape, static_cast<gguf::TensorType>(t.type),
                              std::vector<uint8_t>(t.data, t.data + t.nbytes))
                      .ok());
    }
    ASSERT_TRUE(w.WriteFile(dir + "/short-vocab.gguf").ok());
  }
  CliRun vocab = RunBmad({"model", "check", "--config", config, "--set", "model.path=" + dir + "/short-vocab.gguf"}, dir);
  EXPECT_EQ(vocab.status, 1) << vocab.output;
  EXPECT_NE(vocab.output.find("short-vocab.gguf: the vocabulary has 511 tokens but the model 512"), std::string::npos)
      << vocab.output;
  EXPECT_EQ(RunBmad({"model", "check", "--config", config, "--set", "parallel.tp=0"}, dir).status, 2);
  EXPECT_EQ(RunBmad({"model", "check"}, dir).status, 2);
  std::filesystem::remove_all(dir);
}

// bench http: a 0 typed for --concurrency, --rate or --vocab-size is refused as out of range
// (0 read as "not given": --concurrency 0 was "give exactly one of --rate and --concurrency",
// --vocab-size 0 silently the default), before any request is sent.
TEST(CliBenchHttp, TypedZerosAreOutOfRange) {
  const std::string dir = MakeTempDir("bmad-cli-");
  const std::vector<std::string> base = {"bench", "http", "--url", "http://127.0.0.1:9", "--requests", "1",
                                         "--prompt-len", "4", "--output-len", "4"};
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--concurrency", "0"}, "--concurrency must be in [1, 4096], got 0"},
      {{"--rate", "0"}, "--rate must be in [0.001, 1000000], got 0"},
      {{"--concurrency", "1", "--vocab-size", "0"}, "--vocab-size must be in [8, 2147483648], got 0"}};
  for (const auto& [extra, message] : cases) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    CliRun bad = RunBmad(args, dir);
    EXPECT_EQ(bad.status, 2) << bad.output;
    EXPECT_NE(bad.output.find("bmad bench http: " + message), std::string::npos) << bad.output;
  }
  std::filesystem::remove_all(dir);
}

// bench serve's summary carries when the last request arrived, from which serve_sweep.sh takes
// the arrival rate a run actually offered; with every request at once, 0.
TEST(CliBenchServe, TheSummarySaysWhenTheLastRequestArrived) {
  const std::string dir = MakeTempDir("bmad-cli-");
  const std::string model = SharedModelsDir() + "/stories260K.gguf";
  for (const std::string rate : {"40", "0"}) {
    CliRun run = RunBmad({"bench", "serve", "--model", model, "--rate", rate, "--requests", "6",
                          "--prompt-len", "8", "--output-len", "2"}, dir);
    ASSERT_EQ(run.status, 0) << run.output;
    const std::string out = run.output.substr(0, run.output.find_last_not_of('\n') + 1);
    const nlohmann::json summary = nlohmann::json::parse(out.substr(out.rfind('\n') + 1), nullptr, false);
    ASSERT_TRUE(summary.is_object()) << run.output;
    const double span = summary.value("arrival_span_s", -1.0);
    if (rate == "0") {
      EXPECT_EQ(span, 0.0) << run.output;
    } else {
      EXPECT_GT(span, 0.0) << run.output;
      EXPECT_LE(span, summary.value("duration_s", 0.0)) << run.output;
    }
  }
  std::filesystem::remove_all(dir);
}

// The in-process tools take --backend; a name that is not a backend is refused as bad usage, and
// cuda without a usable GPU (CI) or without CUDA in the build says so instead of running.
TEST(CliBackendFlag, UnknownBackendsAreRefusedAndCudaWithoutAGpuSaysWhy) {
  const std::string dir = MakeTempDir("bmad-cli-");
  const std::string model = SharedModelsDir() + "/stories260K.gguf";
  CliRun bad = RunBmad({"generate", "--model", model, "--prompt", "Hi", "--backend", "tpu"}, dir);
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("--backend must be cpu or cuda, got 'tpu'"), std::string::npos) << bad.output;
  bad = RunBmad({"bench", "serve", "--model", model, "--backend", "gpu"}, dir);
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("--backend must be cpu or cuda, got 'gpu'"), std::string::npos) << bad.output;

  bad = RunBmad({"bench", "serve", "--model", model, "--overlap", "sometimes"}, dir);
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("--overlap must be auto, on or off, got 'sometimes'"), std::string::npos)
      << bad.output;


  CliRun cpu = RunBmad({"generate", "--model", model, "--prompt", "Hi", "--max-tokens", "2",
                        "--temperature", "0", "--backend", "cpu"}, dir);
  EXPECT_EQ(cpu.status, 0) << cpu.output;

  CliRun cuda = RunBmad({"generate", "--model", model, "--prompt", "Hi", "--max-tokens", "2",
                         "--temperature", "0", "--backend", "cuda"}, dir);
  if (cuda.status != 0) {  // CI: no GPU (on a GPU machine the run simply succeeds)
    EXPECT_EQ(cuda.status, 1) << cuda.output;
    EXPECT_NE(cuda.output.find("backend cuda: "), std::string::npos) << cuda.output;
  }
}

// bench decode: sizes out of range are usage errors (exit 2) before the model loads, even
// those whose sum used to overflow into a crash; a huge prefill chunk for tiny prompts reserves
// only what the prompts need; the JSON line stays JSON whatever the model's path.
TEST(CliBenchDecode, BadSizesAreUsageErrorsAndTheSummaryIsJson) {
  const std::string dir = MakeTempDir("bmad-cli-");
  const std::string model = SharedModelsDir() + "/stories260K.gguf";
  for (const auto& [flag, value, message] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"--block-size", "0", "--block-size must be in [1, 1024], got 0"},
           {"--prompt-len", "9223372036854775807", "--prompt-len must be in [1, 16777216]"},
           {"--gen-len", "9223372036854775807", "--gen-len must be in [1, 16777216]"},
           {"--gen-len", "-5", "--gen-len must be in [1, 16777216]"},
           {"--batch", "0", "--batch must be in [1, 4096], got 0"},
           {"--batch", "1,5000", "--batch must be in [1, 4096], got 5000"}}) {
    CliRun bad = RunBmad({"bench", "decode", "--model", "/nonexistent.gguf", flag, value}, dir);
    EXPECT_EQ(bad.status, 2) << flag << " " << value << ": " << bad.output;
    EXPECT_NE(bad.output.find(message), std::string::npos) << bad.output;
  }
  const std::string odd = dir + "/q\"x\\y.gguf";
  std::filesystem::copy_file(model, odd);
  CliRun run = RunBmad({"bench", "decode", "--model", odd, "--batch", "1,2", "--prompt-len", "4",
                        "--gen-len", "4", "--prefill-chunk", "16777216", "--threads", "1"}, dir);
  ASSERT_EQ(run.status, 0) << run.output;
  const std::string last = run.output.substr(run.output.rfind("{\"bench\":\"decode\""));
  const nlohmann::json summary = nlohmann::json::parse(last, nullptr, false);
  ASSERT_FALSE(summary.is_discarded()) << last;
  EXPECT_EQ(summary["model"], odd);
  EXPECT_EQ(summary["results"].size(), 2u);
  std::filesystem::remove_all(dir);
}

// Output that cannot be written (a full disk, here /dev/full) is a failure, not exit 0 with the
// text lost.
TEST(CliOutput, AnUnwritableStdoutIsAnError) {
  const std::string dir = MakeTempDir("bmad-cli-");
  const std::string model = SharedModelsDir() + "/stories260K.gguf";
  ASSERT_TRUE(std::filesystem::is_character_file("/dev/full"));
  for (const std::string& command : {"generate --model " + model + " --prompt Once --max-tokens 4 --quiet",
                                    "tokenize --model " + model + " --text hi", std::string("config docs"),
                                    "config check " + std::string(BMAD_SOURCE_DIR) + "/deploy/config/local.yaml",
                                    "config get worker.backend " + std::string(BMAD_SOURCE_DIR) +
                                        "/deploy/config/local.yaml"}) {
    ChildProcess p;
    ASSERT_TRUE(p.Start({"/bin/sh", "-c", "exec " + BinaryPath("bmad") + " " + command + " > /dev/full"},
                        dir + "/err.log"));
    auto status = p.Wait(30s);
    ASSERT_TRUE(status.has_value());
    EXPECT_EQ(*status, 1) << command << ": " << p.ReadLog();
    EXPECT_NE(p.ReadLog().find("cannot write the output: No space left on device"), std::string::npos)
        << p.ReadLog();
  }
  std::filesystem::remove_all(dir);
}

// bench serve end to end on a small model, steps overlapped: its last line is the JSON summary,
// which says so.
TEST(CliBenchServe, OverlappedStepsAreReportedInTheSummary) {
  const std::string dir = MakeTempDir("bmad-cli-");
  const std::string model = SharedModelsDir() + "/stories260K.gguf";
  for (const std::string overlap : {"on", "off"}) {
    CliRun run = RunBmad({"bench", "serve", "--model", model, "--rate", "0", "--requests", "6",
                          "--prompt-len", "8-24", "--output-len", "8-16", "--threads", "2",
                          "--overlap", overlap}, dir);
    ASSERT_EQ(run.status, 0) << run.output;
    const std::string last = run.output.substr(run.output.rfind("{\"bench\":\"serve\""));
    EXPECT_NE(last.find("\"requests\":6,"), std::string::npos) << last;
    EXPECT_NE(last.find("\"overlap\":\"" + overlap + "\""), std::string::npos) << last;
    const size_t at = last.find("\"overlapped_steps\":");
    ASSERT_NE(at, std::string::npos) << last;
    const long overlapped = std::stol(last.substr(at + 19));
    if (overlap == "on") {
      EXPECT_GT(overlapped, 0) << last;
    } else {
      EXPECT_EQ(overlapped, 0) << last;
    }
  }
}

// bench serve on a model whose logits are NaN (output_norm.weight overwritten): the engine
// fails every request, and the run fails naming one instead of reporting the failures as fast
// successes with a negative time to first token.
TEST(CliBenchServe, AFailedRequestFailsTheRun) {
  const std::string dir = MakeTempDir("bmad-cli-");
  const std::string model = dir + "/nan.gguf";
  std::filesystem::copy_file(SharedModelsDir() + "/stories260K.gguf", model);
  {
    auto file = gguf::GgufFile::Open(model);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    const gguf::TensorInfo* norm = (*file)->FindTensor("output_norm.weight");
    ASSERT_NE(norm, nullptr);
    ASSERT_EQ(norm->type_name(), "f32");
    std::ifstream in(model, std::ios::binary);
    const std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string_view values(reinterpret_cast<const char*>(norm->data), norm->nbytes);
    const size_t at = raw.find(values);
    ASSERT_NE(at, std::string::npos);
    ASSERT_EQ(raw.find(values, at + 1), std::string::npos);  // the place is unambiguous
    std::fstream out(model, std::ios::binary | std::ios::in | std::ios::out);
    out.seekp(static_cast<std::streamoff>(at));
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (uint64_t i = 0; i < norm->nbytes / sizeof(float); ++i) {
      out.write(reinterpret_cast<const char*>(&nan), sizeof nan);
    }
    ASSERT_TRUE(out.good());
  }
  CliRun run = RunBmad({"bench", "serve", "--model", model, "--rate", "0", "--requests", "3",
                        "--prompt-len", "8", "--output-len", "4", "--threads", "2"},
                       dir);
  EXPECT_EQ(run.status, 1) << run.output;
  EXPECT_NE(run.output.find("bmad bench serve: request "), std::string::npos) << run.output;
  EXPECT_NE(run.output.find(" failed: "), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("{\"bench\":\"serve\""), std::string::npos) << run.output;
  std::filesystem::remove_all(dir);
}

// bench serve with a sampled workload: the knobs reach the run (the summary echoes them), and
// bad knobs are refused with the value as typed.
TEST(CliBenchServe, SampledWorkloadsTakeTheSamplingKnobs) {
  const std::string dir = MakeTempDir("bmad-cli-");
  const std::string model = SharedModelsDir() + "/stories260K.gguf";
  std::vector<std::string> args = {"bench", "serve", "--model", model, "--rate", "0",
                                   "--requests", "4", "--prompt-len", "8", "--output-len", "8",
                                   "--threads", "2", "--temperature", "0.9", "--top-k", "20",
                                   "--top-p", "0.95", "--min-p", "0.01"};
  CliRun run = RunBmad(args, dir);
  ASSERT_EQ(run.status, 0) << run.output;
  const std::string last = run.output.substr(run.output.rfind("{\"bench\":\"serve\""));
  EXPECT_NE(last.find("\"sampling\":{\"temperature\":0.9,\"top_k\":20,\"top_p\":0.95,"
                      "\"min_p\":0.01}"),
            std::string::npos)
      << last;
  EXPECT_NE(last.find("\"requests\":4,"), std::string::npos) << last;

  // Refused as typed, before the model loads (exit 2, like every flag error).
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad_knobs = {
      {{"--top-p", "0"}, "--top-p must be in (0, 1], got 0"},
      {{"--top-p", "1.00000001"}, "--top-p must be in (0, 1], got 1.00000001"},
      {{"--top-k", "5000000000"}, "--top-k must be in [0, 2147483647], got 5000000000"},
      {{"--top-k", "-5"}, "--top-k must be in [0, 2147483647], got -5"},
      // These used to hang (a step budget of nothing), abort, or print "rate":nan as JSON.
      {{"--max-seqs", "0"}, "--max-seqs must be in [1, 65536], got 0"},
      {{"--max-seqs", "-3"}, "--max-seqs must be in [1, 65536], got -3"},
      {{"--max-batch-tokens", "0"}, "--max-batch-tokens must be in [1, 1048576], got 0"},
      {{"--rate", "nan"}, "--rate must be in [0, 1000000], got nan"},
      {{"--rate", "-1"}, "--rate must be in [0, 1000000], got -1"},
      {{"--threads", "100000"}, "--threads must be in [0, 1024], got 100000"},
      {{"--temperature", "-1"}, "--temperature must be a finite number >= 0, got -1"},
      {{"--min-p", "1.5"}, "--min-p must be in [0, 1], got 1.5"},
  };
  for (const auto& [extra, message] : bad_knobs) {
    std::vector<std::string> bad_args = args;
    bad_args.insert(bad_args.end(), extra.begin(), extra.end());
    CliRun bad = RunBmad(bad_args, dir);
    EXPECT_EQ(bad.status, 2) << bad.output;
    EXPECT_NE(bad.output.find(message), std::string::npos) << bad.output;
  }
  // The rules across config keys hold here too: a step budget smaller than its sequence cap.
  std::vector<std::string> cross = args;
  for (const char* a : {"--max-seqs", "100", "--max-batch-tokens", "10"}) cross.push_back(a);
  CliRun cross_run = RunBmad(cross, dir);
  EXPECT_NE(cross_run.status, 0) << cross_run.output;
  EXPECT_NE(cross_run.output.find("scheduler.max_seqs is 100, more than scheduler.max_batch_tokens (10)"),
            std::string::npos)
      << cross_run.output;
}

}  // namespace
}  // namespace bmad::testing
