#include "coordinator/http/openai_response.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace bmad::http {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using Json = nlohmann::json;

// Parses a JSON document the way a client would, failing the test when it is not valid JSON.
Json Parse(std::string_view text) {
  Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(json.is_discarded()) << text;
  return json;
}

// Checks one SSE event's framing ("data: " + one line + blank line) and returns its payload.
Json ParseEvent(const std::string& event) {
  EXPECT_THAT(event, StartsWith("data: "));
  EXPECT_GE(event.size(), 8u);
  EXPECT_EQ(event.substr(event.size() - 2), "\n\n");
  const std::string payload = event.substr(6, event.size() - 8);
  EXPECT_EQ(payload.find('\n'), std::string::npos) << "an SSE data line must be one line";
  EXPECT_EQ(payload.find('\r'), std::string::npos);
  return Parse(payload);
}

ResponseContext Context() {
  ResponseContext context;
  context.request_id = "42";
  context.created_unix_s = 1700000000;
  context.model = "tiny-llama";
  return context;
}

proto::Usage SomeUsage() {
  proto::Usage usage;
  usage.prompt_tokens = 10;
  usage.completion_tokens = 5;
  usage.cached_prompt_tokens = 4;
  return usage;
}

void ExpectUsage(const Json& usage) {
  EXPECT_EQ(usage["prompt_tokens"], 10);
  EXPECT_EQ(usage["completion_tokens"], 5);
  EXPECT_EQ(usage["total_tokens"], 15);
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], 4);
}

// ---- errors ----

TEST(HttpStatusFor, MapsEveryCode) {
  EXPECT_EQ(HttpStatusFor(StatusCode::kOk), 200);
  EXPECT_EQ(HttpStatusFor(StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusFor(StatusCode::kOutOfRange), 400);
  EXPECT_EQ(HttpStatusFor(StatusCode::kNotFound), 404);
  EXPECT_EQ(HttpStatusFor(StatusCode::kUnauthenticated), 401);
  EXPECT_EQ(HttpStatusFor(StatusCode::kResourceExhausted), 429);
  EXPECT_EQ(HttpStatusFor(StatusCode::kCancelled), 499);
  EXPECT_EQ(HttpStatusFor(StatusCode::kUnavailable), 503);
  EXPECT_EQ(HttpStatusFor(StatusCode::kDeadlineExceeded), 504);
  for (const StatusCode code :
       {StatusCode::kFailedPrecondition, StatusCode::kDataLoss, StatusCode::kUnimplemented,
        StatusCode::kInternal, StatusCode::kIoError}) {
    EXPECT_EQ(HttpStatusFor(code), 500) << StatusCodeName(code);
  }
}

TEST(ErrorJson, HasOpenAIsShape) {
  const Json json = Parse(ErrorJson(InvalidArgument("'top_p' must be a number in (0, 1], got 0")));
  ASSERT_TRUE(json.contains("error"));
  const Json& error = json["error"];
  EXPECT_EQ(error["message"], "'top_p' must be a number in (0, 1], got 0");
  EXPECT_EQ(error["type"], "invalid_request_error");
  EXPECT_EQ(error["param"], "top_p");  // taken from the message
  EXPECT_EQ(error["code"], "invalid_argument");
  EXPECT_EQ(json.size(), 1u);
  EXPECT_EQ(error.size(), 4u);
}

TEST(ErrorJson, TypeCodeAndParamPerStatus) {
  struct Case {
    Status status;
    std::string param;
    std::string type;
    std::string code;
    Json expected_param;
  };
  const std::vector<Case> cases = {
      {InvalidArgument("'messages[1].role' must be one of ..."), "", "invalid_request_error",
       "invalid_argument", "messages[1].role"},
      {InvalidArgument("body is not valid JSON: ..."), "", "invalid_request_error",
       "invalid_argument", nullptr},
      {InvalidArgument("'not a param' at the start"), "", "invalid_request_error",
       "invalid_argument", nullptr},
      {InvalidArgument("whatever"), "temperature", "invalid_request_error", "invalid_argument",
       "temperature"},
      {OutOfRange("'prompt' holds 5000 tokens, more than the model's context length"), "",
       "invalid_request_error", "context_length_exceeded", "prompt"},
      {NotFound("model 'gpt-4' is not served here"), "model", "invalid_request_error",
       "model_not_found", "model"},
      {ResourceExhausted("overloaded: 1024 requests queued"), "", "rate_limit_exceeded",
       "rate_limit_exceeded", nullptr},
      {Cancelled("the client went away"), "", "invalid_request_error", "cancelled", nullptr},
      {Unavailable("no replica is live"), "", "server_error", "unavailable", nullptr},
      {DeadlineExceeded("'slo_ms' passed"), "", "server_error", "deadline_exceeded", nullptr},
      {Internal("bug"), "", "server_error", "internal", nullptr},
      {Unauthenticated("no API key given"), "", "invalid_request_error", "invalid_api_key", nullptr},
  };
  for (const Case& c : cases) {
    const Json error = Parse(ErrorJson(c.status, c.param))["error"];
    EXPECT_EQ(error["message"], c.status.message());
    EXPECT_EQ(error["type"], c.type) << c.status.ToString();
    EXPECT_EQ(error["code"], c.code) << c.status.ToString();
    EXPECT_EQ(error["param"], c.expected_param) << c.status.ToString();
  }
}

TEST(ErrorJson, AlwaysValidJson) {
  // A message quoting client bytes that are not UTF-8, with quotes and control characters.
  const Json error = Parse(ErrorJson(InvalidArgument("bad \"x\"\n\t\x01 \xFF\xC3 end")))["error"];
  EXPECT_THAT(error["message"].get<std::string>(), HasSubstr("bad \"x\"\n\t\x01"));
  EXPECT_THAT(error["message"].get<std::string>(), HasSubstr("\xEF\xBF\xBD"));  // U+FFFD
  // An OK status is a server bug, still reported as valid JSON.
  EXPECT_EQ(Parse(ErrorJson(Status::Ok()))["error"]["type"], "server_error");
  // Usable as a mid-stream event.
  EXPECT_EQ(ParseEvent(SseEvent(ErrorJson(Unavailable("replica lost"))))["error"]["message"],
            "replica lost");
}

// ---- non-streaming ----

TEST(RenderCompletion, HasOpenAIsFields) {
  ChoiceOutput output;
  output.text = "Hello \"world\"\n";
  output.finish_reason = proto::FinishReason::kLength;
  const Json json = Parse(RenderCompletion(Context(), output, SomeUsage()));
  EXPECT_EQ(json["id"], "cmpl-42");
  EXPECT_EQ(json["object"], "text_completion");
  EXPECT_EQ(json["created"], 1700000000);
  EXPECT_EQ(json["model"], "tiny-llama");
  ASSERT_EQ(json["choices"].size(), 1u);
  const Json& choice = json["choices"][0];
  EXPECT_EQ(choice["index"], 0);
  EXPECT_EQ(choice["text"], "Hello \"world\"\n");
  EXPECT_TRUE(choice["logprobs"].is_null());
  EXPECT_EQ(choice["finish_reason"], "length");
  ExpectUsage(json["usage"]);
}

TEST(RenderCompletion, LogprobsInTheLegacyShape) {
  ResponseContext context = Context();
  context.logprobs = true;
  ChoiceOutput output;
  output.text = "Hi caf\xC3\xA9!";
  output.logprobs = {
      {"Hi", -0.25f}, {" caf\xC3\xA9", -1.5f}, {"!", -std::numeric_limits<float>::infinity()}};
  output.finish_reason = proto::FinishReason::kStop;
  const Json logprobs =
      Parse(RenderCompletion(context, output, SomeUsage()))["choices"][0]["logprobs"];
  EXPECT_EQ(logprobs["tokens"], Json({"Hi", " caf\xC3\xA9", "!"}));
  EXPECT_EQ(logprobs["token_logprobs"], Json({-0.25, -1.5, -9999.0}));
  // Without alternatives asked for, each position lists the chosen token (OpenAI: "up to
  // logprobs+1 elements").
  EXPECT_EQ(logprobs["top_logprobs"],
            Json({Json{{"Hi", -0.25}}, Json{{" caf\xC3\xA9", -1.5}}, Json{{"!", -9999.0}}}));
  EXPECT_EQ(logprobs["text_offset"], Json({0, 2, 7}));  // characters, not bytes
}

// An echoed prompt's first token has no log-probability: null, and null alternatives; its
// text still counts in the offsets.
TEST(RenderCompletion, AnEchoedPromptsFirstTokenIsNull) {
  ResponseContext context = Context();
  context.logprobs = true;
  ChoiceOutput output;
  output.text = "Hi there";
  TokenLogprob first{"Hi", 0.0f};
  first.absent = true;
  output.logprobs = {first, {" there", -0.5f, {{" here", -1.0f}}}};
  const Json logprobs = Parse(RenderCompletion(context, output, SomeUsage()))["choices"][0]["logprobs"];
  EXPECT_EQ(logprobs["tokens"], Json({"Hi", " there"}));
  EXPECT_EQ(logprobs["token_logprobs"], Json({nullptr, -0.5}));
  EXPECT_EQ(logprobs["top_logprobs"], Json({nullptr, Json{{" there", -0.5}, {" here", -1.0}}}));
  EXPECT_EQ(logprobs["text_offset"], Json({0, 2}));
}

// vLLM's prompt_logprobs: in each completions choice, at the top of a chat response.
TEST(RenderCompletion, VllmsPromptLogprobs) {
  ResponseContext context = Context();
  context.prompt_logprobs = true;
  ChoiceOutput output;
  output.text = "x";
  PromptPositionLogprobs first;
  first.absent = true;
  PromptPositionLogprobs second;
  second.candidates = {{42, -0.5f, 2, " cat"}, {7, -std::numeric_limits<float>::infinity(), 1, "\xF0"}};
  output.prompt_logprobs = {first, second};
  const Json expected = Json::parse(R"([null, {"42": {"logprob": -0.5, "rank": 2, "decoded_token": " cat"},
                                               "7": {"logprob": -9999.0, "rank": 1, "decoded_token": "\ufffd"}}])");
  const Json choice = Parse(RenderCompletion(context, output, SomeUsage()))["choices"][0];
  EXPECT_EQ(choice["prompt_logprobs"], expected);
  const Json chat = Parse(RenderChatCompletion(context, output, SomeUsage()));
  EXPECT_EQ(chat["prompt_logprobs"], expected);
  EXPECT_FALSE(chat["choices"][0].contains("prompt_logprobs"));
  // Not asked: no such field.
  EXPECT_FALSE(Parse(RenderCompletion(Context(), output, SomeUsage()))["choices"][0].contains("prompt_logprobs"));
}

// vLLM's return_token_ids: "token_ids" in every choice; "prompt_token_ids" in each completions
// choice (null in a stream's later chunks), at the top of a chat response and of its role chunks.
TEST(RenderCompletion, VllmsReturnTokenIds) {
  ResponseContext context = Context();
  context.return_token_ids = true;
  ChoiceOutput output;
  output.text = "x y";
  output.token_ids = {7, 8};
  output.prompt_token_ids = std::vector<uint32_t>{1, 300, 301};
  const Json choice = Parse(RenderCompletion(context, output, SomeUsage()))["choices"][0];
  EXPECT_EQ(choice["token_ids"], Json({7, 8}));
  EXPECT_EQ(choice["prompt_token_ids"], Json({1, 300, 301}));
  const Json chat = Parse(RenderChatCompletion(context, output, SomeUsage()));
  EXPECT_EQ(chat["prompt_token_ids"], Json({1, 300, 301}));
  EXPECT_EQ(chat["choices"][0]["token_ids"], Json({7, 8}));
  EXPECT_FALSE(chat["choices"][0].contains("prompt_token_ids"));
  // Streamed: a later completions chunk has null; chat's role chunk carries the prompt's.
  ChoiceOutput later;
  later.text = "z";
  later.token_ids = {9};
  const Json chunk = ParseEvent(RenderCompletionChunk(context, later))["choices"][0];
  EXPECT_TRUE(chunk["prompt_token_ids"].is_null());
  EXPECT_EQ(chunk["token_ids"], Json({9}));
  const Json role = ParseEvent(RenderChatRoleChunk(context, 0, std::nullopt, std::vector<uint32_t>{1, 300}));
  EXPECT_EQ(role["prompt_token_ids"], Json({1, 300}));
  EXPECT_EQ(role["choices"][0]["token_ids"], Json::array());
  EXPECT_EQ(ParseEvent(RenderChatChunk(context, later))["choices"][0]["token_ids"], Json({9}));
  // Not asked: no such fields.
  const Json plain = Parse(RenderChatCompletion(Context(), output, SomeUsage()));
  EXPECT_FALSE(plain.contains("prompt_token_ids"));
  EXPECT_FALSE(plain["choices"][0].contains("token_ids"));
  EXPECT_FALSE(Parse(RenderCompletion(Context(), output, SomeUsage()))["choices"][0].contains("token_ids"));
  EXPECT_FALSE(ParseEvent(RenderChatRoleChunk(Context())).contains("prompt_token_ids"));
}

TEST(RenderCompletion, TopLogprobsListTheChosenTokenAndItsAlternatives) {
  ResponseContext context = Context();
  context.logprobs = true;
  ChoiceOutput output;
  output.text = "ab";
  // A sampled token need not be among the alternatives; a piece two ids share is listed once.
  output.logprobs = {{"a", -0.5f, {{"a", -0.5f, {}}, {"b", -1.0f, {}}}},
                     {"b", -3.0f, {{"c", -0.25f, {}}, {"c", -2.0f, {}}}}};
  const Json logprobs =
      Parse(RenderCompletion(context, output, SomeUsage()))["choices"][0]["logprobs"];
  EXPECT_EQ(logprobs["top_logprobs"],
            Json({Json{{"a", -0.5}, {"b", -1.0}}, Json{{"b", -3.0}, {"c", -0.25}}}));
}

TEST(RenderCompletion, PartialCharacterPiecesAreOneKeyNotDuplicateKeys) {
  // Byte-fallback tokens (a lone 0xE2, 0xC3, ...) all show as U+FFFD: written as they were, each
  // became "\uFFFD" only when the JSON was written, and the object held that key twice.
  ResponseContext context = Context();
  context.logprobs = true;
  ChoiceOutput output;
  output.text = "\xC3\xA9";
  output.logprobs = {{"\xC3", -0.5f, {{"\xE2", -1.0f, {}}, {"\xC3", -0.5f, {}}, {"x", -3.0f, {}}}},
                     {"\xA9", -0.25f, {}}};
  const std::string body = RenderCompletion(context, output, SomeUsage());
  const std::string replacement = "\"\xEF\xBF\xBD\"";
  size_t keys = 0;
  for (size_t at = body.find(replacement + ":"); at != std::string::npos; at = body.find(replacement + ":", at + 1)) {
    ++keys;
  }
  EXPECT_EQ(keys, 2u) << body;  // once in each position's object
  const Json logprobs = Parse(body)["choices"][0]["logprobs"];
  EXPECT_EQ(logprobs["tokens"], Json({"\xEF\xBF\xBD", "\xEF\xBF\xBD"}));
  // The chosen piece's entry is its own log-probability, found under the token as listed.
  EXPECT_EQ(logprobs["top_logprobs"][0], Json({{"\xEF\xBF\xBD", -0.5}, {"x", -3.0}}));
  // Offsets count the text's characters: the two pieces make one.
  EXPECT_EQ(logprobs["text_offset"], Json({0, 1}));
}

TEST(RenderChatCompletion, TopLogprobsAreEntriesWithBytes) {
  ResponseContext context = Context();
  context.logprobs = true;
  ChoiceOutput output;
  output.text = "a";
  output.logprobs = {{"a", -0.5f, {{"a", -0.5f, {}}, {"\xC3", -2.0f, {}}}}};
  const Json content =
      Parse(RenderChatCompletion(context, output, SomeUsage()))["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 1u);
  ASSERT_EQ(content[0]["top_logprobs"].size(), 2u);
  EXPECT_EQ(content[0]["top_logprobs"][0], Json({{"token", "a"}, {"logprob", -0.5}, {"bytes", {97}}}));
  EXPECT_EQ(content[0]["top_logprobs"][1]["bytes"], Json({0xC3}));
  EXPECT_EQ(content[0]["top_logprobs"][1]["logprob"], -2.0);
}

TEST(RenderChatCompletion, HasOpenAIsFields) {
  ChoiceOutput output;
  output.text = "I am fine.";
  output.finish_reason = proto::FinishReason::kStop;
  const Json json = Parse(RenderChatCompletion(Context(), output, SomeUsage()));
  EXPECT_EQ(json["id"], "chatcmpl-42");
  EXPECT_EQ(json["object"], "chat.completion");
  EXPECT_EQ(json["created"], 1700000000);
  EXPECT_EQ(json["model"], "tiny-llama");
  ASSERT_EQ(json["choices"].size(), 1u);
  const Json& choice = json["choices"][0];
  EXPECT_EQ(choice["index"], 0);
  EXPECT_EQ(choice["message"], Json({{"role", "assistant"}, {"content", "I am fine."}}));
  EXPECT_TRUE(choice["logprobs"].is_null());
  EXPECT_EQ(choice["finish_reason"], "stop");
  ExpectUsage(json["usage"]);
}

// Under a reasoning parser the message carries the reasoning under vLLM's name and its older
// one, null when the answer had none; without one, neither field.
TEST(RenderChatCompletion, ReasoningApartFromContent) {
  ResponseContext context = Context();
  context.reasoning = true;
  ChoiceOutput output;
  output.reasoning = "2+2 is 4.";
  output.text = "\n\nFour.";
  const Json message = Parse(RenderChatCompletion(context, output, SomeUsage()))["choices"][0]["message"];
  EXPECT_EQ(message, Json({{"role", "assistant"},
                           {"content", "\n\nFour."},
                           {"reasoning", "2+2 is 4."},
                           {"reasoning_content", "2+2 is 4."}}));
  output.reasoning.clear();
  const Json none = Parse(RenderChatCompletion(context, output, SomeUsage()))["choices"][0]["message"];
  EXPECT_TRUE(none["reasoning"].is_null());
  EXPECT_TRUE(none["reasoning_content"].is_null());
  context.reasoning = false;
  output.reasoning = "dropped";
  const Json off = Parse(RenderChatCompletion(context, output, SomeUsage()))["choices"][0]["message"];
  EXPECT_FALSE(off.contains("reasoning"));
  EXPECT_FALSE(off.contains("reasoning_content"));
}

// Tool calls: whole in a message (content null when there is none, finish "tool_calls"), in
// pieces in deltas (the first with id, type and name, the later ones arguments only).
TEST(RenderChatCompletion, ToolCalls) {
  ChoiceOutput output;
  output.finish_reason = proto::FinishReason::kStop;
  output.tool_calls = {{0, "call_a", "get_weather", R"({"city": "Oslo"})"}, {1, "call_b", "get_time", "{}"}};
  output.tool_calls_finish = true;
  const Json choice = Parse(RenderChatCompletion(Context(), output, SomeUsage()))["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"],
            Json::parse(R"({"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}},
                {"id": "call_b", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}]})"));
  // Content beside the calls; a named function's call finishes as "stop"; a cut one as "length".
  output.text = "Checking.";
  output.tool_calls_finish = false;
  const Json named = Parse(RenderChatCompletion(Context(), output, SomeUsage()))["choices"][0];
  EXPECT_EQ(named["message"]["content"], "Checking.");
  EXPECT_EQ(named["finish_reason"], "stop");
  output.tool_calls_finish = true;
  output.finish_reason = proto::FinishReason::kLength;
  EXPECT_EQ(Parse(RenderChatCompletion(Context(), output, SomeUsage()))["choices"][0]["finish_reason"], "length");
  // No calls: no tool_calls key, content a string as before.
  ChoiceOutput plain;
  const Json message = Parse(RenderChatCompletion(Context(), plain, SomeUsage()))["choices"][0]["message"];
  EXPECT_FALSE(message.contains("tool_calls"));
  EXPECT_EQ(message["content"], "");
}

TEST(RenderChatChunk, ToolCallDeltas) {
  ChoiceOutput first;
  first.tool_calls = {{0, "call_a", "get_weather", R"({"ci)"}};
  EXPECT_EQ(ParseEvent(RenderChatChunk(Context(), first))["choices"][0]["delta"],
            Json::parse(R"({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                                            "function": {"name": "get_weather", "arguments": "{\"ci"}}]})"));
  ChoiceOutput more;
  more.tool_calls = {{0, "", "", R"(ty": 1})"}};
  EXPECT_EQ(ParseEvent(RenderChatChunk(Context(), more))["choices"][0]["delta"],
            Json::parse(R"({"tool_calls": [{"index": 0, "function": {"arguments": "ty\": 1}"}}]})"));
  ChoiceOutput last;
  last.finish_reason = proto::FinishReason::kStop;
  last.tool_calls_finish = true;
  const Json choice = ParseEvent(RenderChatChunk(Context(), last))["choices"][0];
  EXPECT_EQ(choice["delta"], Json::object());
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
}

TEST(RenderChatChunk, ReasoningDeltas) {
  ResponseContext context = Context();
  context.reasoning = true;
  ChoiceOutput thinking;
  thinking.reasoning = "Hmm";
  EXPECT_EQ(ParseEvent(RenderChatChunk(context, thinking))["choices"][0]["delta"],
            Json({{"reasoning", "Hmm"}, {"reasoning_content", "Hmm"}}));
  ChoiceOutput both;  // the block closes inside the chunk
  both.reasoning = ".";
  both.text = "Yes";
  EXPECT_EQ(ParseEvent(RenderChatChunk(context, both))["choices"][0]["delta"],
            Json({{"reasoning", "."}, {"reasoning_content", "."}, {"content", "Yes"}}));
  ChoiceOutput last;  // cut while thinking: the held-back end with the finish
  last.reasoning = "</th";
  last.finish_reason = proto::FinishReason::kLength;
  const Json finish = ParseEvent(RenderChatChunk(context, last));
  EXPECT_EQ(finish["choices"][0]["delta"], Json({{"reasoning", "</th"}, {"reasoning_content", "</th"}}));
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "length");
  ChoiceOutput held;  // everything held back: a content delta, empty, as without a parser
  EXPECT_EQ(ParseEvent(RenderChatChunk(context, held))["choices"][0]["delta"], Json({{"content", ""}}));
  ChoiceOutput only_finishes;
  only_finishes.finish_reason = proto::FinishReason::kStop;
  EXPECT_EQ(ParseEvent(RenderChatChunk(context, only_finishes))["choices"][0]["delta"], Json::object());
}

TEST(RenderChatCompletion, LogprobsKeepExactBytesOfPartialCharacters) {
  ResponseContext context = Context();
  context.logprobs = true;
  ChoiceOutput output;
  // "é" split over two byte-fallback tokens: each token alone is not UTF-8.
  output.text = "\xC3\xA9";
  output.logprobs = {{"\xC3", -0.5f}, {"\xA9", std::nanf("")}};
  const Json json = Parse(RenderChatCompletion(context, output, SomeUsage()));
  EXPECT_EQ(json["choices"][0]["message"]["content"], "\xC3\xA9");
  const Json& content = json["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0]["token"], "\xEF\xBF\xBD");  // U+FFFD stands in for the partial byte
  EXPECT_EQ(content[0]["logprob"], -0.5);
  EXPECT_EQ(content[0]["bytes"], Json({0xC3}));
  EXPECT_EQ(content[0]["top_logprobs"], Json::array());
  EXPECT_EQ(content[1]["bytes"], Json({0xA9}));
  EXPECT_EQ(content[1]["logprob"], -9999.0);  // NaN has no JSON form
}

TEST(RenderChatCompletion, FinishReasons) {
  const std::vector<std::pair<proto::FinishReason, Json>> cases = {
      {proto::FinishReason::kNone, nullptr},    {proto::FinishReason::kStop, "stop"},
      {proto::FinishReason::kLength, "length"}, {proto::FinishReason::kCancelled, "cancelled"},
      {proto::FinishReason::kError, "error"},
  };
  for (const auto& [reason, expected] : cases) {
    ChoiceOutput output;
    output.finish_reason = reason;
    EXPECT_EQ(Parse(RenderChatCompletion(Context(), output, {}))["choices"][0]["finish_reason"],
              expected);
    EXPECT_EQ(Parse(RenderCompletion(Context(), output, {}))["choices"][0]["finish_reason"],
              expected);
  }
}

TEST(RenderCompletion, InvalidUtf8TextStillRendersValidJson) {
  ChoiceOutput output;
  output.text = std::string("ok \xE2\x82", 5) + std::string(1, '\0') + "\x7F";
  const Json json = Parse(RenderCompletion(Context(), output, {}));
  EXPECT_THAT(json["choices"][0]["text"].get<std::string>(), StartsWith("ok \xEF\xBF\xBD"));
  const Json chat = Parse(RenderChatCompletion(Context(), output, {}));
  EXPECT_THAT(chat["choices"][0]["message"]["content"].get<std::string>(), StartsWith("ok "));
}

// vLLM's stop_reason: the stop string or stop token id behind a "stop" finish, else null.
TEST(RenderCompletion, StopReason) {
  ChoiceOutput output;
  output.finish_reason = proto::FinishReason::kStop;
  EXPECT_TRUE(Parse(RenderCompletion(Context(), output, {}))["choices"][0]["stop_reason"].is_null());
  output.stop_string = "\n\n";
  EXPECT_EQ(Parse(RenderCompletion(Context(), output, {}))["choices"][0]["stop_reason"], "\n\n");
  EXPECT_EQ(Parse(RenderChatCompletion(Context(), output, {}))["choices"][0]["stop_reason"], "\n\n");
  EXPECT_EQ(ParseEvent(RenderChatChunk(Context(), output))["choices"][0]["stop_reason"], "\n\n");
  output.stop_string.clear();
  output.stop_token_id = 13;
  EXPECT_EQ(Parse(RenderCompletion(Context(), output, {}))["choices"][0]["stop_reason"], 13);
  EXPECT_EQ(ParseEvent(RenderCompletionChunk(Context(), output))["choices"][0]["stop_reason"], 13);
  output.finish_reason = proto::FinishReason::kLength;  // only a stop has one
  EXPECT_TRUE(Parse(RenderCompletion(Context(), output, {}))["choices"][0]["stop_reason"].is_null());
}

// n choices: one entry each, in the order given, each with its own index, text and finish.
TEST(RenderCompletion, SeveralChoices) {
  std::vector<ChoiceOutput> outputs(3);
  for (uint32_t i = 0; i < 3; ++i) {
    outputs[i].index = i;
    outputs[i].text = "choice " + std::to_string(i);
    outputs[i].finish_reason = i == 1 ? proto::FinishReason::kStop : proto::FinishReason::kLength;
  }
  const Json completion = Parse(RenderCompletion(Context(), outputs, SomeUsage()));
  ASSERT_EQ(completion["choices"].size(), 3u);
  const Json chat = Parse(RenderChatCompletion(Context(), outputs, SomeUsage()));
  ASSERT_EQ(chat["choices"].size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(completion["choices"][i]["index"], i);
    EXPECT_EQ(completion["choices"][i]["text"], "choice " + std::to_string(i));
    EXPECT_EQ(completion["choices"][i]["finish_reason"], i == 1 ? "stop" : "length");
    EXPECT_EQ(chat["choices"][i]["index"], i);
    EXPECT_EQ(chat["choices"][i]["message"]["content"], "choice " + std::to_string(i));
  }
  ExpectUsage(completion["usage"]);
  ExpectUsage(chat["usage"]);
}

TEST(RenderChatChunk, ChunksOfOtherChoicesCarryTheirIndex) {
  ChoiceOutput piece;
  piece.index = 2;
  piece.text = "x";
  EXPECT_EQ(ParseEvent(RenderChatRoleChunk(Context(), 2))["choices"][0]["index"], 2);
  EXPECT_EQ(ParseEvent(RenderChatChunk(Context(), piece))["choices"][0]["index"], 2);
  EXPECT_EQ(ParseEvent(RenderCompletionChunk(Context(), piece))["choices"][0]["index"], 2);
}

// ---- streaming ----

TEST(SseDone, IsTheDoneSentinel) { EXPECT_EQ(SseDone(), "data: [DONE]\n\n"); }

TEST(SseKeepAlive, IsACommentLineThatEndsAnEmptyEvent) {
  // A comment line starts with ':'; the blank line after it makes it a whole (empty) event,
  // which clients drop without dispatching anything.
  EXPECT_EQ(SseKeepAlive(), ": keep-alive\n\n");
}

TEST(SseEvent, FramesOneDataLine) { EXPECT_EQ(SseEvent("{\"a\":1}"), "data: {\"a\":1}\n\n"); }

TEST(RenderChatChunk, AStreamInOrder) {
  const ResponseContext context = Context();
  const Json role = ParseEvent(RenderChatRoleChunk(context));
  EXPECT_EQ(role["id"], "chatcmpl-42");
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_EQ(role["created"], 1700000000);
  EXPECT_EQ(role["model"], "tiny-llama");
  EXPECT_FALSE(role.contains("usage"));
  ASSERT_EQ(role["choices"].size(), 1u);
  EXPECT_EQ(role["choices"][0]["index"], 0);
  EXPECT_EQ(role["choices"][0]["delta"], Json({{"role", "assistant"}, {"content", ""}}));
  EXPECT_TRUE(role["choices"][0]["finish_reason"].is_null());

  ChoiceOutput piece;
  piece.text = "Hel\nlo";
  const Json content = ParseEvent(RenderChatChunk(context, piece));
  EXPECT_EQ(content["id"], "chatcmpl-42");
  EXPECT_EQ(content["choices"][0]["delta"], Json({{"content", "Hel\nlo"}}));
  EXPECT_TRUE(content["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(content["choices"][0]["logprobs"].is_null());

  ChoiceOutput last;
  last.finish_reason = proto::FinishReason::kStop;
  const Json finish = ParseEvent(RenderChatChunk(context, last));
  EXPECT_EQ(finish["choices"][0]["delta"], Json::object());
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "stop");

  // The last piece of text may come with the finish reason.
  ChoiceOutput text_and_finish;
  text_and_finish.text = "!";
  text_and_finish.finish_reason = proto::FinishReason::kLength;
  const Json both = ParseEvent(RenderChatChunk(context, text_and_finish));
  EXPECT_EQ(both["choices"][0]["delta"], Json({{"content", "!"}}));
  EXPECT_EQ(both["choices"][0]["finish_reason"], "length");
}

TEST(RenderChatChunk, IncludeUsageAddsNullUsageThenAUsageChunk) {
  ResponseContext context = Context();
  context.include_usage = true;
  EXPECT_TRUE(ParseEvent(RenderChatRoleChunk(context))["usage"].is_null());
  ASSERT_TRUE(ParseEvent(RenderChatRoleChunk(context)).contains("usage"));
  ChoiceOutput piece;
  piece.text = "x";
  EXPECT_TRUE(ParseEvent(RenderChatChunk(context, piece))["usage"].is_null());

  const Json usage = ParseEvent(RenderChatUsageChunk(context, SomeUsage()));
  EXPECT_EQ(usage["id"], "chatcmpl-42");
  EXPECT_EQ(usage["object"], "chat.completion.chunk");
  EXPECT_EQ(usage["choices"], Json::array());
  ExpectUsage(usage["usage"]);
}

// continuous_usage_stats: each chunk carries its choice's usage so far, counts only (what was
// cached is known at the end, in the usage chunk).
TEST(RenderChatChunk, UsageSoFarReplacesTheNullUsage) {
  ResponseContext context = Context();
  context.include_usage = true;
  context.continuous_usage = true;
  proto::Usage before_any;
  before_any.prompt_tokens = 7;
  EXPECT_EQ(ParseEvent(RenderChatRoleChunk(context, 1, before_any))["usage"],
            Json({{"prompt_tokens", 7}, {"completion_tokens", 0}, {"total_tokens", 7}}));
  ChoiceOutput piece;
  piece.text = "x";
  piece.usage_so_far = proto::Usage{};
  piece.usage_so_far->prompt_tokens = 7;
  piece.usage_so_far->completion_tokens = 3;
  const Json usage = Json({{"prompt_tokens", 7}, {"completion_tokens", 3}, {"total_tokens", 10}});
  EXPECT_EQ(ParseEvent(RenderChatChunk(context, piece))["usage"], usage);
  EXPECT_EQ(ParseEvent(RenderCompletionChunk(context, piece))["usage"], usage);
  piece.usage_so_far.reset();
  EXPECT_TRUE(ParseEvent(RenderChatChunk(context, piece))["usage"].is_null());
}

// return_tokens_as_token_ids: every token and alternative is named by id, also two ids whose
// pieces are alike; chat's bytes and completions' text offsets still follow the text.
TEST(RenderCompletion, TokensAsIds) {
  ResponseContext context = Context();
  context.logprobs = true;
  context.tokens_as_ids = true;
  ChoiceOutput out;
  out.text = "ab";
  out.logprobs = {{"a", -0.5f, {{"a", -0.5f, {}, 7}, {"a", -1.5f, {}, 9}}, 7}, {"b", -0.25f, {}, 8}};
  const Json completion = Json::parse(RenderCompletion(context, out, SomeUsage()))["choices"][0]["logprobs"];
  EXPECT_EQ(completion["tokens"], Json({"token_id:7", "token_id:8"}));
  EXPECT_EQ(completion["top_logprobs"][0],
            Json({{"token_id:7", -0.5}, {"token_id:9", -1.5}}));
  EXPECT_EQ(completion["text_offset"], Json({0, 1}));
  const Json chat = Json::parse(RenderChatCompletion(context, out, SomeUsage()))["choices"][0]["logprobs"];
  EXPECT_EQ(chat["content"][0]["token"], "token_id:7");
  EXPECT_EQ(chat["content"][0]["bytes"], Json({97}));
  EXPECT_EQ(chat["content"][0]["top_logprobs"][1]["token"], "token_id:9");
  EXPECT_EQ(chat["content"][1]["token"], "token_id:8");
  context.tokens_as_ids = false;
  EXPECT_EQ(Json::parse(RenderChatCompletion(context, out, SomeUsage()))["choices"][0]["logprobs"]["content"][0]["token"],
            "a");
}

TEST(RenderChatChunk, LogprobsPerChunk) {
  ResponseContext context = Context();
  context.logprobs = true;
  ChoiceOutput piece;
  piece.text = "ab";
  piece.logprobs = {{"a", -0.1f}, {"b", -0.2f}};
  const Json logprobs = ParseEvent(RenderChatChunk(context, piece))["choices"][0]["logprobs"];
  ASSERT_EQ(logprobs["content"].size(), 2u);
  EXPECT_EQ(logprobs["content"][1]["token"], "b");
  EXPECT_NEAR(logprobs["content"][1]["logprob"].get<double>(), -0.2, 1e-6);
}

TEST(RenderCompletionChunk, TextChunksAndUsage) {
  ResponseContext context = Context();
  context.include_usage = true;
  context.logprobs = true;
  ChoiceOutput piece;
  piece.text = "\xC3\xA9t\xC3\xA9";
  piece.logprobs = {{"\xC3\xA9t", -1.0f}, {"\xC3\xA9", -2.0f}};
  piece.text_offset = 10;  // characters streamed before
  const Json chunk = ParseEvent(RenderCompletionChunk(context, piece));
  EXPECT_EQ(chunk["id"], "cmpl-42");
  EXPECT_EQ(chunk["object"], "text_completion");
  EXPECT_TRUE(chunk["usage"].is_null());
  const Json& choice = chunk["choices"][0];
  EXPECT_EQ(choice["text"], "\xC3\xA9t\xC3\xA9");
  EXPECT_TRUE(choice["finish_reason"].is_null());
  EXPECT_EQ(choice["logprobs"]["text_offset"], Json({10, 12}));

  ChoiceOutput last;
  last.finish_reason = proto::FinishReason::kStop;
  const Json finish = ParseEvent(RenderCompletionChunk(context, last));
  EXPECT_EQ(finish["choices"][0]["text"], "");
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "stop");

  const Json usage = ParseEvent(RenderCompletionUsageChunk(context, SomeUsage()));
  EXPECT_EQ(usage["object"], "text_completion");
  EXPECT_EQ(usage["choices"], Json::array());
  ExpectUsage(usage["usage"]);
}

TEST(RenderCompletionChunk, PartialCharactersStayValidJson) {
  ChoiceOutput piece;
  piece.text = "\xF0\x9F";  // half an emoji
  const Json chunk = ParseEvent(RenderCompletionChunk(Context(), piece));
  EXPECT_TRUE(chunk["choices"][0]["text"].is_string());
}

// ---- /v1/models ----

TEST(RenderModels, ListsEveryModel) {
  const std::vector<ModelCard> models = {{"tiny-llama", 1700000000, 4096}, {"other", 5, 128}};
  const Json json = Parse(RenderModels(models));
  EXPECT_EQ(json["object"], "list");
  ASSERT_EQ(json["data"].size(), 2u);
  EXPECT_EQ(json["data"][0], Json({{"id", "tiny-llama"},
                                   {"object", "model"},
                                   {"created", 1700000000},
                                   {"owned_by", "bmad"},
                                   {"max_model_len", 4096}}));
  EXPECT_EQ(json["data"][1]["id"], "other");
  EXPECT_EQ(Parse(RenderModels({}))["data"], Json::array());
}

}  // namespace
}  // namespace bmad::http
