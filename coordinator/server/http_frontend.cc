#include "coordinator/server/http_frontend.h"

#include <sys/socket.h>

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>
#include <random>

#include "common/clock.h"
#include "common/http_body_guard.h"
#include "common/http_connection.h"
#include "common/log.h"
#include "common/metrics/registry.h"
#include "common/version.h"
#include "coordinator/http/chat_template.h"
#include "coordinator/http/openai_request.h"
#include "coordinator/http/openai_response.h"
#include "coordinator/http/reasoning_split.h"
#include "coordinator/http/response_choices.h"
#include "coordinator/http/tokenize_api.h"
#include "coordinator/server/api_keys.h"
#include "coordinator/server/choice_output.h"
#include "coordinator/server/completion_answer.h"
#include "coordinator/server/coordinator_core.h"
#include "coordinator/server/elastic_thread_pool.h"

namespace bmad::coord {
namespace {

using namespace std::chrono_literals;

// How long a handler waits for the event loop to accept or refuse a request.
constexpr auto kAcceptTimeout = 30s;
constexpr int kListenBacklog = 4096;

// Every id of `tokens` (the request's field `field`) is in the model's vocabulary.
Status CheckInVocabulary(const std::vector<uint32_t>& tokens, const std::string& field,
                         const tokenizer::Tokenizer& tok) {
  const auto vocab = static_cast<uint32_t>(tok.vocab_size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] >= vocab) {
      return InvalidArgument("'" + field + "[" + std::to_string(i) + "]' is " + std::to_string(tokens[i]) +
                             ", outside the vocabulary (0.." + std::to_string(vocab - 1) + ")");
    }
  }
  return Status::Ok();
}

// The id after "cmpl-" / "chatcmpl-": unique across coordinator restarts (the request ids
// restart at 1), and ending with the coordinator's request id, which its logs name.
std::string ResponseId(uint64_t request_id) {
  static const uint64_t salt = [] {
    std::random_device device;
    return (uint64_t{device()} << 32) ^ device();
  }();
  uint64_t z = salt + request_id * 0x9E3779B97F4A7C15ull;  // SplitMix64's finaliser
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(z));
  return std::string(hex) + "-" + std::to_string(request_id);
}

// The id of the one token whose text is `text`, or -1 when the vocabulary has none.
int32_t SingleTokenId(const tokenizer::Tokenizer& tok, std::string_view text) {
  const std::vector<int32_t> ids = tok.Encode(text, /*add_special=*/false, /*parse_special=*/true);
  return ids.size() == 1 && tok.TokenPiece(ids[0]) == text ? ids[0] : -1;
}

}  // namespace

HttpFrontend::HttpFrontend(CoordinatorServer::Core& core)
    : core_(core),
      think_start_token_(SingleTokenId(core.tokenizer(), "<think>")),
      think_end_token_(SingleTokenId(core.tokenizer(), "</think>")) {}

HttpFrontend::~HttpFrontend() { listener_.Stop(); }

Status HttpFrontend::Start(const std::string& host, int port) {
  server_ = std::make_unique<httplib::Server>();
  // A connection holds a thread for its whole life (a streaming request for minutes): threads
  // start as connections need them, up to coordinator.http_max_connections.
  const auto max_connections = static_cast<size_t>(core_.config().coordinator.http_max_connections);
  server_->new_task_queue = [max_connections] { return new ElasticThreadPool(max_connections); };
  // httplib's default SO_REUSEPORT would let a second server share the port silently. The
  // callback also hands us the listening socket, whose backlog we raise after the bind.
  auto listen_fd = std::make_shared<int>(-1);
  server_->set_socket_options([listen_fd](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    *listen_fd = sock;
  });
  started_unix_s_ = UnixMillis() / 1000;
  // API keys (coordinator.api_keys_file): every API route checks one first, once its body is read
  // (up to the body limit). Not before: a 401 with the body left unread would leave it on the
  // kept-alive connection, to be parsed as the next request. Probes, /metrics, CORS
  // preflights and the 404/405 answers need none (vLLM's --api-key guards /v1 only).
  auto guarded = [this](std::function<void(const httplib::Request&, httplib::Response&)> handler) {
    return [this, handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
      if (Authorized(req, res)) handler(req, res);
    };
  };
  // Bodies: the routes that take one read it themselves, at most max_body_bytes once unchunked
  // and decoded; every other route refuses a body it could not bound (common/http_body_guard.h).
  const size_t max_body_bytes = Limits().max_body_bytes;
  // CORS (coordinator.http_cors_origin): every answer to a request naming an Origin (errors
  // included) says which origin may read it; the body guard's own answers as well.
  const std::string cors_origin = core_.config().coordinator.http_cors_origin;
  std::function<void(const httplib::Request&, httplib::Response&)> add_cors;
  if (!cors_origin.empty()) {
    add_cors = [cors_origin](const httplib::Request& req, httplib::Response& res) {
      if (!req.has_header("Origin")) return;
      res.set_header("Access-Control-Allow-Origin", cors_origin);
      if (cors_origin != "*") res.set_header("Vary", "Origin");
    };
  }
  http_body::BodyPolicy body_policy;
  body_policy.max_bytes = max_body_bytes;
  body_policy.capped_route = [](const httplib::Request& req) {
    return req.method == "POST" && (req.path == "/v1/completions" || req.path == "/v1/chat/completions" ||
                                     req.path == "/tokenize" || req.path == "/detokenize");
  };
  body_policy.write_error = [](httplib::Response& res, int status, const std::string& message) {
    res.status = status;
    res.set_content(http::HttpErrorJson(status, message), "application/json");
  };
  body_policy.finish_answer = add_cors;
  http_body::Guard(*server_, body_policy);
  auto with_body = [body_policy](std::function<void(const httplib::Request&, httplib::Response&)> handler) {
    return [body_policy, handler = std::move(handler)](const httplib::Request& req, httplib::Response& res,
                                                       const httplib::ContentReader& reader) {
      std::optional<std::string> body = http_body::ReadCapped(req, res, reader, body_policy);
      if (!body) return;
      httplib::Request with_body = req;
      with_body.body = std::move(*body);
      handler(with_body, res);
    };
  };
  // The process answers, and its event loop turns (a wedged loop answers nothing else).
  const auto health = [this](const httplib::Request&, httplib::Response& res) {
    if (!core_.LoopTurning()) {
      SendHttpError(res, Unavailable("the coordinator's event loop has not turned for " +
                                 std::to_string(core_.loop_stall_limit_ms()) + " ms"));
      return;
    }
    res.set_content("{\"status\":\"ok\"}", "application/json");
  };
  server_->Get("/health", health);
  // vLLM's /ping (SageMaker's health check, GET or POST): as /health.
  const auto ping = health;
  server_->Get("/ping", ping);
  server_->Post("/ping", ping);
  // vLLM's /version: the build that serves (no key needed, as /health). CMake's project version
  // is digits and dots: nothing to escape.
  server_->Get("/version", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("{\"version\":\"" + std::string(Version()) + "\"}", "application/json");
  });
  server_->Get("/ready", [this](const httplib::Request&, httplib::Response& res) {
    const size_t live = core_.live_replicas();
    if (core_.stopping()) {
      SendHttpError(res, Unavailable("the coordinator is shutting down"));
      return;
    }
    if (live == 0) {
      SendHttpError(res, Unavailable("no live replica yet"));
      return;
    }
    if (!core_.LoopTurning()) {
      SendHttpError(res, Unavailable("the coordinator's event loop has not turned for " +
                                 std::to_string(core_.loop_stall_limit_ms()) + " ms"));
      return;
    }
    res.set_content("{\"status\":\"ready\",\"live_replicas\":" + std::to_string(live) + "}",
                    "application/json");
  });
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(core_.registry().RenderText(), metrics::kTextContentType);
  });
  server_->Get("/v1/models", guarded([this](const httplib::Request&, httplib::Response& res) { HandleModels(res); }));
  server_->Get(R"(/v1/models/(.+))", guarded([this](const httplib::Request& req, httplib::Response& res) {
                 HandleModel(req.matches[1], res);
               }));
  server_->Post("/tokenize", with_body(guarded([this](const httplib::Request& req, httplib::Response& res) {
                  HandleTokenize(req, res);
                })));
  server_->Post("/detokenize", with_body(guarded([this](const httplib::Request& req, httplib::Response& res) {
                  HandleDetokenize(req, res);
                })));
  server_->Post("/v1/completions", with_body(guarded([this](const httplib::Request& req, httplib::Response& res) {
                  HandleCompletion(req, res, /*chat=*/false);
                })));
  server_->Post("/v1/chat/completions", with_body(guarded([this](const httplib::Request& req, httplib::Response& res) {
                  HandleCompletion(req, res, /*chat=*/true);
                })));
  // The right path with the wrong method: 405 naming the ones it takes (HEAD comes with GET).
  // OPTIONS too, unless CORS answers it below for every path.
  const bool cors = !cors_origin.empty();
  for (const auto& [path, allowed] : {std::pair<const char*, const char*>{"/v1/completions", "POST"},
                                      {"/v1/chat/completions", "POST"},
                                      {"/tokenize", "POST"},
                                      {"/detokenize", "POST"},
                                      {"/v1/models", "GET, HEAD"},
                                      {R"(/v1/models/(.+))", "GET, HEAD"},
                                      {"/health", "GET, HEAD"},
                                      {"/version", "GET, HEAD"},
                                      {"/ping", "GET, POST, HEAD"},
                                      {"/ready", "GET, HEAD"},
                                      {"/metrics", "GET, HEAD"}}) {
    const std::string allow = allowed;  // a copy: clang before 16 cannot capture a structured binding
    auto not_allowed = [allow](const httplib::Request& req, httplib::Response& res) {
      res.status = 405;
      res.set_header("Allow", allow);
      res.set_content(http::RouteErrorJson(req.method, req.path), "application/json");
    };
    if (std::string_view(allowed).find("GET") == std::string_view::npos) server_->Get(path, not_allowed);
    if (std::string_view(allowed).find("POST") == std::string_view::npos) server_->Post(path, not_allowed);
    server_->Put(path, not_allowed);
    server_->Patch(path, not_allowed);
    server_->Delete(path, not_allowed);
    if (!cors) server_->Options(path, not_allowed);
  }
  // CORS: browser pages of that origin may call the API. Every path answers a preflight
  // OPTIONS, and every answer carries add_cors's headers.
  if (cors) {
    server_->Options(R"(.*)", [](const httplib::Request& req, httplib::Response& res) {
      res.status = 204;
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      const std::string asked = req.get_header_value("Access-Control-Request-Headers");
      res.set_header("Access-Control-Allow-Headers", asked.empty() ? "Authorization, Content-Type" : asked);
      res.set_header("Access-Control-Max-Age", "600");
    });
    server_->set_post_routing_handler(add_cors);
  }
  // httplib calls this for every 4xx/5xx response, ours included: only fill in bodies it made
  // (an unknown path, a malformed request, a body over the limit), so that every error a
  // client gets is OpenAI's JSON error object.
  server_->set_error_handler([max_body_bytes](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404) {
      res.set_content(http::RouteErrorJson(req.method, req.path), "application/json");
      return;
    }
    // httplib caps a body as a form when its Content-Type starts so (a charset may follow), and
    // caps every body at max_body_bytes: only a form body under that is over the form cap. (The
    // routes that take a body read it themselves, uncapped as a form.)
    const bool form = req.get_header_value("Content-Type").starts_with("application/x-www-form-urlencoded") &&
                      req.get_header_value<uint64_t>("Content-Length") <= max_body_bytes;
    res.set_content(http::TransportErrorJson(res.status, form, CPPHTTPLIB_FORM_URL_ENCODED_PAYLOAD_MAX_LENGTH,
                                             max_body_bytes),
                    "application/json");
  });
  // httplib's default closes a connection after 5 requests; clients that keep one open (every
  // OpenAI SDK) would reconnect that often.
  server_->set_keep_alive_max_count(10000);
  server_->set_keep_alive_timeout((core_.config().coordinator.http_keep_alive_timeout_ms + 999) / 1000);
  port_ = port == 0 ? server_->bind_to_any_port(host) : (server_->bind_to_port(host, port) ? port : -1);
  if (port_ <= 0) {
    return IoError("cannot serve HTTP on " + host + ":" + std::to_string(port) +
                   " (address in use or not available)");
  }
  // Debian's compiled httplib listens with a backlog of 5, which drops connections when a few
  // hundred clients connect at once; listen() again raises it.
  if (*listen_fd >= 0) ::listen(*listen_fd, kListenBacklog);
  listener_.Start(*server_);
  return Status::Ok();
}

void HttpFrontend::HandleModels(httplib::Response& res) {
  const http::ModelCard card{core_.model_name(), started_unix_s_,
                             static_cast<uint32_t>(core_.served_context_length())};
  res.set_content(http::RenderModels(std::span(&card, 1)), "application/json");
}

void HttpFrontend::HandleModel(const std::string& id, httplib::Response& res) {
  if (RefuseOtherModel(id, res)) return;
  const http::ModelCard card{core_.model_name(), started_unix_s_,
                             static_cast<uint32_t>(core_.served_context_length())};
  res.set_content(http::RenderModel(card), "application/json");
}

Result<std::vector<std::vector<uint32_t>>> HttpFrontend::PromptTokens(http::CompletionRequest& cr,
                                                                      bool add_special,
                                                                      bool refuse_oversized_text,
                                                                      bool* opens_reasoning) const {
  // Tokenized here, on the request's own thread: in the event loop a long prompt (megabytes
  // take seconds) would stall every other request's tokens meanwhile. A text too long for the
  // context is refused before it is tokenized, unless it is to be cut to fit.
  if (cr.truncate_prompt_tokens) refuse_oversized_text = false;
  auto encode = [&](const std::string& text) -> Result<std::vector<uint32_t>> {
    if (refuse_oversized_text) BMAD_RETURN_IF_ERROR(core_.CheckPromptTextMayFit(text.size()));
    const std::vector<int32_t> ids = core_.tokenizer().Encode(text, add_special);
    return std::vector<uint32_t>(ids.begin(), ids.end());
  };
  std::vector<std::vector<uint32_t>> prompts;
  if (cr.chat) {
    http::ChatPromptOptions options;
    options.add_generation_prompt = cr.add_generation_prompt;
    options.continue_final_message = cr.continue_final_message;
    options.enable_thinking = cr.enable_thinking;
    options.tools = cr.tools.rendered;
    BMAD_ASSIGN_OR_RETURN(const http::ChatPrompt chat, http::RenderChatPrompt(core_.chat_format(), cr.messages, options));
    if (opens_reasoning != nullptr) *opens_reasoning = http::PromptOpensReasoning(chat, cr.continue_final_message);
    if (refuse_oversized_text) BMAD_RETURN_IF_ERROR(core_.CheckPromptTextMayFit(chat.text.size()));
    // The template's special tokens are parsed, the messages' are text: a message cannot open
    // a turn of another role by spelling its marker.
    std::vector<tokenizer::Tokenizer::TextSpan> literal;
    literal.reserve(chat.client_spans.size());
    for (const http::ChatPrompt::Span& span : chat.client_spans) literal.push_back({span.begin, span.length});
    const std::vector<int32_t> ids = core_.tokenizer().EncodeWithLiteralSpans(chat.text, add_special, literal);
    prompts.emplace_back(ids.begin(), ids.end());
    TruncatePrompts(cr.truncate_prompt_tokens, prompts);
    return prompts;
  }
  for (size_t i = 0; i < cr.prompts.size(); ++i) {
    http::CompletionPrompt& p = cr.prompts[i];
    if (p.is_tokens) {
      prompts.push_back(std::move(p.tokens));
      continue;
    }
    BMAD_ASSIGN_OR_RETURN(std::vector<uint32_t> tokens, encode(p.text));
    if (tokens.empty()) {  // "" without the BOS
      const std::string name = cr.prompts.size() > 1 ? "prompt[" + std::to_string(i) + "]" : "prompt";
      return InvalidArgument("'" + name + "' holds no tokens: an empty text is a prompt only with "
                             "the BOS token, which add_special_tokens false (or a model without "
                             "one) leaves out");
    }
    prompts.push_back(std::move(tokens));
  }
  TruncatePrompts(cr.truncate_prompt_tokens, prompts);
  return prompts;
}

Result<std::vector<std::vector<uint32_t>>> HttpFrontend::BadWordSequences(const std::vector<std::string>& words) const {
  std::vector<std::vector<uint32_t>> sequences;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string word = words[i].substr(words[i].find_first_not_of(" \t\n\r"));  // not only whitespace
    // The word at the start of the output and after a space: tokenizers that mark a word's
    // leading space in its first token (byte-level BPE's "Ġword") tokenize the two apart.
    for (const std::string& text : {word, " " + word}) {
      const std::vector<int32_t> ids = core_.tokenizer().Encode(text, /*add_special=*/false);
      if (ids.empty()) continue;
      if (ids.size() > sampling::kMaxBadWordTokens) {
        return InvalidArgument("'bad_words[" + std::to_string(i) + "]' is " + std::to_string(ids.size()) +
                               " tokens; at most " + std::to_string(sampling::kMaxBadWordTokens) + " are allowed");
      }
      std::vector<uint32_t> sequence(ids.begin(), ids.end());
      if (std::find(sequences.begin(), sequences.end(), sequence) == sequences.end()) {
        sequences.push_back(std::move(sequence));
      }
    }
  }
  return sequences;
}

void HttpFrontend::TruncatePrompts(std::optional<int64_t> keep, std::vector<std::vector<uint32_t>>& prompts) const {
  if (!keep) return;
  // -1: the context length the cluster serves now (a request's max_tokens still has to fit).
  const size_t last = *keep < 0 ? static_cast<size_t>(core_.served_context_length()) : static_cast<size_t>(*keep);
  for (std::vector<uint32_t>& prompt : prompts) {
    if (prompt.size() > last) prompt.erase(prompt.begin(), prompt.end() - static_cast<std::ptrdiff_t>(last));
  }
}

bool HttpFrontend::Authorized(const httplib::Request& req, httplib::Response& res) {
  ApiKeys* keys = core_.api_keys();
  if (keys == nullptr) return true;
  const std::string authorization = req.get_header_value("Authorization");
  const std::string_view key = ApiKeys::BearerToken(authorization);
  if (keys->Accepts(key)) return true;
  // Counted among the cluster's requests only where a request to the cluster was asked for, as
  // the same call with a key would be counted.
  if (req.path == "/v1/completions" || req.path == "/v1/chat/completions") {
    core_.CountUnauthenticatedHttp();
  } else {
    core_.CountUnauthenticatedOther();
  }
  SendHttpError(res, Unauthenticated(key.empty() ? "this server wants an API key: send 'Authorization: Bearer KEY'"
                                             : "the API key is not one this server accepts"));
  res.set_header("WWW-Authenticate", "Bearer");  // RFC 6750
  return false;
}

bool HttpFrontend::RefuseOtherModel(const std::string& model, httplib::Response& res) const {
  if (model.empty() || model == core_.model_name()) return false;
  SendHttpError(res, NotFound("model '" + model + "' does not exist; this cluster serves '" +
                          core_.model_name() + "'"));
  return true;
}

void HttpFrontend::HandleTokenize(const httplib::Request& req, httplib::Response& res) {
  Result<http::TokenizeRequest> parsed = http::ParseTokenizeRequest(req.body, Limits());
  if (!parsed.ok()) {
    SendHttpError(res, parsed.status());
    return;
  }
  if (RefuseOtherModel(parsed->prompt.model, res)) return;
  // A chat prompt always starts with the BOS, as the chat endpoint bills it (its templates do
  // not write one): add_special_tokens counts for completions bodies only, as there.
  Result<std::vector<std::vector<uint32_t>>> prompts =
      PromptTokens(parsed->prompt, parsed->prompt.chat || parsed->add_special_tokens,
                   /*refuse_oversized_text=*/false);
  if (!prompts.ok()) {
    SendHttpError(res, prompts.status());
    return;
  }
  const std::vector<uint32_t>& tokens = prompts->front();  // one prompt (ParseTokenizeRequest)
  // Token ids given as the prompt are checked as /v1/completions and /detokenize check them.
  if (Status s = CheckInVocabulary(tokens, "prompt", core_.tokenizer()); !s.ok()) {
    SendHttpError(res, s);
    return;
  }
  std::vector<std::string> pieces;
  if (parsed->return_token_strs) {
    // The vocabulary's own strings, as vLLM's (Hugging Face's convert_ids_to_tokens): "▁Once",
    // "<0xF0>", which map back to ids; decoded text would show a character's bytes as U+FFFD.
    const std::vector<std::string>& texts = core_.tokenizer().vocabulary().texts;
    for (uint32_t t : tokens) pieces.push_back(texts[t]);
  }
  res.set_content(http::RenderTokenize(tokens, static_cast<uint32_t>(core_.served_context_length()),
                                       parsed->return_token_strs ? &pieces : nullptr),
                  "application/json");
}

void HttpFrontend::HandleDetokenize(const httplib::Request& req, httplib::Response& res) {
  Result<http::DetokenizeRequest> parsed = http::ParseDetokenizeRequest(req.body, Limits());
  if (!parsed.ok()) {
    SendHttpError(res, parsed.status());
    return;
  }
  if (RefuseOtherModel(parsed->model, res)) return;
  if (Status s = CheckInVocabulary(parsed->tokens, "tokens", core_.tokenizer()); !s.ok()) {
    SendHttpError(res, s);
    return;
  }
  const std::vector<int32_t> ids(parsed->tokens.begin(), parsed->tokens.end());
  res.set_content(http::RenderDetokenize(core_.tokenizer().Decode(ids)), "application/json");
}

http::RequestLimits HttpFrontend::Limits() const {
  http::RequestLimits limits;
  limits.max_model_len = static_cast<uint32_t>(core_.served_context_length());
  limits.priority_classes = static_cast<int32_t>(core_.config().coordinator.priority_classes);
  return limits;
}

void HttpFrontend::HandleCompletion(const httplib::Request& req, httplib::Response& res, bool chat) {
  const int64_t received_ns = SystemClock::Instance().NowNanos();  // before parsing and tokenizing
  Result<http::CompletionRequest> parsed = http::ParseCompletionRequest(req.body, chat, Limits());
  if (!parsed.ok()) {
    core_.CountRefusedHttp(parsed.status());
    SendHttpError(res, parsed.status());
    return;
  }
  http::CompletionRequest& cr = *parsed;
  Result<std::optional<http::ToolCallFormat>> tool_format = ToolCallFormatFor(cr.tools);
  if (!tool_format.ok()) {
    core_.CountRefusedHttp(tool_format.status(), cr.n);
    SendHttpError(res, tool_format.status());
    return;
  }
  bool opens_reasoning = false;
  Result<std::vector<std::vector<uint32_t>>> prompts = PromptTokens(
      cr, /*add_special=*/cr.chat || cr.add_special_tokens, /*refuse_oversized_text=*/true, &opens_reasoning);
  if (!prompts.ok()) {
    // Each choice of each prompt is a request in the metrics, as the loop counts a batch.
    core_.CountRefusedHttp(prompts.status(),
                           cr.n * static_cast<uint32_t>(std::max<size_t>(1, cr.prompts.size())));
    SendHttpError(res, prompts.status());
    return;
  }
  Result<std::vector<std::vector<uint32_t>>> bad_words = BadWordSequences(cr.bad_words);
  if (!bad_words.ok()) {
    core_.CountRefusedHttp(bad_words.status(), cr.n * static_cast<uint32_t>(std::max<size_t>(1, prompts->size())));
    SendHttpError(res, bad_words.status());
    return;
  }
  cr.sampling.bad_words = std::move(*bad_words);
  std::vector<bool> starts_text;
  if (cr.sampling.logprobs) {
    for (const std::vector<uint32_t>& prompt : *prompts) {
      const std::vector<int32_t> ids(prompt.begin(), prompt.end());
      starts_text.push_back(core_.tokenizer().Decode(ids).empty());
    }
  }
  std::vector<std::string> echo_texts = EchoTexts(cr, *prompts, core_.tokenizer());
  std::vector<std::vector<uint32_t>> prompt_token_ids;
  if (cr.return_token_ids) prompt_token_ids = *prompts;  // as the model sees them (cut, with BOS)
  PromptScoring scoring;
  scoring.echo_logprobs = cr.echo_logprobs;
  scoring.echo_only = cr.echo_only;
  scoring.echo_alternatives = cr.top_logprobs;
  scoring.vllm_alternatives = cr.vllm_prompt_logprobs;
  if (cr.echo_logprobs || cr.vllm_prompt_logprobs >= 0) scoring.prompt_ids = *prompts;
  const bool reasoning_parser = chat && !core_.config().model.reasoning_parser.empty();
  std::optional<http::ReasoningStart> reasoning_start;
  if (reasoning_parser) {
    // vLLM's deepseek_r1 parser takes every answer to start inside the block, except where the
    // request turned the template's thinking off (its prompt then holds an empty block): a
    // constrained answer would wait for a block's end that never comes.
    const bool thinking_off = core_.chat_format().thinking_switch && cr.enable_thinking == false;
    const bool opens =
        opens_reasoning || (!thinking_off && core_.config().model.reasoning_parser == "deepseek_r1");
    reasoning_start = ReasoningStartFor(opens, !thinking_off, cr.sampling);
  }
  std::vector<SubmitInput> inputs;
  for (std::vector<uint32_t>& prompt : *prompts) {
    SubmitInput& in = inputs.emplace_back();
    in.model = cr.model;
    in.prompt_is_tokens = true;
    in.prompt_tokens = std::move(prompt);
    in.sampling = cr.sampling;
    in.max_tokens_given = cr.max_tokens.has_value();
    in.priority = cr.priority.value_or(core_.config().coordinator.DefaultPriority());
    in.slo_ms = cr.slo_ms;
    in.stream = cr.stream;
    in.choices = cr.n;
    in.received_ns = received_ns;
  }
  std::optional<AcceptedCompletion> accepted = Submit(std::move(inputs), cr.n, res);
  if (!accepted) return;
  accepted->starts_text = std::move(starts_text);
  accepted->echo_texts = std::move(echo_texts);
  accepted->scoring = std::move(scoring);
  accepted->prompt_token_ids = std::move(prompt_token_ids);
  accepted->reasoning_start = reasoning_start;
  accepted->include_reasoning = cr.include_reasoning;
  accepted->tool_format = *tool_format;
  accepted->tool_function = cr.tools.function;
  accepted->parallel_tool_calls = cr.tools.parallel_calls;
  http::ResponseContext ctx;
  ctx.request_id = ResponseId(accepted->request_ids.front());
  ctx.created_unix_s = UnixMillis() / 1000;
  ctx.model = core_.model_name();
  ctx.logprobs = cr.sampling.logprobs;
  ctx.include_usage = cr.stream && cr.include_usage;
  ctx.continuous_usage = ctx.include_usage && cr.continuous_usage;
  ctx.tokens_as_ids = cr.return_tokens_as_token_ids;
  ctx.prompt_logprobs = cr.vllm_prompt_logprobs >= 0;
  ctx.return_token_ids = cr.return_token_ids;
  ctx.reasoning = reasoning_parser;
  auto client = std::make_shared<HttpConnection>(req.local_addr, req.local_port, req.remote_addr,
                                                   req.remote_port);
  if (cr.stream) {
    AnswerStreaming(std::move(*accepted), ctx, chat, std::move(client), core_.tokenizer(),
                    std::chrono::milliseconds(core_.config().coordinator.sse_keepalive_ms), res);
  } else {
    AnswerWhole(std::move(*accepted), ctx, chat, *client, core_.tokenizer(), res);
  }
}

Result<std::optional<http::ToolCallFormat>> HttpFrontend::ToolCallFormatFor(const http::RequestTools& tools) const {
  switch (tools.choice) {
    case http::ToolChoice::kNone: return std::optional<http::ToolCallFormat>();
    case http::ToolChoice::kRequired: return std::optional(http::ToolCallFormat::kRequired);
    case http::ToolChoice::kFunction: return std::optional(http::ToolCallFormat::kFunction);
    case http::ToolChoice::kAuto: break;
  }
  if (core_.config().model.tool_call_parser.empty()) {
    return InvalidArgument("'tool_choice' \"auto\" (the default when 'tools' are given) needs a tool call "
                           "parser, and this server has none (model.tool_call_parser); send tool_choice "
                           "\"none\", \"required\" or a named function");
  }
  return std::optional(core_.config().model.tool_call_parser == "llama3_json" ? http::ToolCallFormat::kLlama3Json
                                                                             : http::ToolCallFormat::kHermes);
}

std::optional<http::ReasoningStart> HttpFrontend::ReasoningStartFor(bool opens, bool may_open,
                                                                    proto::SamplingParams& sampling) const {
  if (sampling.response_format == proto::ResponseFormat::kText) {
    return opens ? http::ReasoningStart::kOpen : http::ReasoningStart::kMayOpen;
  }
  if (think_end_token_ < 0) return std::nullopt;
  if (opens) {
    sampling.reasoning_end_token = think_end_token_;
    return http::ReasoningStart::kOpen;
  }
  if (!may_open || think_start_token_ < 0) return std::nullopt;
  sampling.reasoning_end_token = think_end_token_;
  sampling.reasoning_start_token = think_start_token_;
  // The replica opens the block only for the marker as the first token: so does the split.
  return http::ReasoningStart::kMayOpenAtOnce;
}

std::optional<AcceptedCompletion> HttpFrontend::Submit(std::vector<SubmitInput> inputs,
                                                                     uint32_t choices_per_prompt,
                                                                     httplib::Response& res) {
  const size_t num_requests = inputs.size() * choices_per_prompt;
  AcceptedCompletion accepted;
  accepted.stream = std::make_shared<HttpStream>();
  accepted.choices_per_prompt = choices_per_prompt;
  core_.Post(InboxItem{InboxItem::Kind::kSubmit, std::move(inputs), accepted.stream});
  accepted.abandon = [this, stream = accepted.stream] {
    stream->MarkAbandoned();  // nobody is left to answer
    core_.Post(InboxItem{InboxItem::Kind::kAbandon, {}, stream});
  };
  // The loop accepts every prompt's n choices in one pass, before it reads any worker message:
  // their kAccepted events (in response order: prompt by prompt, choice by choice) come before
  // every chunk, or an error does.
  const auto give_up_at = std::chrono::steady_clock::now() + kAcceptTimeout;
  while (accepted.request_ids.size() < num_requests) {
    std::optional<StreamEvent> e = accepted.stream->Pop(kClientCheckInterval);
    // The loop's last look at its inbox may have answered (and counted) this submit just after
    // the wait above ended: one more look before taking it for unread.
    if (!e && core_.loop_done()) e = accepted.stream->Pop(std::chrono::milliseconds(0));
    if (!e && core_.loop_done()) {
      // Posted after the event loop's last look at its inbox: nobody will answer.
      core_.CountRefusedHttp(Unavailable("shutting down"), static_cast<uint32_t>(num_requests));
      SendHttpError(res, Unavailable("the coordinator is shutting down"));
      return std::nullopt;
    }
    if (!e && std::chrono::steady_clock::now() >= give_up_at) {
      accepted.abandon();
      SendHttpError(res, DeadlineExceeded("the coordinator did not answer in time"));
      return std::nullopt;
    }
    if (!e) continue;
    if (e->kind == StreamEvent::Kind::kError) {
      // All or none: any choice accepted before the error must not run on unseen.
      if (!accepted.request_ids.empty()) accepted.abandon();
      SendHttpError(res, e->status, e->retry_after_ms);
      return std::nullopt;
    }
    if (e->kind == StreamEvent::Kind::kAccepted) {
      accepted.request_ids.push_back(e->request_id);
      accepted.prompt_tokens.push_back(e->prompt_tokens);
    }
  }
  return accepted;
}

}  // namespace bmad::coord
