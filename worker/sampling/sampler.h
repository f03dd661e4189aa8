// The per-request sampler: turns one step's logits into the next token.
//
// Pipeline, in this order (Hugging Face's, vLLM V0's and llama.cpp's for the filters; vLLM V1
// applies min-p before top-k and top-p):
//   0. logit_bias: each entry's bias is added to its token's logit; and while the output holds
//      fewer than min_tokens tokens, the tokens that would end it (`end_tokens`: the model's
//      end-of-generation tokens unless ignore_eos, and the stop token ids) get -inf (vLLM's
//      logits processors, which also run before the penalties); and allowed_token_ids and
//      bad_words ban what they ban (TokenBans);
//   1. repetition penalty (Hugging Face / CTRL): for each token occurring in the prompt or the
//      output, a positive logit is divided by `repetition_penalty`, a negative one multiplied;
//   2. presence and frequency penalties (OpenAI), over the output only:
//      logit -= presence_penalty * [count > 0] + frequency_penalty * count (see penalties.h);
//   3. temperature below 1e-5 (vLLM's threshold; kernels::kGreedyBelowTemperature): greedy, the
//      argmax (ties go to the lowest id). Nothing below applies;
//   4. otherwise: top-k (the k highest logits, ties to lower ids), softmax of logit / temperature,
//      top-p (the smallest set of most likely tokens whose probability reaches top_p; at least one
//      token), min-p (drop tokens with p < min_p * p_max), renormalise, draw.
// With an OutputConstraint (a JSON response format, guided_regex, guided_choice), the tokens it
// bans get -inf after step 2.
//
// Randomness: each Sampler owns a std::mt19937_64 seeded with `params.seed` (or the default seed
// when `has_seed` is false). The standard fixes that engine's output sequence exactly, and the
// uniform in [0, 1) is derived here from the top 53 bits of one 64-bit output (not with
// std::uniform_real_distribution, whose algorithm is implementation-defined). Every non-greedy
// Sample call consumes exactly one output, whatever the filters, and the draw walks the kept
// tokens in a canonical order (nucleus.h), so the same seed and the same sequence of logits give
// the same tokens with any standard library. (The probabilities come from std::exp; a libm whose
// expf differs in the last bit could move a draw that lands within rounding of a boundary.)
//
// Cost per call, V = vocabulary size: greedy is one pass over the logits (plus a copy and
// O(distinct history tokens) when a penalty is set); sampling is O(V) plus O(k log k) for the k
// candidates top-k keeps; top-p without top-k finds its boundary by quickselect, O(V) expected,
// and sorts nothing big. Scratch buffers live in the Sampler, so calls after the first do not
// allocate (the penalty counts grow only with the number of distinct tokens seen).
//
// Memory per Sampler, allocated on first use and only by the features a request uses: greedy
// without penalties none; top-k 12 bytes per kept candidate; sampling without top-k 12 bytes per
// vocabulary entry (24 with top-p); penalties 9 bytes per vocabulary entry, logit_bias or
// min_tokens 4; allowed_token_ids one bit per vocabulary entry.
//
// Thread-safety: none; one Sampler per sequence, used by one thread at a time.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <vector>

#include "common/proto/messages.h"
#include "common/status.h"
#include "worker/sampling/output_constraint.h"
#include "worker/sampling/nucleus.h"
#include "worker/sampling/penalties.h"
#include "worker/sampling/token_bans.h"
#include "worker/sampling/token_occurrences.h"

namespace bmad::sampling {

struct SampleResult {
  int32_t token_id = -1;
  // log p(token_id) under the model's raw distribution: log_softmax(logits)[token_id] of the
  // logits exactly as given, before logit_bias, min_tokens, penalties, temperature and
  // truncation. That is the model's own confidence (vLLM's default "raw" logprobs), comparable
  // across requests whatever their sampling knobs, and meaningful for greedy requests, whose
  // processed distribution is a point mass. Set only when `params.logprobs` is true: it costs one exp per vocabulary entry.
  std::optional<float> logprob;
  // With params.top_logprobs N (and logprobs): the N most likely tokens under that same raw
  // distribution (fewer when fewer have finite logits), most likely first, ties by lower id;
  // each log-probability computed as `logprob` is, so a greedy token's equals its first one's.
  struct Alternative {
    int32_t token_id;
    float logprob;
  };
  std::vector<Alternative> top;
};

// One draw made where the logits are, as kernels::RowSampling carries it to the backend
// (Backend::SampleRows follows this sampler's definition, kernels/sample_row.h).
struct DeviceDraw {
  float temperature = 0.0f;  // 0: greedy
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  double uniform = 0.0;  // the generator's next uniform; 0 for greedy (which draws none)
};

class Sampler {
 public:
  // `params` should have passed ValidateSamplingParams. Values that did not are not rejected
  // here but replaced by the nearest sane ones (never undefined behaviour): a non-finite
  // temperature, or one below 1e-5, means greedy, top_p outside (0, 1] or NaN is clamped (NaN: off), min_p
  // is clamped to [0, 1] (NaN: off), top_k < 0 is off, a non-positive or non-finite
  // repetition_penalty and non-finite presence/frequency penalties are off.
  // `default_seed` seeds the generator when `params.has_seed` is false (the engine should pass a
  // fresh random value per request, so unseeded requests differ). `end_tokens`: the tokens
  // min_tokens holds back (engine::TokensThatEnd); ids outside the vocabulary are skipped, as
  // are logit_bias entries outside it. `constraint`: what the output must be, if anything (it
  // keeps itself in step with the output it is given, below).
  Sampler(const proto::SamplingParams& params, uint64_t default_seed,
          std::vector<int32_t> end_tokens = {}, std::optional<OutputConstraint> constraint = std::nullopt);

  // Chooses the next token of one sequence.
  //   logits: one score per vocabulary entry (V = logits.size()); -inf marks a banned token.
  //   prompt_tokens, generated_tokens: the sequence's whole history, each call. Read only when a
  //     penalty is set. Between calls the prompt must stay the same and the output only grow by
  //     appending; then only the new tokens are counted (see token_occurrences.h). A shorter
  //     output or another prompt length makes the Sampler recount from scratch.
  // Errors (nothing is drawn, the generator does not advance):
  //   kInvalidArgument: empty logits, more than INT32_MAX of them, or a history token outside
  //     [0, V);
  //   kInternal: a logit is NaN or +inf (a broken model, or a penalty overflowing), or every
  //     logit is -inf;
  //   kInvalidArgument: allowed_token_ids or bad_words left no token (with the other bans).
  //   the constraint's (OutputConstraint::Sync, Mask).
  Result<SampleResult> Sample(std::span<const float> logits,
                              std::span<const int32_t> prompt_tokens,
                              std::span<const int32_t> generated_tokens);

  bool greedy() const { return temperature_ == 0.0f; }
  // Nothing here reads the logits besides the draw itself (no penalty, no logprobs, no bias,
  // no ending token held back for min_tokens once `generated_tokens` have been made): a device
  // backend can draw the token where the logits are (Backend::SampleRows). A count that lags
  // (a token still being drawn) only keeps the draw on the host one step longer.
  bool device_samplable(size_t generated_tokens) const {
    return !penalties_.active() && !want_logprob_ && logit_bias_.empty() && !constraint_ && !bans_.active() &&
           !(holds_back_end() && generated_tokens < min_tokens_);
  }
  // The draw for a device backend, with the uniform the next Sample would use. The uniform is
  // held until DrawnOnDevice says the token was taken: a draw prepared but not taken (its step
  // refused, or its row ignored) is the next draw, on the device or here, so a seed gives the
  // same tokens whichever way each token is drawn.
  DeviceDraw PrepareDeviceDraw();
  void DrawnOnDevice() { held_uniform_.reset(); }
  // A migrated request: the replica that generated its first `tokens` drew one output for each
  // (none when greedy), so the draws go on from there and a seeded request continues with the
  // tokens the first replica would have drawn.
  void SkipDrawsOf(size_t tokens) {
    if (!greedy()) rng_.discard(tokens);
  }
  uint64_t seed() const { return seed_; }

 private:
  bool holds_back_end() const { return min_tokens_ > 0 && !end_tokens_.empty(); }
  // The error when every score is -inf.
  Status NoFiniteLogit() const;
  Result<int32_t> Argmax(std::span<const float> scores) const;
  Result<int32_t> Draw(std::span<const float> scores);
  // The finite-score tokens in id order, in candidates_.
  Result<std::span<Candidate>> CollectFinite(std::span<const float> scores);
  // The k most likely finite-score tokens (fewer if fewer are finite), most likely first.
  Result<std::span<Candidate>> SelectTopK(std::span<const float> scores, size_t k);
  // The held uniform if there is one (PrepareDeviceDraw), else the generator's next.
  double NextUniform();

  float temperature_;
  int32_t top_k_;
  float top_p_;
  float min_p_;
  Penalties penalties_;
  std::vector<proto::LogitBias> logit_bias_;
  TokenBans bans_;
  uint32_t min_tokens_;
  std::vector<int32_t> end_tokens_;
  std::optional<OutputConstraint> constraint_;
  bool want_logprob_;
  size_t top_logprobs_;  // alternatives per token; 0 unless want_logprob_
  uint64_t seed_;
  std::mt19937_64 rng_;
  std::optional<double> held_uniform_;

  TokenOccurrences occurrences_;        // only used when a penalty is set
  std::vector<float> processed_;        // [V] logits after logit_bias, min_tokens, penalties
  std::vector<Candidate> candidates_;   // [V] scratch for sampling
  std::vector<Candidate> nucleus_;      // [V] scratch for top-p without top-k
};

// log_softmax(logits)[token], the exponentials summed in double. Requires: no NaN or +inf in
// `logits`, at least one finite value, 0 <= token < logits.size().
float LogSoftmaxAt(std::span<const float> logits, int32_t token);

// The same for many tokens of one row: the maximum and the log of the sum, taken once.
struct LogSoftmaxNorm {
  float max_logit;
  double log_sum;
  float At(float logit) const {
    return static_cast<float>(static_cast<double>(logit - max_logit) - log_sum);
  }
};
LogSoftmaxNorm LogSoftmaxNormOf(std::span<const float> logits);

}  // namespace bmad::sampling
