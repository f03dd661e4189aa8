// The OpenAI-compatible HTTP API (cpp-httplib): /v1/completions and /v1/chat/completions (plain
// and streaming SSE ending with [DONE], with usage), /v1/models and /v1/models/{id}, vLLM's
// /tokenize and /detokenize, /health, /ready, /metrics.
// Handler threads parse and validate the body (coordinator/http), hand the request to the event
// loop, and relay its events for as long as the request lives; a client that disconnects, while
// streaming or waiting for a whole answer, gets its request cancelled.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/http_listen_thread.h"
#include "common/status.h"
#include "coordinator/http/openai_request.h"
#include "coordinator/http/openai_response.h"
#include "coordinator/server/choice_output.h"
#include "coordinator/server/completion_answer.h"
#include "coordinator/server/coordinator_server.h"
#include "coordinator/server/submit_input.h"

// (httplib::Response, HttpConnection and the others AcceptedCompletion needs are declared in
// completion_answer.h.)
namespace httplib {
class Server;
class Request;
}  // namespace httplib

namespace bmad::coord {

class HttpFrontend {
 public:
  explicit HttpFrontend(CoordinatorServer::Core& core);
  ~HttpFrontend();  // stops the server and joins its threads

  // Binds host:port (0 picks a free port). kIoError naming the address when the bind fails.
  Status Start(const std::string& host, int port);
  int port() const { return port_; }

 private:
  void HandleCompletion(const httplib::Request& req, httplib::Response& res, bool chat);
  // Hands the prompts (each with `choices_per_prompt` choices) to the event loop and waits until
  // it accepts them all; when it refuses them or does not answer, answers `res` with the error
  // and returns nullopt.
  std::optional<AcceptedCompletion> Submit(std::vector<SubmitInput> inputs, uint32_t choices_per_prompt,
                                           httplib::Response& res);
  void HandleModels(httplib::Response& res);
  void HandleModel(const std::string& id, httplib::Response& res);
  void HandleTokenize(const httplib::Request& req, httplib::Response& res);
  void HandleDetokenize(const httplib::Request& req, httplib::Response& res);

  http::RequestLimits Limits() const;
  // The prompts' tokens as the completion endpoints send them to the cluster (one per prompt of
  // a completions batch; one for chat): a chat request's messages through the chat template,
  // text encoded (BOS first when `add_special`), token ids as given. Moves the prompts out of
  // `cr`. Errors: the chat template's; with `refuse_oversized_text`, a text too long in bytes
  // to fit the context in any tokenization (refused untokenized: the completion endpoints;
  // /tokenize counts whatever it is given). With truncate_prompt_tokens, each prompt is cut to
  // its last tokens and no text is refused for its length. `opens_reasoning`, when given: whether
  // a chat prompt leaves a reasoning block open for the model (http::PromptOpensReasoning).
  Result<std::vector<std::vector<uint32_t>>> PromptTokens(http::CompletionRequest& cr, bool add_special,
                                                          bool refuse_oversized_text,
                                                          bool* opens_reasoning = nullptr) const;
  // vLLM's bad_words as token sequences: each word (leading whitespace dropped) as it would be
  // tokenized at the start of the output and after a space, each distinct sequence once.
  // kInvalidArgument naming a word of more than sampling::kMaxBadWordTokens tokens.
  Result<std::vector<std::vector<uint32_t>>> BadWordSequences(const std::vector<std::string>& words) const;
  // How a chat answer's tool calls are read, as its tool_choice asks: none for "none", the
  // server's parser (model.tool_call_parser) for "auto", whose absence is kInvalidArgument.
  Result<std::optional<http::ToolCallFormat>> ToolCallFormatFor(const http::RequestTools& tools) const;
  // Under a reasoning parser (model.reasoning_parser), how a chat answer is split into reasoning
  // and content (nullopt: not at all, all content): `opens`, the block is open from the start
  // (the prompt opened it, or the deepseek_r1 parser assumes so); `may_open`, else the answer
  // may open it (not when the request turned a template's thinking off). An answer under an
  // output constraint is split only where the vocabulary has the block's markers as tokens:
  // `sampling` then gets the reasoning gate, and the replica formats what follows the block;
  // otherwise the constraint holds from the first token, all content.
  std::optional<http::ReasoningStart> ReasoningStartFor(bool opens, bool may_open,
                                                        proto::SamplingParams& sampling) const;
  // Keeps each prompt's last `keep` tokens (-1: the served context length); nullopt: all.
  void TruncatePrompts(std::optional<int64_t> keep, std::vector<std::vector<uint32_t>>& prompts) const;
  // Answers 404 model_not_found and returns true when `model` names another model than ours.
  bool RefuseOtherModel(const std::string& model, httplib::Response& res) const;
  // True when no key is asked for (coordinator.api_keys_file empty) or the request's bearer
  // token is one; otherwise answers 401 and returns false.
  bool Authorized(const httplib::Request& req, httplib::Response& res);

  CoordinatorServer::Core& core_;
  std::unique_ptr<httplib::Server> server_;
  HttpListenThread listener_;  // declared after the server: stopped before it is destroyed
  int port_ = 0;
  int64_t started_unix_s_ = 0;
  // The reasoning block's markers, "<think>" and "</think>", where each is one token; else -1.
  int32_t think_start_token_ = -1;
  int32_t think_end_token_ = -1;
};

}  // namespace bmad::coord
