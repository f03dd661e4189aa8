// Holds one sequence's output to a JSON value its schema allows (OpenAI's response_format
// "json_schema"; "json_object" is the schema JsonSchema::AnyObject): at each step every token
// whose text cannot continue the output towards such a value is banned, and once the value is
// whole only the tokens that end the output remain, so the output ends with it.
//
// Tokens are judged by their bytes (TokenTexts) through a SchemaAutomaton, which never accepts a
// prefix no allowed value completes: the output cannot be led into a dead end. Control tokens (no
// text) are banned until the end. A length limit or a stop string can still cut the object
// short, as in vLLM; the finish reason then says so ("length", or "stop" with stop_reason).
//
// Cost of a Mask: one pass over the vocabulary. Inside a string, tokens of plain text (most of
// them) are allowed unread; elsewhere most are refused by their first byte (a 256-entry table
// made per call); the rest are read on a copy of the automaton. About 0.1 ms per token for the
// Llama-2 vocabulary of 32,000 tokens (docs/benchmarks.md, "JSON mode"). Memory: the
// automaton's few bytes; the texts are shared.
//
// Thread-safety: none; one per sequence (inside its Sampler).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/status.h"
#include "worker/sampling/json_schema.h"
#include "worker/sampling/schema_automaton.h"
#include "worker/sampling/token_texts.h"

namespace bmad::sampling {

class JsonConstraint {
 public:
  // `end_tokens`: what ends the output (engine::TokensThatEnd); allowed once the value is
  // complete, and only then.
  // `compact`: no whitespace outside strings (vLLM's disable_any_whitespace).
  JsonConstraint(std::shared_ptr<const TokenTexts> texts, std::vector<int32_t> end_tokens,
                 std::shared_ptr<const JsonSchema> schema = JsonSchema::AnyObject(), bool compact = false);

  // Reads the output's tokens not read yet. Between calls the output only grows (a shorter one
  // is read again from its start). kInvalidArgument naming the token when one cannot continue
  // the object: an output this constraint did not choose (a migrated request's).
  Status Sync(std::span<const int32_t> generated);

  // Sets every token that cannot come next to -inf (ids beyond the vocabulary's texts too).
  // kFailedPrecondition when no token can: a vocabulary without the bytes JSON needs.
  Status Mask(std::span<float> scores) const;

  bool complete() const { return automaton_.complete(); }

 private:
  bool Ends(int32_t token) const;

  std::shared_ptr<const TokenTexts> texts_;
  std::vector<int32_t> end_tokens_;
  std::shared_ptr<const JsonSchema> schema_;
  bool compact_;
  SchemaAutomaton automaton_;  // reads *schema_ (shared, so copies of this read it too)
  size_t read_ = 0;     // output tokens read into the automaton
  bool ended_ = false;  // an end token was read: nothing follows it
};

}  // namespace bmad::sampling
