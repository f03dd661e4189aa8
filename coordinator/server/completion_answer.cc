#include "coordinator/server/completion_answer.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/http_connection.h"
#include "coordinator/http/openai_response.h"
#include "coordinator/http/reasoning_split.h"
#include "coordinator/http/response_choices.h"
#include "coordinator/server/coordinator_core.h"

namespace bmad::coord {
namespace {

using namespace std::chrono_literals;

size_t CodePoints(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace

void SendHttpError(httplib::Response& res, const Status& s, uint32_t retry_after_ms) {
  res.status = http::HttpStatusFor(s.code());
  if (retry_after_ms > 0) {
    res.set_header("Retry-After", std::to_string(std::max<uint32_t>(1, (retry_after_ms + 999) / 1000)));
  }
  res.set_content(http::ErrorJson(s), "application/json");
}

void AnswerWhole(AcceptedCompletion accepted, const http::ResponseContext& ctx, bool chat,
                               HttpConnection& client, const tokenizer::Tokenizer& tok,
                               httplib::Response& res) {
  http::ResponseChoices choices(std::move(accepted.request_ids), accepted.choices_per_prompt);
  std::vector<http::ChoiceOutput> outputs(choices.size());
  const PromptScoring& scoring = accepted.scoring;
  std::vector<proto::TokenChunk> scored(scoring.prompt_ids.empty() ? 0 : choices.size());  // prompt_* fields
  for (uint32_t i = 0; i < outputs.size(); ++i) {
    outputs[i].index = i;
    outputs[i].text = EchoTextOf(accepted.echo_texts, accepted.choices_per_prompt, i);
    if (ctx.return_token_ids) {
      outputs[i].prompt_token_ids = PromptTokenIdsOf(accepted.prompt_token_ids, accepted.choices_per_prompt, i);
    }
  }
  auto next_check = std::chrono::steady_clock::now() + kClientCheckInterval;
  while (!choices.all_finished()) {
    std::optional<StreamEvent> e = accepted.stream->Pop(kClientCheckInterval);
    // Tokens may come without pause for minutes: check on a clock, not only when idle.
    if (std::chrono::steady_clock::now() >= next_check) {
      next_check = std::chrono::steady_clock::now() + kClientCheckInterval;
      if (client.Gone()) return accepted.abandon();
    }
    if (!e) continue;
    if (e->kind == StreamEvent::Kind::kError) {
      accepted.abandon();  // the other choices, if any, are of no use without this one
      SendHttpError(res, e->status);
      return;
    }
    const std::optional<uint32_t> index = choices.IndexOf(e->chunk.request_id);
    if (e->kind != StreamEvent::Kind::kChunk || !index) continue;
    http::ChoiceOutput part = ChoiceFromChunk(e->chunk, tok, ctx.logprobs, 0,
                                              StartsText(accepted.starts_text, accepted.choices_per_prompt, *index));
    http::ChoiceOutput& all = outputs[*index];
    if (!scored.empty()) proto::AppendPromptLogprobs(scored[*index], e->chunk);
    if (!scoring.echo_only) {  // else the one token generated is left out
      all.text += part.text;
      all.logprobs.insert(all.logprobs.end(), part.logprobs.begin(), part.logprobs.end());
      if (ctx.return_token_ids) {
        all.token_ids.insert(all.token_ids.end(), e->chunk.token_ids.begin(), e->chunk.token_ids.end());
      }
    }
    if (e->chunk.finish_reason != proto::FinishReason::kNone) {
      all.finish_reason = e->chunk.finish_reason;
      all.stop_string = part.stop_string;
      all.stop_token_id = part.stop_token_id;
      proto::Usage usage = e->chunk.usage;
      if (scoring.echo_only) usage.completion_tokens = 0;
      choices.Finish(*index, usage);
    }
  }
  // The prompt's log-probabilities, once every position has come.
  AddPromptLogprobs(scoring, accepted.choices_per_prompt, scored, tok, outputs);
  if (accepted.reasoning_start || accepted.tool_format) {
    for (http::ChoiceOutput& output : outputs) {
      // Chat's echo (the final message's content) is content, before the answer.
      const size_t echoed = EchoTextOf(accepted.echo_texts, accepted.choices_per_prompt, output.index).size();
      std::string content = output.text.substr(echoed);
      output.text.resize(echoed);
      if (accepted.reasoning_start) {
        http::ReasoningSplit::Parts parts = http::ReasoningSplit::Whole(*accepted.reasoning_start, content);
        content = std::move(parts.content);
        if (accepted.include_reasoning) output.reasoning = std::move(parts.reasoning);
      }
      if (accepted.tool_format) {
        http::ToolCallSplit::Parts parts = http::ToolCallSplit::Whole(*accepted.tool_format, content,
                                                                      accepted.tool_function, accepted.parallel_tool_calls);
        content = std::move(parts.content);
        output.tool_calls = std::move(parts.calls);
        output.tool_calls_finish = *accepted.tool_format != http::ToolCallFormat::kFunction && !output.tool_calls.empty();
      }
      output.text += content;
    }
  }
  res.set_content(chat ? http::RenderChatCompletion(ctx, outputs, choices.usage())
                       : http::RenderCompletion(ctx, outputs, choices.usage()),
                  "application/json");
}

void AnswerStreaming(AcceptedCompletion accepted, const http::ResponseContext& ctx, bool chat,
                                   std::shared_ptr<HttpConnection> client, const tokenizer::Tokenizer& tok,
                                   std::chrono::milliseconds keepalive, httplib::Response& res) {
  // SSE events as chunks come (each choice's role chunk first, for chat), then the usage chunk
  // (if asked) and [DONE] once every choice has finished. httplib calls the provider again and
  // again from this handler's thread until it says done or fails: the state lives outside it.
  // A request that fails before anything is sent gets its own HTTP status (503 when the
  // coordinator stops, what a replica's refusal says, a queue timeout shorter than the
  // keep-alive interval), as one refused at the door does: clients and SDKs act on the status
  // (retry on 429 and 503), which an error event inside a 200 stream hides. So the headers wait
  // for the first event, but no longer than the first keep-alive is due (and not at all without
  // keep-alives): a request queued longer then streams comments, and a failure after that is an
  // event.
  const auto accepted_at = std::chrono::steady_clock::now();
  std::optional<StreamEvent> first;
  while (!first && keepalive.count() > 0) {
    const auto due = accepted_at + keepalive - std::chrono::steady_clock::now();
    if (due <= std::chrono::steady_clock::duration::zero()) break;
    const std::chrono::milliseconds wait =
        std::min<std::chrono::milliseconds>(kClientCheckInterval, std::chrono::ceil<std::chrono::milliseconds>(due));
    first = accepted.stream->Pop(wait);
    if (first && first->kind == StreamEvent::Kind::kError) {
      accepted.abandon();  // the other choices, if any
      SendHttpError(res, first->status, first->retry_after_ms);
      return;
    }
    if (!first && client->Gone()) return accepted.abandon();
  }
  res.set_header("Cache-Control", "no-cache");
  struct StreamState {
    StreamState(AcceptedCompletion& accepted)
        : choices(std::move(accepted.request_ids), accepted.choices_per_prompt),
          token_chars(choices.size(), 0),
          prompt_tokens(std::move(accepted.prompt_tokens)),
          generated_tokens(choices.size(), 0),
          starts_text(std::move(accepted.starts_text)),
          echo_texts(std::move(accepted.echo_texts)),
          echoed(choices.size(), false),
          prompt_ids_sent(choices.size(), false),
          echo_only(accepted.scoring.echo_only),
          per_prompt(accepted.choices_per_prompt),
          prompt_token_ids(std::move(accepted.prompt_token_ids)),
          include_reasoning(accepted.include_reasoning) {
      if (accepted.reasoning_start) splits.assign(choices.size(), http::ReasoningSplit(*accepted.reasoning_start));
      if (accepted.tool_format) {
        calls_finish = *accepted.tool_format != http::ToolCallFormat::kFunction;
        tool_splits.assign(choices.size(), http::ToolCallSplit(*accepted.tool_format, accepted.tool_function,
                                                               accepted.parallel_tool_calls));
      }
    }
    // Choice i's usage so far, for continuous_usage_stats.
    proto::Usage UsageSoFar(uint32_t i) const {
      proto::Usage usage;
      usage.prompt_tokens = i < prompt_tokens.size() ? prompt_tokens[i] : 0;
      usage.completion_tokens = generated_tokens[i];
      return usage;
    }
    http::ResponseChoices choices;
    // Per choice, where the next token's logprobs.text_offset starts: the characters of the
    // tokens already reported, counted as the whole response counts them (a stop string may
    // hold text back for a while, or cut it, without moving the tokens' offsets).
    std::vector<size_t> token_chars;
    std::vector<uint32_t> prompt_tokens;     // per choice, AcceptedCompletion's
    std::vector<uint32_t> generated_tokens;  // per choice, in the chunks read so far
    std::vector<bool> starts_text;           // AcceptedCompletion's
    std::vector<std::string> echo_texts;     // AcceptedCompletion's
    std::vector<bool> echoed;                // per choice: its echo text has been sent
    std::vector<bool> prompt_ids_sent;       // per choice: its prompt_token_ids went out (completions)
    bool echo_only;                          // max_tokens 0 with echo: generated output left out
    uint32_t per_prompt;
    std::vector<std::vector<uint32_t>> prompt_token_ids;  // AcceptedCompletion's
    std::optional<std::vector<uint32_t>> PromptTokenIdsOfChoice(uint32_t i) const {
      return PromptTokenIdsOf(prompt_token_ids, per_prompt, i);
    }
    std::vector<http::ReasoningSplit> splits;  // per choice, under a reasoning parser; else empty
    bool include_reasoning = true;             // AcceptedCompletion's
    std::vector<http::ToolCallSplit> tool_splits;  // per choice, when tool calls are read; else empty
    bool calls_finish = false;  // an answer with calls finishes as "tool_calls" (not a named function's)
    bool roles_sent = false;
    std::chrono::steady_clock::time_point last_write;
    std::optional<StreamEvent> pending;  // read before the headers went out
  };
  auto state = std::make_shared<StreamState>(accepted);
  state->pending = std::move(first);
  state->last_write = accepted_at;  // nothing yet: a keep-alive is due once the wait above ran out
  res.set_chunked_content_provider(
      "text/event-stream",
      [stream = accepted.stream, abandon = accepted.abandon, client, ctx, chat, state, keepalive, &tok](
          size_t, httplib::DataSink& sink) {
        auto write = [&](const std::string& s) {
          state->last_write = std::chrono::steady_clock::now();
          return sink.write(s.data(), s.size());
        };
        auto give_up = [&] {
          abandon();
          return false;
        };
        if (chat && !state->roles_sent) {
          state->roles_sent = true;
          for (uint32_t i = 0; i < state->choices.size(); ++i) {
            const std::optional<proto::Usage> usage =
                ctx.continuous_usage ? std::optional(state->UsageSoFar(i)) : std::nullopt;
            if (!write(http::RenderChatRoleChunk(ctx, i, usage, state->PromptTokenIdsOfChoice(i)))) return give_up();
          }
          // Chat's echo (vLLM's): each choice's content starts with the final message's.
          for (uint32_t i = 0; i < state->choices.size(); ++i) {
            http::ChoiceOutput echo;
            echo.index = i;
            echo.text = EchoTextOf(state->echo_texts, state->per_prompt, i);
            if (ctx.continuous_usage) echo.usage_so_far = state->UsageSoFar(i);
            if (!echo.text.empty() && !write(http::RenderChatChunk(ctx, echo))) return give_up();
          }
        }
        // While nothing comes (queued, or a long prefill), a keep-alive comment now and then:
        // a proxy's idle timeout would otherwise cut a stream that is only waiting its turn.
        auto wait = [&]() -> std::chrono::milliseconds {
          if (keepalive.count() == 0) return kClientCheckInterval;
          const auto due = state->last_write + keepalive - std::chrono::steady_clock::now();
          return std::clamp<std::chrono::milliseconds>(std::chrono::ceil<std::chrono::milliseconds>(due), 1ms,
                                                       kClientCheckInterval);
        };
        std::optional<StreamEvent> e = std::move(state->pending);
        state->pending.reset();
        while (!e && !(e = stream->Pop(wait()))) {
          if (client->Gone()) return give_up();
          if (keepalive.count() > 0 && std::chrono::steady_clock::now() - state->last_write >= keepalive &&
              !write(http::SseKeepAlive())) {
            return give_up();
          }
        }
        if (e->kind == StreamEvent::Kind::kError) {
          abandon();  // the other choices, if any
          write(http::SseEvent(http::ErrorJson(e->status)));
          write(http::SseDone());
          sink.done();
          return true;
        }
        const std::optional<uint32_t> index = state->choices.IndexOf(e->chunk.request_id);
        if (e->kind != StreamEvent::Kind::kChunk || !index) return true;
        http::ChoiceOutput out =
            ChoiceFromChunk(e->chunk, tok, ctx.logprobs, state->token_chars[*index],
                            StartsText(state->starts_text, state->per_prompt, *index));
        out.index = *index;
        if (state->echo_only) {  // the one token generated is left out, and not counted
          out.text.clear();
          out.logprobs.clear();
          e->chunk.token_ids.clear();
          e->chunk.usage.completion_tokens = 0;
        }
        if (!chat && !state->echoed[*index]) {  // completions' echo: the prompt's text, first
          state->echoed[*index] = true;
          out.text = EchoTextOf(state->echo_texts, state->per_prompt, *index) + out.text;
        }
        if (ctx.return_token_ids) {
          out.token_ids = e->chunk.token_ids;
          if (!chat && !state->prompt_ids_sent[*index]) {  // completions: the choice's first chunk
            state->prompt_ids_sent[*index] = true;
            out.prompt_token_ids = state->PromptTokenIdsOfChoice(*index);
          }
        }
        if (!state->splits.empty()) {  // the chunk's text as reasoning and content
          http::ReasoningSplit::Parts parts = state->splits[*index].Add(out.text);
          if (out.finish_reason != proto::FinishReason::kNone) {
            http::ReasoningSplit::Parts rest = state->splits[*index].Finish();
            parts.reasoning += rest.reasoning;
            parts.content += rest.content;
          }
          out.text = std::move(parts.content);
          if (state->include_reasoning) out.reasoning = std::move(parts.reasoning);
        }
        if (!state->tool_splits.empty()) {  // the content's text as content and tool calls
          http::ToolCallSplit& split = state->tool_splits[*index];
          http::ToolCallSplit::Parts parts = split.Add(out.text);
          if (out.finish_reason != proto::FinishReason::kNone) {
            http::ToolCallSplit::Parts rest = split.Finish();
            parts.content += rest.content;
            parts.calls.insert(parts.calls.end(), rest.calls.begin(), rest.calls.end());
            out.tool_calls_finish = split.called() && state->calls_finish;
          }
          out.text = std::move(parts.content);
          out.tool_calls = std::move(parts.calls);
        }
        for (const http::TokenLogprob& t : out.logprobs) state->token_chars[*index] += CodePoints(t.token);
        state->generated_tokens[*index] += static_cast<uint32_t>(e->chunk.token_ids.size());
        // The replica's count is the one the final usage adds up.
        if (e->chunk.finish_reason != proto::FinishReason::kNone) {
          state->generated_tokens[*index] = e->chunk.usage.completion_tokens;
        }
        if (ctx.continuous_usage) out.usage_so_far = state->UsageSoFar(*index);
        // With return_token_ids a chunk of tokens whose text is held back (a stop string may
        // begin there) goes out too: its ids would be lost otherwise.
        if (!out.text.empty() || !out.reasoning.empty() || !out.tool_calls.empty() ||
            out.finish_reason != proto::FinishReason::kNone ||
            !out.logprobs.empty() ||
            !out.token_ids.empty() || out.prompt_token_ids) {
          const std::string event = chat ? http::RenderChatChunk(ctx, out) : http::RenderCompletionChunk(ctx, out);
          if (!write(event)) return give_up();
        }
        if (e->chunk.finish_reason != proto::FinishReason::kNone) {
          state->choices.Finish(*index, e->chunk.usage);
          if (state->choices.all_finished()) {
            if (ctx.include_usage) {
              const proto::Usage usage = state->choices.usage();
              write(chat ? http::RenderChatUsageChunk(ctx, usage) : http::RenderCompletionUsageChunk(ctx, usage));
            }
            write(http::SseDone());
            sink.done();
          }
        }
        return true;
      });
}

}  // namespace bmad::coord
