// Admission check of a request's sampling parameters, answered the way an OpenAI-compatible
// server answers: the first offending field, its allowed range and the value received.
//
// Numbers arrive from the wire (JSON or Cap'n Proto), so NaN and infinities are possible and are
// rejected here; the Sampler and the StopStringMatcher may then assume sane values (they still
// never misbehave on insane ones, see sampler.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/proto/messages.h"
#include "common/status.h"

namespace bmad::sampling {

// OpenAI's documented range for temperature; 0 means greedy.
inline constexpr float kMaxTemperature = 2.0f;
// OpenAI's range for presence_penalty and frequency_penalty is [-2, 2].
inline constexpr float kMaxAbsPresenceFrequencyPenalty = 2.0f;
// OpenAI accepts up to 4 stop strings; we accept a few more for clients that add their own.
// Each one costs a little per streamed chunk (see stop_string_matcher.h), hence the bounds.
inline constexpr size_t kMaxStopStrings = 8;
inline constexpr size_t kMaxStopStringBytes = 128;
// Bounds the per-request work of checking stop token ids (each is a vocabulary id).
inline constexpr size_t kMaxStopTokenIds = 64;
// Alternatives reported per token (OpenAI's top_logprobs limit).
inline constexpr uint32_t kMaxTopLogprobs = 20;
// OpenAI's range for a logit_bias value.
inline constexpr float kMaxAbsLogitBias = 100.0f;
// logit_bias entries per request: each costs one add per sampled token. OpenAI documents no
// limit; this one is ours, far above the few dozen tokens clients usually bias or ban.
inline constexpr size_t kMaxLogitBias = 4096;
// allowed_token_ids entries: any vocabulary fits (Llama-3's 128,256, Qwen's 151,936).
inline constexpr size_t kMaxAllowedTokenIds = 262144;
// bad_words token sequences per request (the coordinator makes up to two per word) and tokens
// per sequence: each sequence costs a comparison of the output's tail per sampled token.
inline constexpr size_t kMaxBadWordSequences = 128;
inline constexpr size_t kMaxBadWordTokens = 64;
// Bytes of a guided_regex pattern (guided_choice's alternation of its choices included).
inline constexpr size_t kMaxRegexBytes = 16384;
// vLLM's cache_salt: a tenant's name or key, not a document.
inline constexpr size_t kMaxCacheSaltBytes = 1024;

// OK, or kInvalidArgument whose message names the first bad field, e.g.
// "'top_p' must be a finite number in (0, 1]; got nan". Checks:
//   temperature         finite, in [0, 2] (0 = greedy)
//   top_k               >= 0 (0 = off; larger than the vocabulary means off too)
//   top_p               finite, in (0, 1]
//   min_p               finite, in [0, 1]
//   repetition_penalty  finite, > 0 (1 = off)
//   presence_penalty    finite, in [-2, 2]
//   frequency_penalty   finite, in [-2, 2]
//   max_tokens          >= 1 (the engine checks it against the context length)
//   stop_token_ids      at most 64, each in [0, vocab_size)
//   stop_strings        at most 8, each non-empty, at most 128 bytes, valid UTF-8
//   min_tokens          <= max_tokens
//   logit_bias          at most 4096 entries, distinct token ids in [0, vocab_size), each bias
//                       finite, in [-100, 100]
//   allowed_token_ids   at most 262144 ids, each in [0, vocab_size)
//   bad_words           at most 128 sequences of 1 to 64 ids, each in [0, vocab_size)
//   json_schema         with json_schema only: a schema JsonSchema::Compile takes (its error,
//                       under `constraint_field`: the request field the schema came in;
//                       default "response_format.json_schema.schema")
//   regex               with regex only: at most 16384 bytes, a pattern RegexNfa::Compile takes
//                       (its error under `constraint_field`, default "regex")
//   response_format     json_object, json_schema, regex: neither min_tokens nor ignore_eos
//   reasoning_end_token, reasoning_start_token  -1 or in [0, vocab_size), distinct; a start only
//                       with an end, an end only with a response format other than text
// `vocab_size` must be positive (kInvalidArgument otherwise).
Status ValidateSamplingParams(const proto::SamplingParams& params, int32_t vocab_size,
                              std::string_view constraint_field = {});

// True when `bytes` is well-formed UTF-8 (no overlong forms, surrogates or code points above
// U+10FFFF), the definition of RFC 3629.
bool IsValidUtf8(std::string_view bytes);

}  // namespace bmad::sampling
