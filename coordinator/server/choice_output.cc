#include "coordinator/server/choice_output.h"

#include <algorithm>

namespace bmad::coord {

uint32_t PromptOfChoice(uint32_t per_prompt, uint32_t choice) {
  return choice / std::max<uint32_t>(per_prompt, 1);
}

bool StartsText(const std::vector<bool>& starts_text, uint32_t per_prompt, uint32_t choice) {
  const uint32_t prompt = PromptOfChoice(per_prompt, choice);
  return prompt < starts_text.size() && starts_text[prompt];
}

http::ChoiceOutput ChoiceFromChunk(const proto::TokenChunk& chunk, const tokenizer::Tokenizer& tok,
                                   bool logprobs, size_t text_offset, bool starts_text) {
  http::ChoiceOutput out;
  out.text = chunk.text;
  out.finish_reason = chunk.finish_reason;
  out.stop_string = chunk.stop_string;
  out.stop_token_id = chunk.stop_token_id;
  out.text_offset = text_offset;
  if (logprobs) {
    // Each token's alternatives (top_logprobs), the same count for every token of the chunk.
    const size_t per_token = chunk.token_ids.empty() ? 0 : chunk.top_token_ids.size() / chunk.token_ids.size();
    for (size_t i = 0; i < chunk.token_ids.size() && i < chunk.logprobs.size(); ++i) {
      // The text's first token (and each alternative to it) as the text has it.
      const bool first = starts_text && chunk.token_offset == 0 && i == 0;
      const auto piece = [&](uint32_t id) {
        return first ? std::string(tok.SequenceStartPiece(static_cast<int32_t>(id)))
                     : tok.TokenPiece(static_cast<int32_t>(id));
      };
      http::TokenLogprob t{piece(chunk.token_ids[i]), chunk.logprobs[i], {}, chunk.token_ids[i]};
      for (size_t j = i * per_token; j < (i + 1) * per_token && j < chunk.top_logprobs.size(); ++j) {
        t.top.push_back({piece(chunk.top_token_ids[j]), chunk.top_logprobs[j], {}, chunk.top_token_ids[j]});
      }
      out.logprobs.push_back(std::move(t));
    }
  }
  return out;
}

std::vector<std::string> EchoTexts(const http::CompletionRequest& cr,
                                   const std::vector<std::vector<uint32_t>>& prompts,
                                   const tokenizer::Tokenizer& tok) {
  std::vector<std::string> texts;
  if (!cr.echo) return texts;
  if (cr.chat) {
    const bool answer_last = !cr.messages.empty() && cr.messages.back().role == http::ChatRole::kAssistant;
    texts.push_back(answer_last ? cr.messages.back().content : std::string());
    return texts;
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (i < cr.prompts.size() && !cr.prompts[i].is_tokens && !cr.truncate_prompt_tokens) {
      texts.push_back(cr.prompts[i].text);
      continue;
    }
    // Without the BOS, the first token's piece loses the space the vocabulary puts before a
    // text: the prompt's text as it was written, as Hugging Face decodes it for vLLM's echo
    // (Decode keeps the space after a BOS, as llama.cpp does).
    auto first = prompts[i].begin();
    if (first != prompts[i].end() && static_cast<int32_t>(*first) == tok.bos()) ++first;
    texts.push_back(tok.Decode(std::vector<int32_t>(first, prompts[i].end())));
  }
  return texts;
}

const std::string& EchoTextOf(const std::vector<std::string>& echo_texts, uint32_t per_prompt, uint32_t choice) {
  static const std::string kNone;
  const uint32_t prompt = PromptOfChoice(per_prompt, choice);
  return prompt < echo_texts.size() ? echo_texts[prompt] : kNone;
}

std::optional<std::vector<uint32_t>> PromptTokenIdsOf(const std::vector<std::vector<uint32_t>>& per_prompt_ids,
                                                      uint32_t per_prompt, uint32_t choice) {
  const uint32_t prompt = PromptOfChoice(per_prompt, choice);
  if (prompt >= per_prompt_ids.size()) return std::nullopt;
  return per_prompt_ids[prompt];
}

namespace {

// Position p's entry in `scored` (p >= 1), as an index into its lists; -1 when absent.
int64_t EntryOf(const proto::TokenChunk& scored, size_t position) {
  const size_t offset = scored.prompt_logprob_offset;
  if (offset == 0 || position < offset || position - offset >= scored.prompt_logprobs.size()) return -1;
  return static_cast<int64_t>(position - offset);
}

size_t AlternativesPerEntry(const proto::TokenChunk& scored) {
  return scored.prompt_logprobs.empty() ? 0 : scored.prompt_top_token_ids.size() / scored.prompt_logprobs.size();
}

}  // namespace

std::vector<http::TokenLogprob> EchoedPromptLogprobs(const std::vector<uint32_t>& prompt,
                                                     const proto::TokenChunk& scored, uint32_t alternatives,
                                                     const tokenizer::Tokenizer& tok) {
  std::vector<http::TokenLogprob> out;
  const size_t per = AlternativesPerEntry(scored);
  const size_t text_start = !prompt.empty() && static_cast<int32_t>(prompt[0]) == tok.bos() ? 1 : 0;
  const auto piece = [&](uint32_t id, size_t position) {
    return position == text_start ? std::string(tok.SequenceStartPiece(static_cast<int32_t>(id)))
                                  : tok.TokenPiece(static_cast<int32_t>(id));
  };
  for (size_t p = 0; p < prompt.size(); ++p) {
    http::TokenLogprob t;
    t.token = piece(prompt[p], p);
    t.id = prompt[p];
    if (p == 0) {
      t.absent = true;
      out.push_back(std::move(t));
      continue;
    }
    const int64_t e = EntryOf(scored, p);
    if (e < 0) continue;
    t.logprob = scored.prompt_logprobs[static_cast<size_t>(e)];
    for (size_t j = 0; j < std::min<size_t>(per, alternatives); ++j) {
      const size_t k = static_cast<size_t>(e) * per + j;
      const uint32_t id = scored.prompt_top_token_ids[k];
      t.top.push_back({piece(id, p), scored.prompt_top_logprobs[k], {}, id});
    }
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<http::PromptPositionLogprobs> VllmPromptLogprobs(const std::vector<uint32_t>& prompt,
                                                             const proto::TokenChunk& scored,
                                                             uint32_t alternatives,
                                                             const tokenizer::Tokenizer& tok) {
  std::vector<http::PromptPositionLogprobs> out(prompt.size());
  const size_t per = AlternativesPerEntry(scored);
  if (!out.empty()) out[0].absent = true;
  for (size_t p = 1; p < prompt.size(); ++p) {
    const int64_t e = EntryOf(scored, p);
    if (e < 0) {
      out[p].absent = true;
      continue;
    }
    const auto index = static_cast<size_t>(e);
    out[p].candidates.push_back({prompt[p], scored.prompt_logprobs[index], scored.prompt_ranks[index],
                                 tok.TokenPiece(static_cast<int32_t>(prompt[p]))});
    for (size_t j = 0; j < std::min<size_t>(per, alternatives); ++j) {
      const size_t k = index * per + j;
      const uint32_t id = scored.prompt_top_token_ids[k];
      if (id == prompt[p]) continue;
      out[p].candidates.push_back({id, scored.prompt_top_logprobs[k], static_cast<uint32_t>(j + 1),
                                   tok.TokenPiece(static_cast<int32_t>(id))});
    }
  }
  return out;
}

void AddPromptLogprobs(const PromptScoring& scoring, uint32_t per_prompt, const std::vector<proto::TokenChunk>& scored,
                       const tokenizer::Tokenizer& tok, std::vector<http::ChoiceOutput>& outputs) {
  if (scoring.prompt_ids.empty()) return;
  const size_t choices_per_prompt = std::max<uint32_t>(per_prompt, 1);
  for (size_t i = 0; i < outputs.size() && i < scored.size(); ++i) {
    const size_t prompt_index = i / choices_per_prompt;
    if (prompt_index >= scoring.prompt_ids.size()) break;
    const std::vector<uint32_t>& prompt = scoring.prompt_ids[prompt_index];
    // A prompt's first choice alone scores it (CoordinatorServer::Core::AcceptChoices).
    const proto::TokenChunk& prompt_scored = scored[prompt_index * choices_per_prompt];
    if (scoring.echo_logprobs) {
      std::vector<http::TokenLogprob> all = EchoedPromptLogprobs(prompt, prompt_scored, scoring.echo_alternatives, tok);
      all.insert(all.end(), outputs[i].logprobs.begin(), outputs[i].logprobs.end());
      outputs[i].logprobs = std::move(all);
    }
    if (scoring.vllm_alternatives >= 0) {
      outputs[i].prompt_logprobs =
          VllmPromptLogprobs(prompt, prompt_scored, static_cast<uint32_t>(scoring.vllm_alternatives), tok);
    }
  }
}

}  // namespace bmad::coord
