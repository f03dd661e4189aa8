#include "worker/sampling/sampler.h"

#include "worker/sampling/sampling_params_validation.h"
#include "kernels/sample_row.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

namespace bmad::sampling {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

Status NonFiniteLogit(size_t index, float value, bool penalized) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "logit of token %zu is %s%s", index,
                std::isnan(value) ? "nan" : "+inf",
                penalized ? " (with penalties applied)" : "");
  return Internal(buf);
}

}  // namespace

Status Sampler::NoFiniteLogit() const {
  // The request's own bans can leave nothing (allowed_token_ids that the JSON format, min_tokens
  // or bad_words ban in turn): the client's doing, said in its terms. Otherwise the model's.
  if (bans_.active()) {
    return InvalidArgument("no token can come next: 'allowed_token_ids' and 'bad_words', with the "
                           "request's other constraints, ban every one");
  }
  return Internal("every logit is -inf: no token can be chosen");
}

Sampler::Sampler(const proto::SamplingParams& params, uint64_t default_seed,
                 std::vector<int32_t> end_tokens, std::optional<OutputConstraint> constraint)
    : temperature_(std::isfinite(params.temperature) && params.temperature >= kernels::kGreedyBelowTemperature
                       ? params.temperature
                       : 0.0f),
      top_k_(std::max(params.top_k, 0)),
      // Written so that NaN takes the "off" branch: comparisons with NaN are false.
      top_p_(params.top_p < 1.0f ? std::max(params.top_p, 0.0f) : 1.0f),
      min_p_(params.min_p > 0.0f ? std::min(params.min_p, 1.0f) : 0.0f),
      penalties_{std::isfinite(params.repetition_penalty) && params.repetition_penalty > 0.0f
                     ? params.repetition_penalty
                     : 1.0f,
                 std::isfinite(params.presence_penalty) ? params.presence_penalty : 0.0f,
                 std::isfinite(params.frequency_penalty) ? params.frequency_penalty : 0.0f},
      logit_bias_(params.logit_bias),
      bans_(params.allowed_token_ids, params.bad_words),
      min_tokens_(params.min_tokens),
      end_tokens_(std::move(end_tokens)),
      constraint_(std::move(constraint)),
      want_logprob_(params.logprobs),
      top_logprobs_(params.logprobs ? std::min<uint32_t>(params.top_logprobs, kMaxTopLogprobs) : 0),
      seed_(params.has_seed ? params.seed : default_seed),
      rng_(seed_) {}

Result<SampleResult> Sampler::Sample(std::span<const float> logits,
                                     std::span<const int32_t> prompt_tokens,
                                     std::span<const int32_t> generated_tokens) {
  if (logits.empty()) return InvalidArgument("no logits to sample from");
  if (logits.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return InvalidArgument("more logits than token ids: " + std::to_string(logits.size()));
  }
  std::span<const float> scores = logits;
  const bool hold_back_end = holds_back_end() && generated_tokens.size() < min_tokens_;
  if (penalties_.active() || !logit_bias_.empty() || hold_back_end || constraint_ || bans_.active()) {
    processed_.assign(logits.begin(), logits.end());  // reuses the capacity after the first call
    for (const proto::LogitBias& entry : logit_bias_) {
      // An entry outside the vocabulary failed validation; never write past the row.
      if (entry.token_id < logits.size()) processed_[entry.token_id] += entry.bias;
    }
    // Bans and the constraint's mask write -inf over what was there, a NaN or +inf too: the raw
    // row is checked first (once), as Argmax and Draw check every score of an unmasked one (and
    // logprobs are computed from the raw row).
    bool raw_row_checked = false;
    const auto check_raw_row = [&]() -> Status {
      if (raw_row_checked) return Status::Ok();
      raw_row_checked = true;
      for (size_t i = 0; i < logits.size(); ++i) {
        if (!(logits[i] < kInf)) return NonFiniteLogit(i, logits[i], false);
      }
      return Status::Ok();
    };
    if (bans_.active()) {
      BMAD_RETURN_IF_ERROR(check_raw_row());
      bans_.Apply(processed_, generated_tokens);
    }
    if (hold_back_end) {
      for (int32_t token : end_tokens_) {
        if (token < 0 || static_cast<size_t>(token) >= logits.size()) continue;
        // A broken logit is an error whether or not min_tokens hides it (the raw logits are
        // what logprobs are computed from).
        if (!(logits[token] < kInf)) return NonFiniteLogit(static_cast<size_t>(token), logits[token], false);
        processed_[token] = -kInf;
      }
    }
    if (penalties_.active()) {
      BMAD_RETURN_IF_ERROR(occurrences_.Update(prompt_tokens, generated_tokens,
                                               static_cast<int32_t>(logits.size())));
      ApplyPenalties(penalties_, occurrences_, processed_);
    }
    if (constraint_) {
      BMAD_RETURN_IF_ERROR(check_raw_row());
      BMAD_RETURN_IF_ERROR(constraint_->Sync(generated_tokens));
      BMAD_RETURN_IF_ERROR(constraint_->Mask(processed_));
    }
    scores = processed_;
  }

  SampleResult result;
  if (greedy()) {
    BMAD_ASSIGN_OR_RETURN(result.token_id, Argmax(scores));
  } else {
    BMAD_ASSIGN_OR_RETURN(result.token_id, Draw(scores));
  }
  // The raw logits passed a finiteness check: Argmax or Draw saw them (penalties keep NaN and
  // +inf as they are), or the constraint's check did before masking.
  if (!want_logprob_) return result;
  const LogSoftmaxNorm norm = LogSoftmaxNormOf(logits);
  result.logprob = norm.At(logits[static_cast<size_t>(result.token_id)]);
  if (top_logprobs_ > 0) {
    if (candidates_.size() < top_logprobs_) candidates_.resize(top_logprobs_);
    BMAD_ASSIGN_OR_RETURN(std::span<Candidate> top, SelectTopK(logits, top_logprobs_));
    result.top.reserve(top.size());
    for (const Candidate& c : top) result.top.push_back({c.id, norm.At(c.score)});
  }
  return result;
}

Result<int32_t> Sampler::Argmax(std::span<const float> scores) const {
  int32_t best = -1;
  float best_score = -kInf;
  for (size_t i = 0; i < scores.size(); ++i) {
    const float score = scores[i];
    if (!(score < kInf)) return NonFiniteLogit(i, score, penalties_.active());
    if (score > best_score) {  // strict: ties keep the lowest id
      best_score = score;
      best = static_cast<int32_t>(i);
    }
  }
  if (best < 0) return NoFiniteLogit();
  return best;
}

Result<std::span<Candidate>> Sampler::CollectFinite(std::span<const float> scores) {
  size_t count = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    const float score = scores[i];
    if (!(score < kInf)) return NonFiniteLogit(i, score, penalties_.active());
    if (score == -kInf) continue;  // probability 0
    candidates_[count++] = Candidate{score, static_cast<int32_t>(i), 0.0f};
  }
  if (count == 0) return NoFiniteLogit();
  return std::span<Candidate>(candidates_.data(), count);
}

Result<std::span<Candidate>> Sampler::SelectTopK(std::span<const float> scores, size_t k) {
  // A heap of the k most likely so far, least likely on top: a new token only enters when it
  // beats the top, which for most tokens is one comparison. O(V + k log k log(V / k)) expected.
  const auto heap_order = [](const Candidate& a, const Candidate& b) { return MoreLikely(a, b); };
  Candidate* heap = candidates_.data();
  size_t size = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    const float score = scores[i];
    if (!(score < kInf)) return NonFiniteLogit(i, score, penalties_.active());
    if (score == -kInf) continue;
    const Candidate c{score, static_cast<int32_t>(i), 0.0f};
    if (size < k) {
      heap[size++] = c;
      std::push_heap(heap, heap + size, heap_order);
    } else if (MoreLikely(c, heap[0])) {  // ties lose: c has the higher id
      std::pop_heap(heap, heap + size, heap_order);
      heap[size - 1] = c;
      std::push_heap(heap, heap + size, heap_order);
    }
  }
  if (size == 0) return NoFiniteLogit();
  std::sort(heap, heap + size, heap_order);  // most likely first: O(k log k)
  return std::span<Candidate>(heap, size);
}

Result<int32_t> Sampler::Draw(std::span<const float> scores) {
  // The draw walks the kept tokens in a canonical order, most likely first after top-k, id order
  // otherwise, so the token a uniform maps to never depends on the standard library.
  const auto top_k = static_cast<size_t>(top_k_);
  const bool most_likely_first = top_k > 0 && top_k < scores.size();
  const size_t needed = most_likely_first ? top_k : scores.size();
  if (candidates_.size() < needed) candidates_.resize(needed);  // grows once, then reused
  BMAD_ASSIGN_OR_RETURN(std::span<Candidate> kept,
                        most_likely_first ? SelectTopK(scores, top_k) : CollectFinite(scores));
  float max_score = -kInf;
  for (const Candidate& c : kept) max_score = std::max(max_score, c.score);

  // Softmax numerators; the most likely token gets exactly 1 (max_score is among the kept).
  double total = 0.0;
  for (Candidate& c : kept) {
    c.prob = std::exp((c.score - max_score) / temperature_);
    total += c.prob;
  }

  if (top_p_ < 1.0f) {
    const double mass = static_cast<double>(top_p_) * total;
    if (most_likely_first) {
      double cumulative = 0.0;
      size_t length = 0;
      while (length < kept.size() && cumulative < mass) cumulative += kept[length++].prob;
      kept = kept.first(std::max<size_t>(length, 1));
    } else {
      // Find the boundary on a copy, then keep the nucleus in id order: O(V), no full sort.
      nucleus_.assign(kept.begin(), kept.end());
      const std::optional<Candidate> boundary = NucleusBoundary(nucleus_, mass);
      if (boundary) {
        auto end = std::remove_if(kept.begin(), kept.end(), [&](const Candidate& c) {
          return c.id != boundary->id && !MoreLikely(c, *boundary);
        });
        kept = kept.first(static_cast<size_t>(end - kept.begin()));
      }
    }
  }
  if (min_p_ > 0.0f) {
    // p / p_max = prob / 1. The top token always stays (min_p <= 1). remove_if keeps the order.
    const float threshold = min_p_;
    auto end = std::remove_if(kept.begin(), kept.end(),
                              [threshold](const Candidate& c) { return c.prob < threshold; });
    kept = kept.first(static_cast<size_t>(end - kept.begin()));
  }

  total = 0.0;
  for (const Candidate& c : kept) total += c.prob;
  const double target = NextUniform() * total;
  double cumulative = 0.0;
  int32_t last_possible = kept.front().id;
  for (const Candidate& c : kept) {
    if (c.prob <= 0.0f) continue;  // underflowed: never chosen
    cumulative += c.prob;
    last_possible = c.id;
    if (target < cumulative) return c.id;
  }
  // Rounding left the running sum a hair below `total`: the draw belongs to the last token.
  return last_possible;
}

double Sampler::NextUniform() {
  if (held_uniform_) {
    const double u = *held_uniform_;
    held_uniform_.reset();
    return u;
  }
  // The top 53 bits of one output, scaled to [0, 1): exact in a double, same on every platform.
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

DeviceDraw Sampler::PrepareDeviceDraw() {
  DeviceDraw d;
  d.temperature = temperature_;
  d.top_k = top_k_;
  d.top_p = top_p_;
  d.min_p = min_p_;
  if (!greedy()) {
    if (!held_uniform_) held_uniform_ = NextUniform();
    d.uniform = *held_uniform_;
  }
  return d;
}

LogSoftmaxNorm LogSoftmaxNormOf(std::span<const float> logits) {
  float max_logit = -kInf;
  for (float logit : logits) max_logit = std::max(max_logit, logit);
  double sum = 0.0;
  for (float logit : logits) sum += std::exp(logit - max_logit);  // float exp, double sum
  return LogSoftmaxNorm{max_logit, std::log(sum)};
}

float LogSoftmaxAt(std::span<const float> logits, int32_t token) {
  return LogSoftmaxNormOf(logits).At(logits[static_cast<size_t>(token)]);
}

}  // namespace bmad::sampling
