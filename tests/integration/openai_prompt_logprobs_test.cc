// The prompt's own log-probabilities end to end (bmad-coordinator and bmad-worker replicas
// under mpirun, 127.0.0.1, stories260K): completions' echo with logprobs as lm-evaluation-
// harness scores a continuation (token ids, max_tokens 1 or 0), and vLLM's prompt_logprobs, on
// a replica of one rank and on one split over two tensor-parallel ranks. Each prompt token's
// log-probability equals the one the model gave the same token when it generated it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/cluster_http.h"
#include "tests/support/local_cluster.h"
#include "tests/support/paths.h"

namespace bmad::testing {
namespace {

using json = nlohmann::json;

// "token_id:N" (return_tokens_as_token_ids) as N.
int64_t IdOf(const json& token) { return std::stoll(token.get<std::string>().substr(9)); }

// Scores a greedy continuation as lm-evaluation-harness does, and checks it.
void ScoreAContinuation(int port, const std::string& where) {
  SCOPED_TRACE(where);
  const std::string prompt = "Once upon a time";
  // The reference: 8 greedy tokens, each with its log-probability, named by id.
  json generate = {{"prompt", prompt},       {"max_tokens", 8}, {"temperature", 0},
                   {"logprobs", 0},           {"return_tokens_as_token_ids", true}};
  const json reference = ParsedOk(Post(port, "/v1/completions", generate.dump()))["choices"][0];
  const json& generated = reference["logprobs"]["tokens"];
  ASSERT_EQ(generated.size(), 8u) << reference;
  std::vector<int64_t> ids = ParsedOk(Post(port, "/tokenize", json({{"prompt", prompt}}).dump()))["tokens"];
  const size_t context = ids.size();
  for (const json& t : generated) ids.push_back(IdOf(t));

  // Context and continuation as token ids, echo with logprobs, one more token generated.
  json score = {{"prompt", ids}, {"max_tokens", 1}, {"temperature", 0}, {"echo", true}, {"logprobs", 1},
                {"return_tokens_as_token_ids", true}};
  const json choice = ParsedOk(Post(port, "/v1/completions", score.dump()))["choices"][0];
  const json& lp = choice["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), ids.size() + 1) << choice;  // the prompt, then the new token
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(IdOf(lp["tokens"][i]), ids[i]) << i;
  for (size_t k = 0; k < generated.size(); ++k) {
    const double scored = lp["token_logprobs"][context + k].get<double>();
    EXPECT_NEAR(scored, reference["logprobs"]["token_logprobs"][k].get<double>(), 2e-3) << k;
    // Greedy: each continuation token is the most likely, so the one alternative is itself.
    const json& top = lp["top_logprobs"][context + k];
    EXPECT_TRUE(top.contains(generated[k].get<std::string>())) << top;
  }
  EXPECT_EQ(choice["text"].get<std::string>().substr(0, prompt.size()), prompt) << choice;

  // max_tokens 0: the prompt alone, nothing generated in the response or its usage.
  score["max_tokens"] = 0;
  const json only = ParsedOk(Post(port, "/v1/completions", score.dump()));
  EXPECT_EQ(only["choices"][0]["logprobs"]["tokens"].size(), ids.size()) << only;
  EXPECT_EQ(only["usage"]["completion_tokens"], 0) << only;
  EXPECT_EQ(only["usage"]["prompt_tokens"], ids.size()) << only;
  EXPECT_EQ(only["choices"][0]["logprobs"]["token_logprobs"], json(std::vector<json>(lp["token_logprobs"].begin(),
                                                                                    lp["token_logprobs"].end() - 1)));

  // vLLM's prompt_logprobs: null, then each token keyed by id with its rank.
  json vllm = {{"prompt", ids}, {"max_tokens", 1}, {"temperature", 0}, {"prompt_logprobs", 2}};
  const json answered = ParsedOk(Post(port, "/v1/completions", vllm.dump()));
  const json& positions = answered["choices"][0]["prompt_logprobs"];
  ASSERT_EQ(positions.size(), ids.size()) << answered;
  EXPECT_TRUE(positions[0].is_null());
  for (size_t p = 1; p < ids.size(); ++p) {
    const json& own = positions[p][std::to_string(ids[p])];
    EXPECT_NEAR(own["logprob"].get<double>(), lp["token_logprobs"][p].get<double>(), 1e-4) << p;
    EXPECT_GE(own["rank"].get<int>(), 1);
    EXPECT_GE(positions[p].size(), 2u);  // and its alternatives
    EXPECT_LE(positions[p].size(), 3u);
  }
  for (size_t k = 0; k < generated.size(); ++k) {
    EXPECT_EQ(positions[context + k][std::to_string(ids[context + k])]["rank"], 1) << k;
  }

  // Several choices: the first scores the prompt, and each shows the same (echo too).
  json several = {{"prompt", ids}, {"max_tokens", 1}, {"n", 3}, {"prompt_logprobs", 2}, {"echo", true},
                  {"logprobs", 1}, {"return_tokens_as_token_ids", true}};
  const json choices = ParsedOk(Post(port, "/v1/completions", several.dump()))["choices"];
  ASSERT_EQ(choices.size(), 3u) << choices;
  for (const json& c : choices) {
    ASSERT_EQ(c["prompt_logprobs"].size(), ids.size()) << c;
    for (size_t p = 1; p < ids.size(); ++p) {
      const std::string id = std::to_string(ids[p]);
      EXPECT_NEAR(c["prompt_logprobs"][p][id]["logprob"].get<double>(), positions[p][id]["logprob"].get<double>(),
                  1e-4) << p;
      EXPECT_NEAR(c["logprobs"]["token_logprobs"][p].get<double>(), lp["token_logprobs"][p].get<double>(), 1e-4) << p;
    }
  }
}

TEST(OpenAiPromptLogprobsTest, EchoWithLogprobsScoresAContinuationAsTheModelGeneratedIt) {
  LocalCluster cluster({StoriesModelPath(), 1, 0});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  ScoreAContinuation(cluster.http_port(), "one rank");
  const int port = cluster.http_port();
  // Chat: the whole prompt's at the top level, one per token the template gave.
  const json messages = {{{"role", "user"}, {"content", "Tell me a story."}}};
  json chat = {{"messages", messages}, {"max_tokens", 2}, {"prompt_logprobs", 0}};
  const json reply = ParsedOk(Post(port, "/v1/chat/completions", chat.dump()));
  const size_t count = ParsedOk(Post(port, "/tokenize", json({{"messages", messages}}).dump()))["count"];
  ASSERT_TRUE(reply.contains("prompt_logprobs")) << reply;
  EXPECT_EQ(reply["prompt_logprobs"].size(), count);
  // Streaming cannot carry them (as vLLM); a class of its own is not needed.
  json streamed = {{"prompt", "Once"}, {"stream", true}, {"echo", true}, {"logprobs", 1}};
  const HttpResult refused = Post(port, "/v1/completions", streamed.dump());
  EXPECT_EQ(refused.status, 400) << refused.body;
  // Echo without generating, streamed: the prompt's text, nothing after it.
  json only = {{"prompt", "Once upon a time"}, {"stream", true}, {"echo", true}, {"max_tokens", 0},
               {"stream_options", {{"include_usage", true}}}};
  const StreamResult s = Stream(port, only);
  EXPECT_TRUE(s.done) << s.error;
  EXPECT_EQ(s.text, "Once upon a time");
  EXPECT_EQ(s.completion_tokens, 0);
}

TEST(OpenAiPromptLogprobsTest, ATensorParallelReplicaGathersEveryRow) {
  LocalClusterOptions o{StoriesModelPath(), 1, 0};
  o.ranks_per_replica = 2;
  o.extra_sets = {"parallel.tp=2", "scheduler.max_prompt_logprob_tokens=5"};  // several steps' rows
  LocalCluster cluster(o);
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  ScoreAContinuation(cluster.http_port(), "tp=2");
}

}  // namespace
}  // namespace bmad::testing
