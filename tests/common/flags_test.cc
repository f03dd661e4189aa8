#include "common/cli/flags.h"

#include <gtest/gtest.h>

namespace bmad::cli {
namespace {

TEST(FlagsTest, ParsesEveryKind) {
  std::string model;
  int64_t n = 0;
  double t = 0;
  bool verbose = false;
  std::vector<std::string> stops;
  Flags flags("test");
  flags.AddString("model", &model, "m");
  flags.AddInt("max-tokens", &n, "n");
  flags.AddDouble("temperature", &t, "t");
  flags.AddBool("verbose", &verbose, "v");
  flags.AddList("stop", &stops, "s");
  std::vector<std::string> positional;
  ASSERT_TRUE(flags
                  .Parse({"--model", "a.gguf", "--max-tokens=32", "pos", "--temperature", "0.5",
                          "--verbose", "--stop", "x", "--stop=y", "--", "--not-a-flag"},
                         &positional)
                  .ok());
  EXPECT_EQ(model, "a.gguf");
  EXPECT_EQ(n, 32);
  EXPECT_DOUBLE_EQ(t, 0.5);
  EXPECT_TRUE(verbose);
  EXPECT_EQ(stops, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(positional, (std::vector<std::string>{"pos", "--not-a-flag"}));
  EXPECT_TRUE(flags.Seen("model"));
}

TEST(FlagsTest, ErrorsNameTheFlag) {
  int64_t n = 0;
  Flags flags("test");
  flags.AddInt("max-tokens", &n, "n");
  std::vector<std::string> positional;
  Status s = flags.Parse({"--max-tokens", "many"}, &positional);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--max-tokens"), std::string::npos);
  EXPECT_NE(flags.Parse({"--bogus"}, &positional).message().find("--bogus"), std::string::npos);
  EXPECT_NE(flags.Parse({"--max-tokens"}, &positional).message().find("needs a value"),
            std::string::npos);
}

// A flag followed by another known flag forgot its value; the value form with '=' still takes
// anything, and a text that merely starts with "--" is a value.
TEST(FlagsTest, AFlagIsNotTakenAsTheValueOfTheFlagBefore) {
  std::string prompt;
  bool quiet = false;
  Flags flags("test");
  flags.AddString("prompt", &prompt, "p");
  flags.AddBool("quiet", &quiet, "q");
  std::vector<std::string> positional;
  Status s = flags.Parse({"--prompt", "--quiet"}, &positional);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("flag --prompt needs a value, but the next argument is the flag --quiet"),
            std::string::npos)
      << s.message();
  EXPECT_NE(flags.Parse({"--prompt", "--quiet=1"}, &positional).message().find("--prompt=--quiet=1"),
            std::string::npos);
  EXPECT_FALSE(flags.Parse({"--prompt", "--help"}, &positional).ok());
  EXPECT_FALSE(quiet);

  ASSERT_TRUE(flags.Parse({"--prompt=--quiet"}, &positional).ok());
  EXPECT_EQ(prompt, "--quiet");
  ASSERT_TRUE(flags.Parse({"--prompt", "--not-a-flag"}, &positional).ok());
  EXPECT_EQ(prompt, "--not-a-flag");
  ASSERT_TRUE(flags.Parse({"--prompt", "-5"}, &positional).ok());
  EXPECT_EQ(prompt, "-5");
}

TEST(FlagsTest, HelpListsFlags) {
  int64_t n = 0;
  Flags flags("bmad thing");
  flags.AddInt("count", &n, "How many.");
  std::vector<std::string> positional;
  ASSERT_TRUE(flags.Parse({"--help"}, &positional).ok());
  EXPECT_TRUE(flags.help_requested());
  EXPECT_NE(flags.Help().find("--count N"), std::string::npos);
}

TEST(FlagsTest, IntList) {
  EXPECT_EQ(*ParseIntList("1,8,32", "--batch"), (std::vector<int64_t>{1, 8, 32}));
  EXPECT_FALSE(ParseIntList("1,,2", "--batch").ok());
  EXPECT_FALSE(ParseIntList("", "--batch").ok());
  EXPECT_NE(ParseIntList("x", "--batch").status().message().find("--batch"), std::string::npos);
}

TEST(FlagsTest, BoundedValuesOutsideTheirRangeAreRefusedNamingIt) {
  int64_t threads = 7;
  double rate = 2.0;
  Flags flags("test");
  flags.AddInt("threads", &threads, "t", 0, 1024);
  flags.AddDouble("rate", &rate, "r", 0.0, 1e6);
  std::vector<std::string> positional;
  ASSERT_TRUE(flags.Parse({"--threads", "1024", "--rate", "0"}, &positional).ok());
  EXPECT_EQ(threads, 1024);
  EXPECT_EQ(rate, 0.0);
  for (const char* bad : {"-1", "1025", "100000"}) {
    const Status s = flags.Parse({"--threads", bad}, &positional);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.message(), std::string("--threads must be in [0, 1024], got ") + bad);
  }
  // Past 64 bits: out of range, not "not an integer".
  const Status huge = flags.Parse({"--threads", "99999999999999999999"}, &positional);
  EXPECT_EQ(huge.message(), "--threads is out of range: 99999999999999999999 is past what a 64-bit integer "
                            "holds (it must be in [0, 1024])");
  EXPECT_EQ(threads, 1024);  // a refused value leaves the last good one
  for (const char* bad : {"-1", "nan", "inf", "1e7"}) {
    const Status s = flags.Parse({"--rate", bad}, &positional);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.message(), std::string("--rate must be in [0, 1000000], got ") + bad);
  }
  EXPECT_EQ(rate, 0.0);
}

// Byte counts take the config files' size suffixes (a flag said "expects an integer" to 64KiB).
TEST(FlagsTest, SizesTakeSuffixesWithinTheirRange) {
  int64_t bytes = 0;
  Flags flags("test");
  flags.AddSize("kv-bytes", &bytes, "b", 1 << 16, int64_t{1} << 42);
  std::vector<std::string> positional;
  const std::pair<const char*, int64_t> good[] = {
      {"65536", 65536}, {"64KiB", 64 << 10}, {"256MiB", 256 << 20}, {"2G", int64_t{2} << 30}, {"4TiB", int64_t{4} << 40}};
  for (const auto& [text, want] : good) {
    ASSERT_TRUE(flags.Parse({"--kv-bytes", text}, &positional).ok()) << text;
    EXPECT_EQ(bytes, want) << text;
  }
  EXPECT_EQ(flags.Parse({"--kv-bytes", "1KiB"}, &positional).message(),
            "--kv-bytes must be in [65536, 4398046511104], got 1KiB");
  EXPECT_EQ(flags.Parse({"--kv-bytes", "64KB"}, &positional).message(),
            "--kv-bytes expects an integer (optionally with KiB/MiB/GiB), got '64KB'");
  EXPECT_EQ(flags.Parse({"--kv-bytes", "MiB"}, &positional).message(),
            "--kv-bytes expects an integer (optionally with KiB/MiB/GiB), got 'MiB'");
  // Past 64 bits once scaled: out of range, not a wrapped small number.
  EXPECT_EQ(flags.Parse({"--kv-bytes", "99999999T"}, &positional).message(),
            "--kv-bytes is out of range: 99999999T is past what a 64-bit integer holds (it must be in "
            "[65536, 4398046511104])");
  EXPECT_EQ(bytes, int64_t{4} << 40);  // a refused value leaves the last good one
  EXPECT_NE(flags.Help().find("--kv-bytes BYTES"), std::string::npos) << flags.Help();
  // Plain integer flags take no suffix.
  int64_t count = 0;
  flags.AddInt("count", &count, "c");
  EXPECT_FALSE(flags.Parse({"--count", "1K"}, &positional).ok());
}

// A '+' before the digits, as the config keys take it (YAML 1.2) and strtod does: --kv-bytes
// +64MiB said "expects an integer" while kv_bytes: +64MiB loaded.
TEST(FlagsTest, NumbersTakeOneLeadingPlus) {
  int64_t bytes = 0, count = 0;
  double rate = 0;
  Flags flags("test");
  flags.AddSize("kv-bytes", &bytes, "b", 0, INT64_MAX);
  flags.AddInt("count", &count, "c");
  flags.AddDouble("rate", &rate, "r");
  std::vector<std::string> positional;
  ASSERT_TRUE(flags.Parse({"--kv-bytes", "+64MiB", "--count", "+7", "--rate", "+.5"}, &positional).ok());
  EXPECT_EQ(bytes, int64_t{64} << 20);
  EXPECT_EQ(count, 7);
  EXPECT_EQ(rate, 0.5);
  for (const char* bad : {"+", "++7", "+-7", "+ 7", "+x"}) {
    EXPECT_EQ(flags.Parse({"--count", bad}, &positional).message(),
              std::string("--count expects an integer, got '") + bad + "'");
    EXPECT_EQ(flags.Parse({"--rate", bad}, &positional).message(), std::string("--rate expects a number, got '") + bad + "'");
  }
  EXPECT_EQ(count, 7);
}

}  // namespace
}  // namespace bmad::cli
