// `bmad model synth`, run in-process through its Command.
#include "worker/model/synth/synth_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "tests/support/paths.h"
#include "worker/model/gguf/gguf_file.h"

namespace bmad::synth {
namespace {

using ::testing::HasSubstr;

struct Outcome {
  int code;
  std::string out;
  std::string err;
};

Outcome RunSynth(const std::vector<std::string>& args) {
  const std::vector<cli::Command> commands = ModelSynthCommands();
  EXPECT_EQ(commands.size(), 1u);
  EXPECT_EQ(commands[0].path, (std::vector<std::string>{"model", "synth"}));
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const int code = commands[0].run(args);
  Outcome o{code, ::testing::internal::GetCapturedStdout(),
            ::testing::internal::GetCapturedStderr()};
  return o;
}

std::vector<std::string> ValidArgs(const std::string& out) {
  return {"--out", out, "--layers", "1", "--dim", "64", "--heads", "4", "--kv-heads", "2",
          "--ffn", "64", "--vocab", "300", "--ctx", "256", "--dtype", "q8_0", "--seed", "3",
          "--name", "cmd-test"};
}

size_t LineCount(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

TEST(SynthCommandTest, WritesTheModelAndReportsIt) {
  const std::string dir = bmad::testing::MakeTempDir("synth_command_");
  const std::string path = dir + "/m.gguf";
  Outcome o = RunSynth(ValidArgs(path));
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(LineCount(o.out), 1u);
  EXPECT_THAT(o.out, HasSubstr(path));
  EXPECT_THAT(o.out, HasSubstr("parameters"));
  EXPECT_THAT(o.out, HasSubstr("q8_0"));
  auto file = gguf::GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(*(*file)->GetString("general.name"), "cmd-test");
  EXPECT_EQ(*(*file)->GetInt("llama.attention.head_count_kv"), 2);
  EXPECT_EQ(*(*file)->GetInt("llama.context_length"), 256);
  EXPECT_EQ((*file)->FindTensor("blk.0.attn_q.weight")->type_name(), "q8_0");
  std::filesystem::remove_all(dir);
}

TEST(SynthCommandTest, DefaultsKvHeadsDtypeAndContext) {
  const std::string dir = bmad::testing::MakeTempDir("synth_command_");
  const std::string path = dir + "/m.gguf";
  Outcome o = RunSynth({"--out", path, "--layers", "1", "--dim", "32", "--heads", "2",
                        "--ffn", "48", "--vocab", "259"});
  ASSERT_EQ(o.code, 0) << o.err;
  auto file = gguf::GgufFile::Open(path);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(*(*file)->GetInt("llama.attention.head_count_kv"), 2);
  EXPECT_EQ(*(*file)->GetInt("llama.context_length"), 2048);
  EXPECT_EQ(*(*file)->GetInt("general.file_type"), 1);
  std::filesystem::remove_all(dir);
}

TEST(SynthCommandTest, UsageErrorsPrintOneLineAndExit2) {
  const std::string dir = bmad::testing::MakeTempDir("synth_command_");
  const std::string path = dir + "/m.gguf";
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  std::vector<Case> cases;
  auto with = [&](const std::string& flag, const std::string& value) {
    std::vector<std::string> args = ValidArgs(path);
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i] == flag) args[i + 1] = value;
    }
    return args;
  };
  auto without = [&](const std::string& flag) {
    std::vector<std::string> args = ValidArgs(path);
    auto it = std::find(args.begin(), args.end(), flag);
    if (it != args.end()) args.erase(it, it + 2);
    return args;
  };
  cases.push_back({without("--out"), "--out is required"});
  cases.push_back({without("--layers"), "--layers is required"});
  cases.push_back({without("--vocab"), "--vocab or --vocab-from is required"});
  cases.push_back({with("--dtype", "q2_k"), "unknown dtype 'q2_k'"});
  cases.push_back({with("--dim", "66"), "not divisible by heads"});
  cases.push_back({with("--ffn", "100"), "multiples of 32"});
  cases.push_back({with("--vocab", "100"), "vocab"});
  cases.push_back({with("--layers", "many"), "--layers expects an integer"});
  cases.push_back({with("--seed", "-1"), "--seed must not be negative"});
  cases.push_back({with("--out", ""), "--out must name a file"});
  std::vector<std::string> unknown = ValidArgs(path);
  unknown.push_back("--bogus");
  cases.push_back({unknown, "unknown flag --bogus"});
  std::vector<std::string> positional = ValidArgs(path);
  positional.push_back("extra");
  cases.push_back({positional, "unexpected argument 'extra'"});
  for (const Case& c : cases) {
    Outcome o = RunSynth(c.args);
    EXPECT_EQ(o.code, 2) << c.expected;
    EXPECT_THAT(o.err, HasSubstr(c.expected));
    EXPECT_EQ(LineCount(o.err), 1u) << o.err;
    EXPECT_TRUE(o.out.empty());
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  std::filesystem::remove_all(dir);
}

TEST(SynthCommandTest, FailuresExit1) {
  Outcome o = RunSynth(ValidArgs("/nonexistent-dir/m.gguf"));
  EXPECT_EQ(o.code, 1);
  EXPECT_THAT(o.err, HasSubstr("/nonexistent-dir/m.gguf"));
  EXPECT_EQ(LineCount(o.err), 1u);

  std::vector<std::string> args = ValidArgs("/nonexistent-dir/m.gguf");
  args.push_back("--vocab-from");
  args.push_back("/nonexistent/vocab.gguf");
  o = RunSynth(args);
  EXPECT_EQ(o.code, 1);
  EXPECT_THAT(o.err, HasSubstr("/nonexistent/vocab.gguf"));
}

TEST(SynthCommandTest, HelpListsTheFlags) {
  Outcome o = RunSynth({"--help"});
  EXPECT_EQ(o.code, 0);
  for (const char* flag : {"--out", "--layers", "--dim", "--heads", "--kv-heads", "--ffn",
                           "--vocab", "--ctx", "--dtype", "--seed", "--vocab-from", "--name"}) {
    EXPECT_THAT(o.out, HasSubstr(flag));
  }
}

}  // namespace
}  // namespace bmad::synth
