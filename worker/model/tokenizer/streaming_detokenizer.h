// Turns generated token ids into text one id at a time without ever emitting part of a
// character: a UTF-8 character split across byte tokens (an emoji is often four <0xHH> tokens)
// is held until its last byte arrives.
//
// The output is always valid UTF-8, so it can go straight into JSON:
//   - bytes that can never form a character (a stray continuation byte, C0, F5..FF, an
//     overlong or surrogate form, a character cut short by a byte that does not continue it)
//     become U+FFFD, one per maximal invalid subsequence, as soon as they are known invalid;
//   - Flush() turns a character still incomplete at the end into one U+FFFD.
// For token sequences whose bytes are valid UTF-8, the concatenated output equals
// Tokenizer::Decode of the same ids (with decodes_sequence_start) or the concatenated pieces;
// Decode alone then cleans up spaces for a vocabulary with clean_spaces (the Llama-3 family).
//
// Thread-safety: one object per stream; the Tokenizer must outlive it.
#pragma once

#include <cstdint>
#include <string>

#include "worker/model/tokenizer/tokenizer.h"

namespace bmad::tokenizer {

class StreamingDetokenizer {
 public:
  // `decodes_sequence_start`: the ids are a whole sequence from its first token, so the first
  // token loses its leading space exactly as in Tokenizer::Decode. Leave it false for tokens
  // generated after a prompt: their leading spaces separate them from the prompt's text.
  explicit StreamingDetokenizer(const Tokenizer& tokenizer, bool decodes_sequence_start = false);

  // The text that token `id` completes: possibly empty (a control token, or the first bytes of a
  // character), possibly more than its own piece (the end of a held character). An id outside
  // the vocabulary contributes nothing.
  std::string Feed(int32_t id);

  // Whatever is held (the start of a character no token finished) as U+FFFD, or "". The
  // detokenizer is then ready for a new stream, as if just constructed.
  std::string Flush();

  // Bytes held back, waiting for the rest of a character (0 to 3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  bool decodes_sequence_start_;
  bool at_start_;
  std::string pending_;
};

}  // namespace bmad::tokenizer
