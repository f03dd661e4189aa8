// The OpenAI request features end to end, on a local cluster (bmad-coordinator and a bmad-worker
// replica under mpirun, 127.0.0.1, stories260K): the sampler's parameters (logit_bias, min_tokens,
// stop strings and stop_reason, stop token ids), log-probabilities, n choices, batches of
// prompts, /tokenize against what a completion is billed for, and JSON output.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/cluster_http.h"
#include "tests/support/json_verdict.h"
#include "tests/support/local_cluster.h"
#include "tests/support/local_greedy.h"
#include "tests/support/paths.h"
#include "tests/support/schema_verdict.h"
#include "tests/support/sse_completion.h"

namespace bmad::testing {
namespace {

using json = nlohmann::json;

TEST(OpenAiFeaturesTest, LogitBiasAndMinTokensReachTheSampler) {
  LocalCluster cluster({StoriesModelPath(), 1, 0});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  // " a" (261) forced at every step.
  json forced = Completion("Once upon a time", 6, false);
  forced["logit_bias"] = {{"261", 100}};
  HttpResult r = Post(cluster.http_port(), "/v1/completions", forced.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["choices"][0]["text"], " a a a a a a");
  // The "," of the first token does not stop the output before min_tokens; the next one does.
  json held = Completion("Once upon a time", 32, true);
  held["stop"] = ",";
  held["min_tokens"] = 3;
  StreamResult s = Stream(cluster.http_port(), held);
  EXPECT_TRUE(s.done) << s.error;
  EXPECT_EQ(s.text, ", there was a little girl named Lily. She loved to play outside in the park. One day");
  // vLLM's include_stop_str_in_output: the stop string ends the output instead of being cut.
  for (const bool include : {false, true}) {
    json cut = Completion("Once upon a time", 32, false);
    cut["stop"] = " girl";
    cut["include_stop_str_in_output"] = include;
    r = Post(cluster.http_port(), "/v1/completions", cut.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(json::parse(r.body)["choices"][0]["text"],
              include ? ", there was a little girl" : ", there was a little")
        << r.body;
    EXPECT_EQ(json::parse(r.body)["choices"][0]["finish_reason"], "stop") << r.body;
    EXPECT_EQ(json::parse(r.body)["choices"][0]["stop_reason"], " girl") << r.body;  // vLLM's field
  }
  // A stop token id is named the same way.
  json by_token = Completion("Once upon a time", 6, false);
  by_token["logit_bias"] = {{"261", 100}};
  by_token["stop_token_ids"] = {261};
  r = Post(cluster.http_port(), "/v1/completions", by_token.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["choices"][0]["stop_reason"], 261) << r.body;
  EXPECT_EQ(json::parse(r.body)["choices"][0]["text"], "") << r.body;
  // Asked for in the output, the stop token's text ends it (as vLLM): the text the same token
  // gives when the length limit ends the output there.
  by_token["include_stop_str_in_output"] = true;
  r = Post(cluster.http_port(), "/v1/completions", by_token.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json one_token = Completion("Once upon a time", 1, false);
  one_token["logit_bias"] = {{"261", 100}};
  const HttpResult alone = Post(cluster.http_port(), "/v1/completions", one_token.dump());
  ASSERT_EQ(alone.status, 200) << alone.body;
  const std::string token_text = json::parse(alone.body)["choices"][0]["text"];
  EXPECT_FALSE(token_text.empty()) << alone.body;
  EXPECT_EQ(json::parse(r.body)["choices"][0]["text"], token_text) << r.body;
  EXPECT_EQ(json::parse(r.body)["choices"][0]["stop_reason"], 261) << r.body;
  // A bias for a token the model does not have is the client's error, named.
  json outside = Completion("Once", 4, false);
  outside["logit_bias"] = {{"600", 1}};
  r = Post(cluster.http_port(), "/v1/completions", outside.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("'logit_bias' for token 600"), std::string::npos) << r.body;
}

TEST(OpenAiFeaturesTest, TopLogprobsComeWithEveryToken) {
  LocalCluster cluster({StoriesModelPath(), 1, 0});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  // Completions: logprobs 3 lists the chosen token and its 3 most likely alternatives; greedy,
  // the chosen one is the most likely, with the same log-probability.
  json body = Completion("Once upon a time", 12, false);
  body["logprobs"] = 3;
  HttpResult r = Post(cluster.http_port(), "/v1/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json lp = json::parse(r.body)["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 12u) << r.body;
  for (size_t i = 0; i < 12; ++i) {
    const json& top = lp["top_logprobs"][i];
    ASSERT_GE(top.size(), 3u) << top;  // 4 unless the chosen piece is among the 3, or pieces repeat
    ASSERT_LE(top.size(), 4u) << top;
    const std::string chosen = lp["tokens"][i];
    ASSERT_TRUE(top.contains(chosen)) << top;
    EXPECT_EQ(top[chosen], lp["token_logprobs"][i]);
    double best = -1e9;
    for (const auto& [piece, value] : top.items()) best = std::max(best, value.get<double>());
    EXPECT_EQ(best, lp["token_logprobs"][i].get<double>()) << top;
  }
  // Streamed, each token has the text_offset it has in the whole answer, also when a stop
  // string holds text back and then cuts it.
  for (const json& stop : {json(nullptr), json({"girl"}), json({" the"})}) {
    json both = Completion("Once upon a time", 40, false);
    both["logprobs"] = 1;
    if (!stop.is_null()) both["stop"] = stop;
    HttpResult whole = Post(cluster.http_port(), "/v1/completions", both.dump());
    ASSERT_EQ(whole.status, 200) << whole.body;
    const std::vector<int64_t> want =
        json::parse(whole.body)["choices"][0]["logprobs"]["text_offset"].get<std::vector<int64_t>>();
    both["stream"] = true;
    StreamResult streamed = Stream(cluster.http_port(), both);
    ASSERT_TRUE(streamed.done);
    EXPECT_EQ(streamed.text_offsets, want) << stop;
  }
  // An empty prompt: the first token begins the text and loses its leading space there
  // ("Once", not " Once"); its logprob entry is written the same way, so the tokens make the
  // text and the offsets index it, whole or streamed.
  json empty = Completion("", 3, false);
  empty["logprobs"] = 2;
  HttpResult e = Post(cluster.http_port(), "/v1/completions", empty.dump());
  ASSERT_EQ(e.status, 200) << e.body;
  const json choice = json::parse(e.body)["choices"][0];
  std::string joined;
  std::vector<int64_t> offsets;
  for (const json& t : choice["logprobs"]["tokens"]) {
    offsets.push_back(static_cast<int64_t>(joined.size()));  // ASCII here: bytes are characters
    joined += t.get<std::string>();
  }
  EXPECT_EQ(joined, choice["text"]) << e.body;
  EXPECT_NE(joined.front(), ' ') << e.body;
  EXPECT_EQ(choice["logprobs"]["text_offset"].get<std::vector<int64_t>>(), offsets) << e.body;
  EXPECT_TRUE(choice["logprobs"]["top_logprobs"][0].contains(choice["logprobs"]["tokens"][0].get<std::string>()))
      << e.body;
  empty["stream"] = true;
  StreamResult streamed_empty = Stream(cluster.http_port(), empty);
  ASSERT_TRUE(streamed_empty.done);
  EXPECT_EQ(streamed_empty.text, choice["text"]);
  EXPECT_EQ(streamed_empty.text_offsets, offsets);
  // Chat: top_logprobs 2 gives two entries per token, the greedy token first.
  json chat = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 6},
               {"temperature", 0}, {"logprobs", true}, {"top_logprobs", 2}};
  HttpResult c = Post(cluster.http_port(), "/v1/chat/completions", chat.dump());
  ASSERT_EQ(c.status, 200) << c.body;
  const json content = json::parse(c.body)["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 6u) << c.body;
  for (const json& t : content) {
    ASSERT_EQ(t["top_logprobs"].size(), 2u) << t;
    EXPECT_EQ(t["top_logprobs"][0]["token"], t["token"]) << t;
    EXPECT_EQ(t["top_logprobs"][0]["logprob"], t["logprob"]) << t;
    EXPECT_GE(t["top_logprobs"][0]["logprob"].get<double>(), t["top_logprobs"][1]["logprob"].get<double>());
  }
  // vLLM's return_tokens_as_token_ids: the same tokens, named "token_id:N"; the ids decode to
  // the text, and chat's bytes are still the token's.
  body["return_tokens_as_token_ids"] = true;
  r = Post(cluster.http_port(), "/v1/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json by_id = json::parse(r.body)["choices"][0];
  std::vector<int64_t> ids;
  for (const json& t : by_id["logprobs"]["tokens"]) {
    const std::string name = t;
    ASSERT_EQ(name.rfind("token_id:", 0), 0u) << name;
    ids.push_back(std::stoll(name.substr(9)));
    EXPECT_TRUE(by_id["logprobs"]["top_logprobs"][ids.size() - 1].contains(name)) << by_id;
  }
  EXPECT_EQ(by_id["logprobs"]["token_logprobs"], lp["token_logprobs"]);
  // After the prompt's (a piece's leading space depends on what comes before it).
  const auto detokenize = [&](const std::vector<int64_t>& tokens) {
    HttpResult d = Post(cluster.http_port(), "/detokenize", json({{"tokens", tokens}}).dump());
    EXPECT_EQ(d.status, 200) << d.body;
    return json::parse(d.body).value("prompt", "");
  };
  const std::vector<int64_t> prompt_ids =
      json::parse(Post(cluster.http_port(), "/tokenize", json({{"prompt", "Once upon a time"}}).dump()).body)["tokens"];
  std::vector<int64_t> all = prompt_ids;
  all.insert(all.end(), ids.begin(), ids.end());
  EXPECT_EQ(detokenize(all), detokenize(prompt_ids) + by_id["text"].get<std::string>());
  chat["return_tokens_as_token_ids"] = true;
  HttpResult c_ids = Post(cluster.http_port(), "/v1/chat/completions", chat.dump());
  ASSERT_EQ(c_ids.status, 200) << c_ids.body;
  const json content_ids = json::parse(c_ids.body)["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content_ids.size(), content.size());
  for (size_t i = 0; i < content.size(); ++i) {
    EXPECT_EQ(content_ids[i]["token"].get<std::string>().rfind("token_id:", 0), 0u) << content_ids[i];
    EXPECT_EQ(content_ids[i]["bytes"], content[i]["bytes"]) << i;
    EXPECT_EQ(content_ids[i]["top_logprobs"][0]["token"], content_ids[i]["token"]) << i;
  }
}

// n choices: each is its own request, choice i seeded with seed + i, so each equals a one-choice
// request with that seed, streamed or not; greedy, every choice is the greedy answer. The usage
// counts the prompt once and every choice's completion.
TEST(OpenAiFeaturesTest, NChoicesAreEachTheirOwnSeededRequest) {
  LocalCluster cluster({StoriesModelPath(), 1, 0});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  const int port = cluster.http_port();
  const std::string greedy = LocalGreedyText(StoriesModelPath(), "Once upon a time", 16);
  json body = Completion("Once upon a time", 16, false);
  HttpResult one = Post(port, "/v1/completions", body.dump());
  ASSERT_EQ(one.status, 200) << one.body;
  const int prompt_tokens = json::parse(one.body)["usage"]["prompt_tokens"];
  body["n"] = 3;
  HttpResult r = Post(port, "/v1/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  ASSERT_EQ(j["choices"].size(), 3u) << r.body;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(j["choices"][i]["index"], i) << r.body;
    EXPECT_EQ(j["choices"][i]["text"], greedy) << r.body;
    EXPECT_EQ(j["choices"][i]["finish_reason"], "length") << r.body;
  }
  EXPECT_EQ(j["usage"]["prompt_tokens"], prompt_tokens) << r.body;
  EXPECT_EQ(j["usage"]["completion_tokens"], 48) << r.body;
  EXPECT_EQ(j["usage"]["total_tokens"], prompt_tokens + 48) << r.body;

  const json sampled = {{"prompt", "Once upon a time"}, {"max_tokens", 24}, {"temperature", 1.0},
                        {"seed", 7}, {"n", 3}};
  r = Post(port, "/v1/completions", sampled.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  j = json::parse(r.body);
  ASSERT_EQ(j["choices"].size(), 3u) << r.body;
  std::set<std::string> distinct;
  for (int i = 0; i < 3; ++i) {
    json single = sampled;
    single["n"] = 1;
    single["seed"] = 7 + i;
    HttpResult alone = Post(port, "/v1/completions", single.dump());
    ASSERT_EQ(alone.status, 200) << alone.body;
    EXPECT_EQ(j["choices"][i]["text"], json::parse(alone.body)["choices"][0]["text"]) << i;
    distinct.insert(j["choices"][i]["text"].get<std::string>());
  }
  EXPECT_GE(distinct.size(), 2u) << r.body;

  json chat = {{"messages", {{{"role", "user"}, {"content", "Tell me a story"}}}},
               {"max_tokens", 12}, {"temperature", 1.0}, {"seed", 3}, {"n", 2}};
  HttpResult whole = Post(port, "/v1/chat/completions", chat.dump());
  ASSERT_EQ(whole.status, 200) << whole.body;
  const json w = json::parse(whole.body);
  ASSERT_EQ(w["choices"].size(), 2u) << whole.body;
  chat["stream"] = true;
  chat["stream_options"] = {{"include_usage", true}};
  const StreamResult s = StreamCompletion(port, "/v1/chat/completions", chat);
  EXPECT_TRUE(s.done) << s.error;
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(s.texts.count(i) ? s.texts.at(i) : "", w["choices"][i]["message"]["content"]) << i;
    EXPECT_EQ(s.role_chunks.count(i) ? s.role_chunks.at(i) : 0, 1) << i;
    EXPECT_EQ(s.finish_reasons.count(i) ? s.finish_reasons.at(i) : "", w["choices"][i]["finish_reason"]) << i;
  }
  EXPECT_EQ(s.texts.size(), 2u);
  EXPECT_EQ(s.usage_chunks, 1);
  EXPECT_EQ(s.completion_tokens, w["usage"]["completion_tokens"]);
}

// A completions batch: each prompt gets its n choices, numbered prompt * n + choice; the usage
// counts each prompt once; a prompt that cannot be served refuses the whole batch, named.
TEST(OpenAiFeaturesTest, ABatchOfPromptsGetsEachItsChoices) {
  LocalCluster cluster({StoriesModelPath(), 1, 0});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  const int port = cluster.http_port();
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog"};
  json body = {{"prompt", prompts}, {"max_tokens", 8}, {"temperature", 0}, {"n", 2}, {"ignore_eos", true}};
  HttpResult r = Post(port, "/v1/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  ASSERT_EQ(j["choices"].size(), 4u) << r.body;
  int prompt_tokens = 0;
  for (size_t p = 0; p < prompts.size(); ++p) {
    const std::string want =
        LocalGreedyText(StoriesModelPath(), prompts[p], 8, /*ignore_eos=*/true);
    for (size_t c = 0; c < 2; ++c) {
      EXPECT_EQ(j["choices"][p * 2 + c]["index"], p * 2 + c);
      EXPECT_EQ(j["choices"][p * 2 + c]["text"], want) << p << " " << c;
    }
    HttpResult counted = Post(port, "/tokenize", json({{"prompt", prompts[p]}}).dump());
    prompt_tokens += json::parse(counted.body)["count"].get<int>();
  }
  EXPECT_EQ(j["usage"]["prompt_tokens"], prompt_tokens);
  EXPECT_EQ(j["usage"]["completion_tokens"], 32);

  body["stream"] = true;
  const StreamResult s = Stream(port, body);
  EXPECT_TRUE(s.done) << s.error;
  ASSERT_EQ(s.texts.size(), 4u);
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(s.texts.at(i), j["choices"][i]["text"]) << i;

  std::string long_prompt;
  for (int i = 0; i < 600; ++i) long_prompt += "Once ";
  body = {{"prompt", {"Once upon a time", long_prompt}}, {"max_tokens", 8}};
  r = Post(port, "/v1/completions", body.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["param"], "prompt[1]") << r.body;
  EXPECT_NE(r.body.find("context length"), std::string::npos) << r.body;
  // A model the cluster does not serve is the request's error, not its first prompt's.
  body = {{"prompt", {"Once upon a time", "The little dog"}}, {"max_tokens", 8}, {"model", "other"}};
  r = Post(port, "/v1/completions", body.dump());
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["param"], "model") << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["code"], "model_not_found") << r.body;
}

// vLLM's continuous_usage_stats: every chunk of a choice carries that choice's usage so far
// (its prompt, its tokens up to there), rising to what the final usage chunk adds up.
TEST(OpenAiFeaturesTest, ContinuousUsageCountsEachChoiceAsItGoes) {
  LocalCluster cluster({StoriesModelPath(), 1, 0});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  const int port = cluster.http_port();
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog ran"};
  std::vector<int64_t> prompt_counts;
  for (const std::string& p : prompts) {
    prompt_counts.push_back(json::parse(Post(port, "/tokenize", json({{"prompt", p}}).dump()).body)["count"]);
  }
  const json body = {{"prompt", prompts}, {"max_tokens", 8}, {"temperature", 0}, {"n", 2}, {"ignore_eos", true},
                     {"stream", true},
                     {"stream_options", {{"include_usage", true}, {"continuous_usage_stats", true}}}};
  const StreamResult s = Stream(port, body);
  EXPECT_TRUE(s.done) << s.error;
  ASSERT_EQ(s.usage_so_far.size(), 4u);
  for (int64_t i = 0; i < 4; ++i) {
    const std::vector<json>& seen = s.usage_so_far.at(i);
    ASSERT_FALSE(seen.empty()) << i;
    int64_t before = 0;
    for (const json& u : seen) {
      EXPECT_EQ(u["prompt_tokens"], prompt_counts[static_cast<size_t>(i / 2)]) << i << ": " << u;
      EXPECT_GE(u["completion_tokens"].get<int64_t>(), before) << i;
      before = u["completion_tokens"];
      EXPECT_EQ(u["total_tokens"], u["prompt_tokens"].get<int64_t>() + before) << i;
    }
    EXPECT_EQ(seen.back()["completion_tokens"], 8) << i;
  }
  ASSERT_EQ(s.usage_chunks, 1);
  EXPECT_EQ(s.usage["completion_tokens"], 32);
  EXPECT_EQ(s.usage["prompt_tokens"], prompt_counts[0] + prompt_counts[1]);

  // Chat: the role chunk starts each choice at 0 tokens.
  const json chat = {{"messages", {{{"role", "user"}, {"content", "Tell me a story"}}}},
                     {"max_tokens", 5}, {"temperature", 0}, {"n", 2}, {"ignore_eos", true}, {"stream", true},
                     {"stream_options", {{"include_usage", true}, {"continuous_usage_stats", true}}}};
  const StreamResult c = StreamCompletion(port, "/v1/chat/completions", chat);
  EXPECT_TRUE(c.done) << c.error;
  for (int64_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(c.usage_so_far.count(i)) << i;
    ASSERT_GE(c.usage_so_far.at(i).size(), 2u) << i;
    EXPECT_EQ(c.usage_so_far.at(i).front()["completion_tokens"], 0) << i;
    EXPECT_EQ(c.usage_so_far.at(i).back()["completion_tokens"], 5) << i;
    EXPECT_EQ(c.usage_so_far.at(i).back()["prompt_tokens"], c.usage["prompt_tokens"]) << i;
  }
  EXPECT_EQ(c.usage["completion_tokens"], 10);

  // Without include_usage it asks for nothing (as in vLLM): no usage anywhere.
  json plain = body;
  plain["stream_options"] = {{"continuous_usage_stats", true}};
  const StreamResult p = Stream(port, plain);
  EXPECT_TRUE(p.done) << p.error;
  EXPECT_TRUE(p.usage_so_far.empty());
  EXPECT_EQ(p.usage_chunks, 0);
}

// vLLM's truncate_prompt_tokens: the prompt keeps its last k tokens (after the BOS and the chat
// template), which is what is generated from and billed; a prompt longer than the context,
// text or token ids, is then served instead of refused.
TEST(OpenAiFeaturesTest, TruncatePromptTokensKeepsTheLastTokens) {
  LocalCluster cluster({StoriesModelPath(), 1, 0});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  const int port = cluster.http_port();
  const std::string text = "Once upon a time there was a little dog";
  const json counted = json::parse(Post(port, "/tokenize", json({{"prompt", text}}).dump()).body);
  const std::vector<int64_t> tokens = counted["tokens"];
  ASSERT_GT(tokens.size(), 4u);
  const std::vector<int64_t> last3(tokens.end() - 3, tokens.end());

  json cut = {{"prompt", text}, {"max_tokens", 6}, {"temperature", 0}, {"ignore_eos", true},
              {"truncate_prompt_tokens", 3}};
  HttpResult r = Post(port, "/v1/completions", cut.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["usage"]["prompt_tokens"], 3) << r.body;
  json same = cut;
  same["prompt"] = last3;
  same.erase("truncate_prompt_tokens");
  HttpResult direct = Post(port, "/v1/completions", same.dump());
  ASSERT_EQ(direct.status, 200) << direct.body;
  EXPECT_EQ(json::parse(r.body)["choices"][0]["text"], json::parse(direct.body)["choices"][0]["text"]);
  // /tokenize counts it as the completion bills it.
  json count_cut = {{"prompt", text}, {"truncate_prompt_tokens", 3}};
  EXPECT_EQ(json::parse(Post(port, "/tokenize", count_cut.dump()).body)["tokens"], last3);

  // Longer than the context: token ids and text alike are cut to fit rather than refused.
  const int64_t context = counted["max_model_len"];
  std::vector<int64_t> long_ids(static_cast<size_t>(context) + 40, tokens[1]);
  long_ids.back() = tokens[2];
  json too_long = {{"prompt", long_ids}, {"max_tokens", 4}, {"temperature", 0}};
  EXPECT_EQ(Post(port, "/v1/completions", too_long.dump()).status, 400);
  too_long["truncate_prompt_tokens"] = context - 4;
  r = Post(port, "/v1/completions", too_long.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["usage"]["prompt_tokens"], context - 4) << r.body;
  std::string long_text;
  while (long_text.size() < static_cast<size_t>(context) * 64) long_text += "Once upon a time. ";
  json long_chat = {{"messages", {{{"role", "user"}, {"content", long_text}}}}, {"max_tokens", 2}};
  EXPECT_EQ(Post(port, "/v1/chat/completions", long_chat.dump()).status, 400);
  long_chat["truncate_prompt_tokens"] = 16;
  r = Post(port, "/v1/chat/completions", long_chat.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["usage"]["prompt_tokens"], 16) << r.body;
  // -1 keeps the whole context, which leaves no room for max_tokens: refused as too long.
  too_long["truncate_prompt_tokens"] = -1;
  r = Post(port, "/v1/completions", too_long.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["code"], "context_length_exceeded") << r.body;
  too_long["truncate_prompt_tokens"] = context + 1;
  r = Post(port, "/v1/completions", too_long.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["param"], "truncate_prompt_tokens") << r.body;
}

// vLLM's allowed_token_ids and bad_words reach the sampler: every token generated is one of
// the allowed, and a banned word is never generated, where the greedy answer had it.
TEST(OpenAiFeaturesTest, AllowedTokenIdsAndBadWordsBanWhatTheyBan) {
  LocalCluster cluster({StoriesModelPath(), 1, 0});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  const int port = cluster.http_port();
  const auto generated_ids = [&](const json& body) {
    HttpResult r = Post(port, "/v1/completions", body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    std::vector<int64_t> ids;
    if (r.status != 200) return std::make_pair(ids, std::string());
    const json choice = json::parse(r.body)["choices"][0];
    for (const json& t : choice["logprobs"]["tokens"]) ids.push_back(std::stoll(t.get<std::string>().substr(9)));
    return std::make_pair(ids, choice["text"].get<std::string>());
  };
  json body = Completion("Once upon a time", 16, false);
  body["logprobs"] = 0;
  body["return_tokens_as_token_ids"] = true;
  const auto [greedy_ids, greedy_text] = generated_ids(body);
  ASSERT_NE(greedy_text.find(" girl"), std::string::npos) << greedy_text;

  json allowed = body;
  const std::vector<int64_t> set = {greedy_ids[0], greedy_ids[2], 261, 262};
  allowed["allowed_token_ids"] = set;
  const auto [allowed_ids, allowed_text] = generated_ids(allowed);
  ASSERT_EQ(allowed_ids.size(), 16u) << allowed_text;  // the end token is not allowed either
  for (const int64_t id : allowed_ids) EXPECT_NE(std::find(set.begin(), set.end(), id), set.end()) << id;

  json banned = body;
  banned["bad_words"] = {"girl"};
  const auto [banned_ids, banned_text] = generated_ids(banned);
  EXPECT_EQ(banned_text.find("girl"), std::string::npos) << banned_text;
  EXPECT_NE(banned_text, greedy_text);
  // The same up to where the greedy answer had the word.
  const size_t before = greedy_text.find(" girl");
  EXPECT_EQ(banned_text.substr(0, before), greedy_text.substr(0, before)) << banned_text;

  // Chat takes them too; a word too long in tokens is refused by name.
  json chat = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 4}, {"temperature", 0},
               {"bad_words", {"the", " a"}}, {"allowed_token_ids", json::array()}};
  EXPECT_EQ(Post(port, "/v1/chat/completions", chat.dump()).status, 200);
  std::string long_word;
  for (int i = 0; i < 40; ++i) long_word += "\xE4\xB8\x80";  // 40 CJK characters, byte tokens here
  body["bad_words"] = {"fine", long_word};
  HttpResult refused = Post(port, "/v1/completions", body.dump());
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_EQ(json::parse(refused.body)["error"]["param"], "bad_words[1]") << refused.body;
}

// /tokenize counts a prompt as the completion endpoints do: its count is the usage's
// prompt_tokens, for text and for chat.
TEST(OpenAiFeaturesTest, TokenizeCountsWhatTheCompletionIsBilledFor) {
  LocalCluster cluster({StoriesModelPath(), 1, 0});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  const int port = cluster.http_port();
  const json messages = {{{"role", "system"}, {"content", "You tell stories."}},
                         {{"role", "user"}, {"content", "Tell me one about a cat."}}};
  // vLLM's add_special_tokens (false: no BOS) counts alike on both; an empty text is the BOS
  // alone (unconditional generation).
  const json no_bos = {{"prompt", "Once upon a time"}, {"add_special_tokens", false}};
  for (const auto& [path, body] : {std::pair<std::string, json>{"/v1/completions", {{"prompt", "Once upon a time"}}},
                                   {"/v1/chat/completions", {{"messages", messages}}},
                                   {"/v1/completions", no_bos},
                                   {"/v1/completions", {{"prompt", ""}}}}) {
    HttpResult counted = Post(port, "/tokenize", body.dump());
    ASSERT_EQ(counted.status, 200) << counted.body;
    json request = body;
    request["max_tokens"] = 2;
    HttpResult billed = Post(port, path, request.dump());
    ASSERT_EQ(billed.status, 200) << billed.body;
    EXPECT_EQ(json::parse(counted.body)["count"], json::parse(billed.body)["usage"]["prompt_tokens"]) << body;
  }
  HttpResult with_bos = Post(port, "/tokenize", json({{"prompt", "Once upon a time"}}).dump());
  HttpResult without = Post(port, "/tokenize", no_bos.dump());
  EXPECT_EQ(json::parse(with_bos.body)["count"].get<int>(), json::parse(without.body)["count"].get<int>() + 1);
  EXPECT_EQ(json::parse(Post(port, "/tokenize", json({{"prompt", ""}}).dump()).body)["count"], 1);
  // Without the BOS an empty text holds no token: refused, by name.
  HttpResult nothing = Post(port, "/v1/completions", json({{"prompt", ""}, {"add_special_tokens", false}}).dump());
  EXPECT_EQ(nothing.status, 400) << nothing.body;
  EXPECT_EQ(json::parse(nothing.body)["error"]["param"], "prompt") << nothing.body;
  EXPECT_NE(nothing.body.find("holds no tokens"), std::string::npos) << nothing.body;
}

TEST(OpenAiFeaturesTest, JsonObjectResponsesAreHeldToAnObject) {
  LocalCluster cluster({StoriesModelPath(), 1, 0});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  // The same tokens as `bmad generate --json`, whole and streamed; the text is an object or,
  // cut by max_tokens, the start of one.
  const std::string expected = LocalGreedyJson(StoriesModelPath(), "Once upon a time", 40);
  ASSERT_EQ(expected[0], '{') << expected;
  for (const bool stream : {false, true}) {
    json body = Completion("Once upon a time", 40, stream);
    body["response_format"] = {{"type", "json_object"}};
    const auto [text, finish] = Answer(cluster.http_port(), body);
    EXPECT_EQ(text, expected) << stream;
    EXPECT_EQ(JudgeJson(text), finish == "stop" ? JsonVerdict::kWhole : JsonVerdict::kPrefix) << text;
  }
  // Chat takes it too.
  json chat = {{"messages", {{{"role", "user"}, {"content", "A cat, as JSON"}}}},
               {"max_tokens", 24},
               {"temperature", 0},
               {"response_format", {{"type", "json_object"}}}};
  HttpResult r = Post(cluster.http_port(), "/v1/chat/completions", chat.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string content = json::parse(r.body)["choices"][0]["message"]["content"];
  EXPECT_EQ(content.substr(0, 1), "{") << content;
  EXPECT_NE(JudgeJson(content), JsonVerdict::kInvalid) << content;
  // What it cannot honour is refused, named.
  chat["min_tokens"] = 4;
  r = Post(cluster.http_port(), "/v1/chat/completions", chat.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("'min_tokens' cannot be used with response_format"), std::string::npos) << r.body;
}

TEST(OpenAiFeaturesTest, JsonSchemaResponsesAreValuesTheSchemaAllows) {
  LocalCluster cluster({StoriesModelPath(), 1, 0});
  std::string error;
  ASSERT_TRUE(cluster.Start(&error)) << error;
  // (Properties in sorted order: these bodies are nlohmann::json, which sorts keys.)
  const std::string schema_text = R"({"type":"object","properties":{"age":{"type":"integer"},
      "friends":{"type":"array","items":{"enum":["Tim","Sue","Max"]},"maxItems":2},
      "mood":{"enum":["happy","sad","sleepy"]},"name":{"type":"string"}},
    "required":["mood","name","age"],"additionalProperties":false})";
  const json schema = json::parse(schema_text);
  // The same tokens as `bmad generate --json-schema`, whole and streamed, and through vLLM's
  // guided_json; the text is a value the schema allows or, cut by max_tokens, the start of one.
  const std::string expected =
      LocalGreedyJson(StoriesModelPath(), "Once upon a time", 120, schema_text);
  ASSERT_TRUE(expected.starts_with("{ \"age\"")) << expected;
  for (const bool stream : {false, true}) {
    for (const bool guided : {false, true}) {
      json body = Completion("Once upon a time", 120, stream);
      if (guided) {
        body["guided_json"] = schema;
      } else {
        body["response_format"] = {{"type", "json_schema"},
                                   {"json_schema", {{"name", "character"}, {"strict", true}, {"schema", schema}}}};
      }
      const auto [text, finish] = Answer(cluster.http_port(), body);
      EXPECT_EQ(text, expected) << stream << guided;
      EXPECT_EQ(finish, "stop") << text;
      ASSERT_EQ(JudgeJson(text), JsonVerdict::kWhole) << text;
      EXPECT_EQ(SchemaViolation(json::parse(text), schema), "") << text;
    }
  }
  // vLLM's disable_any_whitespace: the same schema, compact (the greedy text above has spaces).
  for (const bool stream : {false, true}) {
    json body = Completion("Once upon a time", 120, stream);
    body["structured_outputs"] = {{"json", schema}, {"disable_any_whitespace", true}};
    const auto [text, finish] = Answer(cluster.http_port(), body);
    EXPECT_EQ(finish, "stop") << text;
    ASSERT_EQ(JudgeJson(text), JsonVerdict::kWhole) << text;
    EXPECT_EQ(SchemaViolation(json::parse(text), schema), "") << text;
    bool in_string = false, escaped = false;
    for (const char c : text) {
      if (in_string) {
        in_string = escaped || c != '"';
        escaped = !escaped && c == '\\';
        continue;
      }
      in_string = c == '"';
      EXPECT_TRUE(c != ' ' && c != '\n' && c != '\t' && c != '\r') << "whitespace outside a string: " << text;
    }
  }
  // The order the body declares the properties in is the order they are written in.
  const std::string ordered = R"({"prompt": "Once upon a time", "max_tokens": 60, "temperature": 0,
      "response_format": {"type": "json_schema", "json_schema": {"name": "pair", "schema": {"type": "object",
        "properties": {"zeta": {"enum": ["z"]}, "alpha": {"type": "boolean"}}, "required": ["zeta", "alpha"]}}}})";
  HttpResult in_order = Post(cluster.http_port(), "/v1/completions", ordered);
  ASSERT_EQ(in_order.status, 200) << in_order.body;
  const std::string pair = json::parse(in_order.body)["choices"][0]["text"];
  EXPECT_LT(pair.find("\"zeta\""), pair.find("\"alpha\"")) << pair;
  EXPECT_EQ(SchemaViolation(json::parse(pair), json::parse(ordered)["response_format"]["json_schema"]["schema"]), "")
      << pair;
  // Chat takes it too; a root that is no object is fine.
  json chat = {{"messages", {{{"role", "user"}, {"content", "Pick a colour"}}}},
               {"max_tokens", 24},
               {"temperature", 0},
               {"response_format", {{"type", "json_schema"},
                                    {"json_schema", {{"name", "colour"}, {"schema", {{"enum", {"red", "green", "blue"}}}}}}}}};
  HttpResult r = Post(cluster.http_port(), "/v1/chat/completions", chat.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string content = json::parse(r.body)["choices"][0]["message"]["content"];
  EXPECT_TRUE(content == "\"red\"" || content == "\"green\"" || content == "\"blue\"") << content;
  EXPECT_EQ(json::parse(r.body)["choices"][0]["finish_reason"], "stop") << r.body;
  // A keyword it does not enforce is refused, named with its place; so is a schema with no value.
  chat["response_format"]["json_schema"]["schema"] = {{"type", "string"}, {"pattern", "^[a-z]+$"}};
  r = Post(cluster.http_port(), "/v1/chat/completions", chat.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["message"],
            "'response_format.json_schema.schema' at the root: keyword 'pattern' is not supported")
      << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["param"], "response_format.json_schema.schema") << r.body;
  chat["response_format"]["json_schema"]["schema"] = {{"$ref", "#/$defs/Missing"}};
  r = Post(cluster.http_port(), "/v1/chat/completions", chat.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("names nothing in the schema"), std::string::npos) << r.body;
}

}  // namespace
}  // namespace bmad::testing
