#include "common/cli/sampling_flags.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace bmad::cli {
namespace {

TEST(SamplingFlagsTest, DefaultsAreGreedyWithoutASeed) {
  Flags flags("test");
  SamplingFlags sampling;
  sampling.AddTo(flags);
  std::vector<std::string> positional;
  ASSERT_TRUE(flags.Parse({}, &positional).ok());
  const proto::SamplingParams p = sampling.Params().value();
  EXPECT_EQ(p.max_tokens, 128u);
  EXPECT_EQ(p.temperature, 0.0f);
  EXPECT_EQ(p.top_k, 0);
  EXPECT_EQ(p.top_p, 1.0f);
  EXPECT_FALSE(p.has_seed);
  EXPECT_FALSE(p.ignore_eos);
  EXPECT_TRUE(p.stop_strings.empty());
}

TEST(SamplingFlagsTest, EveryFlagReachesTheParams) {
  Flags flags("test");
  SamplingFlags sampling;
  sampling.AddTo(flags);
  std::vector<std::string> positional;
  ASSERT_TRUE(flags
                  .Parse({"--max-tokens", "7", "--temperature", "0.5", "--top-k", "40", "--top-p",
                          "0.9", "--min-p", "0.05", "--repetition-penalty", "1.1",
                          "--presence-penalty", "0.2", "--frequency-penalty", "0.3", "--seed", "0",
                          "--stop", "\n", "--stop", "END", "--ignore-eos", "--min-tokens", "3",
                          "--logit-bias", "13=-100", "--logit-bias", "261=2.5"},
                         &positional)
                  .ok());
  const proto::SamplingParams p = sampling.Params().value();
  EXPECT_EQ(p.max_tokens, 7u);
  EXPECT_FLOAT_EQ(p.temperature, 0.5f);
  EXPECT_EQ(p.top_k, 40);
  EXPECT_FLOAT_EQ(p.top_p, 0.9f);
  EXPECT_FLOAT_EQ(p.min_p, 0.05f);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.1f);
  EXPECT_FLOAT_EQ(p.presence_penalty, 0.2f);
  EXPECT_FLOAT_EQ(p.frequency_penalty, 0.3f);
  EXPECT_TRUE(p.has_seed);  // seed 0 is a seed
  EXPECT_EQ(p.seed, 0u);
  EXPECT_EQ(p.stop_strings, (std::vector<std::string>{"\n", "END"}));
  EXPECT_TRUE(p.ignore_eos);
  EXPECT_EQ(p.min_tokens, 3u);
  EXPECT_EQ(p.logit_bias, (std::vector<proto::LogitBias>{{13, -100.0f}, {261, 2.5f}}));
}

// Params() after parsing `args`.
Result<proto::SamplingParams> ParsedParams(std::vector<std::string> args) {
  Flags flags("test");
  SamplingFlags sampling;
  sampling.AddTo(flags);
  std::vector<std::string> positional;
  BMAD_RETURN_IF_ERROR(flags.Parse(args, &positional));
  return sampling.Params();
}

TEST(SamplingFlagsTest, JsonAndJsonSchemaChooseTheResponseFormat) {
  EXPECT_EQ(ParsedParams({"--json"}).value().response_format, proto::ResponseFormat::kJsonObject);
  const std::string path = ::testing::TempDir() + "/sampling_flags_schema.json";
  {
    std::ofstream out(path);
    out << R"({"type": "object", "properties": {"a": {"type": "string"}}})";
  }
  const proto::SamplingParams p = ParsedParams({"--json-schema", path}).value();
  EXPECT_EQ(p.response_format, proto::ResponseFormat::kJsonSchema);
  EXPECT_EQ(p.json_schema, R"({"type": "object", "properties": {"a": {"type": "string"}}})");
  EXPECT_EQ(ParsedParams({"--json", "--json-schema", path}).status().message(),
            "--json and --json-schema cannot be used together");
  EXPECT_EQ(ParsedParams({"--json-schema", path + ".missing"}).status().message(),
            "--json-schema: " + path + ".missing: cannot open the file: No such file or directory");
  // Read up to a bound: /dev/zero is refused, not read until memory runs out.
  EXPECT_EQ(ParsedParams({"--json-schema", "/dev/zero"}).status().message(),
            "--json-schema: /dev/zero: is larger than 1048576 bytes, the most read");
  EXPECT_EQ(ParsedParams({"--json-schema", "/tmp"}).status().message(),
            "--json-schema: /tmp: is a directory, not a file");
  std::remove(path.c_str());
}

TEST(SamplingFlagsTest, RegexChoosesTheRegexFormat) {
  const proto::SamplingParams p = ParsedParams({"--regex", "\\d+"}).value();
  EXPECT_EQ(p.response_format, proto::ResponseFormat::kRegex);
  EXPECT_EQ(p.regex, "\\d+");
  EXPECT_EQ(ParsedParams({"--json", "--regex", "a"}).status().message(),
            "--regex cannot be used with --json or --json-schema");
}

TEST(SamplingFlagsTest, ALogitBiasThatIsNotIdEqualsBiasIsNamed) {
  for (const char* bad : {"13", "=5", "13=", "x=5", "13=five", "13=5x", "-1=5", "4294967296=1", "1=1e99999"}) {
    Flags flags("test");
    SamplingFlags sampling;
    sampling.AddTo(flags);
    std::vector<std::string> positional;
    ASSERT_TRUE(flags.Parse({"--logit-bias", bad}, &positional).ok()) << bad;
    const auto p = sampling.Params();
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_NE(p.status().message().find("--logit-bias wants ID=BIAS"), std::string::npos) << p.status().message();
    EXPECT_NE(p.status().message().find(bad), std::string::npos) << p.status().message();
  }
}

TEST(SamplingFlagsTest, AValueAFloatCannotHoldIsRefusedAsTyped) {
  // --top-p 1e-50 used to reach validation as 0 ("'top_p' ... got 0").
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"--top-p", "1e-50"}, {"--temperature", "1e50"}, {"--min-p", "-1e-60"},
           {"--repetition-penalty", "1e39"}, {"--logit-bias", "5=1e-46"}}) {
    Flags flags("test");
    SamplingFlags sampling;
    sampling.AddTo(flags);
    std::vector<std::string> positional;
    ASSERT_TRUE(flags.Parse({flag, value}, &positional).ok()) << flag;
    const auto p = sampling.Params();
    ASSERT_FALSE(p.ok()) << flag << " " << value;
    EXPECT_NE(p.status().message().find(flag + " "), std::string::npos) << p.status().message();
    EXPECT_NE(p.status().message().find("beyond what a 32-bit float holds"), std::string::npos)
        << p.status().message();
  }
}

TEST(SamplingFlagsTest, AWrongTypeNamesTheFlag) {
  Flags flags("test");
  SamplingFlags sampling;
  sampling.AddTo(flags);
  std::vector<std::string> positional;
  const Status s = flags.Parse({"--top-k", "many"}, &positional);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("top-k"), std::string::npos) << s.message();
}

TEST(SamplingFlagsTest, TopKPastTheSamplersRangeIsRefusedNotWrapped) {
  Flags flags("test");
  SamplingFlags sampling;
  sampling.AddTo(flags);
  std::vector<std::string> positional;
  // 2^32 + 1 used to narrow to top-k 1, and 2^31 to a negative top-k.
  for (const char* bad : {"4294967297", "2147483648", "-1"}) {
    const Status s = flags.Parse({"--top-k", bad}, &positional);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find("--top-k must be in [0, 2147483647]"), std::string::npos) << s.message();
  }
  ASSERT_TRUE(flags.Parse({"--top-k", "2147483647", "--seed", "-1"}, &positional).ok());
  EXPECT_EQ(sampling.Params()->top_k, 2147483647);
  EXPECT_FALSE(sampling.Params()->has_seed);
  EXPECT_FALSE(flags.Parse({"--seed", "-2"}, &positional).ok());
}

}  // namespace
}  // namespace bmad::cli
