#include "coordinator/http/tokenize_api.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace bmad::http {
namespace {

using Json = nlohmann::json;

TEST(ParseTokenizeRequest, APromptOrMessagesWithTheirOwnFields) {
  Result<TokenizeRequest> text = ParseTokenizeRequest(R"({"prompt": "Once upon a time"})", {});
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_FALSE(text->prompt.chat);
  ASSERT_EQ(text->prompt.prompts.size(), 1u);
  EXPECT_EQ(text->prompt.prompts[0].text, "Once upon a time");
  EXPECT_TRUE(text->add_special_tokens);
  EXPECT_FALSE(text->return_token_strs);

  Result<TokenizeRequest> chat = ParseTokenizeRequest(
      R"({"model": "m", "messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": false,
          "add_special_tokens": false, "return_token_strs": true})",
      {});
  ASSERT_TRUE(chat.ok()) << chat.status().ToString();
  EXPECT_TRUE(chat->prompt.chat);
  EXPECT_EQ(chat->prompt.model, "m");
  ASSERT_EQ(chat->prompt.messages.size(), 1u);
  EXPECT_FALSE(chat->prompt.add_generation_prompt);
  EXPECT_FALSE(chat->add_special_tokens);
  EXPECT_TRUE(chat->return_token_strs);
}

TEST(ParseTokenizeRequest, ErrorsNameTheField) {
  auto message = [](std::string_view body) { return ParseTokenizeRequest(body, {}).status().message(); };
  EXPECT_NE(message("{}").find("'prompt'"), std::string::npos) << message("{}");
  EXPECT_NE(message(R"({"prompt": "x", "add_special_tokens": 1})").find("'add_special_tokens' must be a boolean"),
            std::string::npos);
  EXPECT_NE(message(R"({"messages": []})").find("'messages'"), std::string::npos);
  EXPECT_NE(message("[1]").find("object"), std::string::npos) << message("[1]");
  EXPECT_NE(message(R"({"prompt": ["a", "b"]})").find("'prompt' must be one prompt"), std::string::npos)
      << message(R"({"prompt": ["a", "b"]})");
  // Both: which one was counted is not for the server to guess (the messages were, silently).
  const std::string both = R"({"prompt": "a", "messages": [{"role": "user", "content": "Hi"}]})";
  EXPECT_EQ(message(both), "'prompt' and 'messages' cannot both be given: /tokenize counts one prompt");
  EXPECT_TRUE(ParseTokenizeRequest(R"({"prompt": null, "messages": [{"role": "user", "content": "Hi"}]})", {}).ok());
  EXPECT_TRUE(ParseTokenizeRequest(R"({"prompt": "a", "messages": null})", {}).ok());
}

TEST(ParseDetokenizeRequest, TokenIdsOnly) {
  Result<DetokenizeRequest> ok = ParseDetokenizeRequest(R"({"tokens": [1, 2.0, 300], "model": "m"})", {});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->tokens, (std::vector<uint32_t>{1, 2, 300}));
  EXPECT_EQ(ok->model, "m");
  EXPECT_TRUE(ParseDetokenizeRequest(R"({"tokens": []})", {}).ok());
  for (const auto& [body, want] : std::vector<std::pair<std::string, std::string>>{
           {"{}", "'tokens' is required"},
           {R"({"tokens": "1 2"})", "'tokens' must be an array of token ids"},
           {R"({"tokens": [1, -2]})", "'tokens[1]' must be a token id (an integer >= 0), got -2"},
           {R"({"tokens": [1.5]})", "'tokens[0]' must be a token id"},
           {R"({"tokens": [9999999999]})", "'tokens[0]' must be a token id"},
           {R"({"tokens": [1], "model": 3})", "'model' must be a string"}}) {
    const Status s = ParseDetokenizeRequest(body, {}).status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << body;
    EXPECT_NE(s.message().find(want), std::string::npos) << body << ": " << s.message();
  }
}

TEST(RenderTokenize, CountLengthTokensAndOptionalPieces) {
  const std::vector<uint32_t> tokens = {1, 15, 42};
  const Json plain = Json::parse(RenderTokenize(tokens, 512, nullptr));
  EXPECT_EQ(plain["count"], 3);
  EXPECT_EQ(plain["max_model_len"], 512);
  EXPECT_EQ(plain["tokens"], Json({1, 15, 42}));
  EXPECT_TRUE(plain["token_strs"].is_null());
  const std::vector<std::string> pieces = {"", " Once", "\xE2"};  // a partial character
  const Json with = Json::parse(RenderTokenize(tokens, 512, &pieces));
  EXPECT_EQ(with["token_strs"], Json({"", " Once", "\xEF\xBF\xBD"}));
}

TEST(RenderDetokenize, ThePromptAsValidJson) {
  EXPECT_EQ(Json::parse(RenderDetokenize("Once upon"))["prompt"], "Once upon");
  EXPECT_EQ(Json::parse(RenderDetokenize("a\xE2"))["prompt"], "a\xEF\xBF\xBD");
}

}  // namespace
}  // namespace bmad::http
