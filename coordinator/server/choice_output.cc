#include "coordinator/server/choice_output.h"

#include <algorithm>

namespace bmad::coord {

bool StartsText(const std::vector<bool>& starts_text, uint32_t per_prompt, uint32_t choice) {
  const uint32_t prompt = choice / std::max<uint32_t>(per_prompt, 1);
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
  const uint32_t prompt = choice / std::max<uint32_t>(per_prompt, 1);
  return prompt < echo_texts.size() ? echo_texts[prompt] : kNone;
}

}  // namespace bmad::coord
