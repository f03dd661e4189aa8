// vLLM's guided_regex and guided_choice (and their structured_outputs forms) end to end, on a local cluster (bmad-coordinator and a
// bmad-worker replica under mpirun, 127.0.0.1, stories260K): every output, greedy or sampled,
// whole or streamed, is one of the choices or a whole match of the pattern, and what cannot
// be served is refused by name.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <cctype>
#include <regex>
#include <set>
#include <string>

#include "tests/support/cluster_http.h"
#include "tests/support/local_cluster.h"
#include "tests/support/paths.h"

namespace bmad::testing {
namespace {

using json = nlohmann::json;

TEST(OpenAiGuidedTest, ChoicesAndPatternsHoldEveryOutput) {
  LocalCluster cluster({StoriesModelPath(), 1, 0});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  const int port = cluster.http_port();

  // guided_choice: n sampled choices, each one of them, ended by the model's end token.
  const std::set<std::string> choices = {"cat", "dog", "little bird", "Lily (3)"};
  json body = {{"prompt", "Once upon a time there was a"}, {"max_tokens", 12}, {"temperature", 1.0},
               {"seed", 11}, {"n", 6}, {"guided_choice", json(std::vector<std::string>(choices.begin(), choices.end()))}};
  HttpResult r = Post(port, "/v1/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  for (const json& choice : json::parse(r.body)["choices"]) {
    EXPECT_TRUE(choices.count(choice["text"].get<std::string>())) << choice;
    EXPECT_EQ(choice["finish_reason"], "stop") << choice;
  }

  // guided_regex, greedy, whole and streamed alike; chat too.
  // At most 17 characters: the output ends within max_tokens, by the pattern.
  const std::string pattern = "\\d{3}-[a-z]{2,5}( [A-Z][a-z]{1,6})?";
  const std::regex oracle(pattern);
  std::string whole;
  for (const bool stream : {false, true}) {
    json regex = Completion("Once upon a time", 24, stream);
    regex["guided_regex"] = pattern;
    const CompletionAnswer answer = Answer(port, regex);
    EXPECT_TRUE(std::regex_match(answer.text, oracle)) << answer.text;
    EXPECT_EQ(answer.finish, "stop") << answer.text;
    if (stream) {
      EXPECT_EQ(answer.text, whole);
    } else {
      whole = answer.text;
    }
  }
  json chat = {{"messages", {{{"role", "user"}, {"content", "Pick one"}}}}, {"max_tokens", 8}, {"temperature", 0},
               {"guided_choice", {"yes", "no"}}};
  r = Post(port, "/v1/chat/completions", chat.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string content = json::parse(r.body)["choices"][0]["message"]["content"];
  EXPECT_TRUE(content == "yes" || content == "no") << content;
  // The same through vLLM's newer structured_outputs: a choice, a pattern and a schema.
  chat.erase("guided_choice");
  chat["structured_outputs"] = {{"choice", {"yes", "no"}}};
  EXPECT_EQ(json::parse(Post(port, "/v1/chat/completions", chat.dump()).body)["choices"][0]["message"]["content"],
            content);
  json structured = Completion("Once upon a time", 24, /*stream=*/false);
  structured["structured_outputs"] = {{"regex", pattern}};
  EXPECT_EQ(Answer(port, structured).text, whole);
  structured["structured_outputs"] = {{"json", {{"type", "integer"}, {"minimum", 10}, {"maximum", 99}}}};
  const CompletionAnswer number = Answer(port, structured);
  ASSERT_EQ(number.text.size(), 2u) << number.text;
  EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(number.text[0])) && number.text[0] != '0') << number.text;

  // Refused, named: a pattern outside the syntax, and two constraints at once.
  body = Completion("Once upon a time", 8, false);
  body["guided_regex"] = "(a)\\1";
  r = Post(port, "/v1/completions", body.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["param"], "guided_regex") << r.body;
  EXPECT_NE(r.body.find("backreference"), std::string::npos) << r.body;
  body.erase("guided_regex");
  body["structured_outputs"] = {{"regex", "(a)\\1"}};
  r = Post(port, "/v1/completions", body.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["param"], "structured_outputs.regex") << r.body;
  body.erase("structured_outputs");
  body["guided_regex"] = "[^\\s\\S]";  // no text at all
  r = Post(port, "/v1/completions", body.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("matches no text"), std::string::npos) << r.body;
  body["guided_regex"] = "a+";
  body["response_format"] = {{"type", "json_object"}};
  r = Post(port, "/v1/completions", body.dump());
  EXPECT_EQ(r.status, 400) << r.body;

  // Constraints that together leave no token are the request's own doing: a 400, not a 500,
  // though only the replica can find it out.
  const json a = json::parse(Post(port, "/tokenize", json({{"prompt", "a"}, {"add_special_tokens", false}}).dump()).body);
  ASSERT_EQ(a["tokens"].size(), 1u) << a;
  json nothing_left = Completion("Once upon a time", 4, false);
  nothing_left["allowed_token_ids"] = a["tokens"];
  nothing_left["bad_words"] = {"a"};
  r = Post(port, "/v1/completions", nothing_left.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("'allowed_token_ids' and 'bad_words'"), std::string::npos) << r.body;
}

}  // namespace
}  // namespace bmad::testing
