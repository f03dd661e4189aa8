// `bmad tokenize`, run in-process through its Command.
#include "worker/model/tokenizer/tokenize_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tests/support/paths.h"
#include "tests/worker/tokenizer/vocabulary_fixtures.h"

namespace bmad {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

struct Outcome {
  int code;
  std::string out;
  std::string err;
};

Outcome RunTokenize(const std::vector<std::string>& args) {
  const std::vector<cli::Command> commands = TokenizeCommands();
  EXPECT_EQ(commands.size(), 1u);
  EXPECT_EQ(commands[0].path, std::vector<std::string>{"tokenize"});
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const int code = commands[0].run(args);
  Outcome o{code, ::testing::internal::GetCapturedStdout(),
            ::testing::internal::GetCapturedStderr()};
  return o;
}

std::string Model(const char* file) { return bmad::testing::SharedModelsDir() + "/" + file; }

size_t Lines(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

TEST(TokenizeCommandTest, PrintsTheIdsAsOneJsonArray) {
  Outcome o = RunTokenize(
      {"--model", Model(tokenizer::testing::kLlama2File), "--text", "Once upon a time"});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out, "[1, 9038, 2501, 263, 931]\n");
  EXPECT_EQ(o.err, "");

  o = RunTokenize({"--model", Model(tokenizer::testing::kStoriesFile), "--text=Once upon a time"});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out, "[1, 403, 407, 261, 378]\n");
}

TEST(TokenizeCommandTest, NoSpecialDropsBosAndTreatsSpecialTextsAsText) {
  const std::string model = Model(tokenizer::testing::kLlama2File);
  Outcome o = RunTokenize({"--model", model, "--text", "Hello</s><s>world"});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out, "[1, 15043, 2, 1, 3186]\n");
  o = RunTokenize({"--model", model, "--text", "Hello</s><s>world", "--no-special"});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out, "[15043, 829, 29879, 5299, 29879, 29958, 11526]\n");
  o = RunTokenize({"--model", model, "--text", "", "--no-special"});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out, "[]\n");
}

TEST(TokenizeCommandTest, PiecesAreJsonEscaped) {
  Outcome o = RunTokenize({"--model", Model(tokenizer::testing::kLlama2File), "--text",
                           "Once \"a\"\n\U0001F642", "--pieces"});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_THAT(o.out,
              StartsWith("[{\"id\": 1, \"piece\": \"\"}, {\"id\": 9038, \"piece\": \" Once\"}, "));
  EXPECT_THAT(o.out, HasSubstr("{\"id\": 13, \"piece\": \"\\n\"}"));
  EXPECT_THAT(o.out, HasSubstr("\\\""));
  // The emoji's byte tokens are not UTF-8 on their own: each prints as U+FFFD.
  EXPECT_THAT(o.out, HasSubstr("{\"id\": 243, \"piece\": \"\uFFFD\"}"));
  EXPECT_EQ(Lines(o.out), 1u);
}

TEST(TokenizeCommandTest, MissingFlagsAreOneLineErrors) {
  Outcome o = RunTokenize({"--text", "x"});
  EXPECT_EQ(o.code, 2);
  EXPECT_THAT(o.err, HasSubstr("--model is required"));
  EXPECT_EQ(Lines(o.err), 1u);
  EXPECT_EQ(o.out, "");

  o = RunTokenize({"--model", Model(tokenizer::testing::kLlama2File)});
  EXPECT_EQ(o.code, 2);
  EXPECT_THAT(o.err, HasSubstr("--text is required"));
  EXPECT_EQ(Lines(o.err), 1u);

  o = RunTokenize({"--model", Model(tokenizer::testing::kLlama2File), "--text", "x", "--bogus"});
  EXPECT_EQ(o.code, 2);
  EXPECT_THAT(o.err, HasSubstr("bogus"));
  EXPECT_EQ(Lines(o.err), 1u);

  o = RunTokenize({"--model", Model(tokenizer::testing::kLlama2File), "--text", "x", "extra"});
  EXPECT_EQ(o.code, 2);
  EXPECT_THAT(o.err, HasSubstr("unexpected argument 'extra'"));
}

TEST(TokenizeCommandTest, UnreadableModelIsOneLineError) {
  Outcome o = RunTokenize({"--model", "/nonexistent/model.gguf", "--text", "x"});
  EXPECT_EQ(o.code, 1);
  EXPECT_THAT(o.err, HasSubstr("/nonexistent/model.gguf"));
  EXPECT_EQ(Lines(o.err), 1u);
  EXPECT_EQ(o.out, "");

  // A file that is not GGUF at all.
  o = RunTokenize({"--model", std::string(BMAD_SOURCE_DIR) + "/CMakeLists.txt", "--text", "x"});
  EXPECT_EQ(o.code, 1);
  EXPECT_THAT(o.err, StartsWith("bmad tokenize: "));
  EXPECT_EQ(Lines(o.err), 1u);
}

TEST(TokenizeCommandTest, HelpPrintsUsage) {
  Outcome o = RunTokenize({"--help"});
  EXPECT_EQ(o.code, 0);
  EXPECT_THAT(o.out, HasSubstr("--no-special"));
  EXPECT_THAT(o.out, HasSubstr("--pieces"));
}

}  // namespace
}  // namespace bmad
