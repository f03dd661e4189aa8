#include "worker/sampling/output_constraint.h"

#include <algorithm>
#include <limits>

namespace bmad::sampling {

Status OutputConstraint::Sync(std::span<const int32_t> generated) {
  std::span<const int32_t> formatted = generated;
  if (gate_.end_token >= 0) {
    size_t block_from = 0;  // where the block's text starts: its end is looked for from there
    if (gate_.start_token >= 0) {
      if (generated.empty()) {
        phase_ = Phase::kFirstToken;
        return Status::Ok();
      }
      block_from = 1;
    }
    if (gate_.start_token >= 0 && generated.front() != gate_.start_token) {
      formatted = generated;  // no block: formatted from the first token
    } else {
      const auto end = std::find(generated.begin() + static_cast<ptrdiff_t>(block_from), generated.end(),
                                 gate_.end_token);
      if (end == generated.end()) {
        phase_ = Phase::kReasoning;
        return Status::Ok();
      }
      formatted = generated.subspan(static_cast<size_t>(end - generated.begin()) + 1);
    }
  }
  phase_ = Phase::kFormatted;
  return std::visit([&](auto& c) { return c.Sync(formatted); }, held_);
}

Status OutputConstraint::Mask(std::span<float> scores) {
  constexpr float kBanned = -std::numeric_limits<float>::infinity();
  auto in_range = [&](int32_t id) { return id >= 0 && static_cast<size_t>(id) < scores.size(); };
  switch (phase_) {
    case Phase::kReasoning:
      for (int32_t id : gate_.ending_tokens) {
        if (in_range(id)) scores[static_cast<size_t>(id)] = kBanned;
      }
      return Status::Ok();
    case Phase::kFirstToken: {
      // The format's first token, or the one that opens the block (unless it would end the
      // output: a stop token).
      const bool may_open = in_range(gate_.start_token) &&
                            std::find(gate_.ending_tokens.begin(), gate_.ending_tokens.end(), gate_.start_token) ==
                                gate_.ending_tokens.end();
      const float opening = may_open ? scores[static_cast<size_t>(gate_.start_token)] : kBanned;
      BMAD_RETURN_IF_ERROR(std::visit([&](auto& c) { return c.Mask(scores); }, held_));
      if (may_open) scores[static_cast<size_t>(gate_.start_token)] = opening;
      return Status::Ok();
    }
    case Phase::kFormatted:
      break;
  }
  return std::visit([&](auto& c) { return c.Mask(scores); }, held_);
}

bool OutputConstraint::complete() {
  if (phase_ != Phase::kFormatted) return false;
  return std::visit([](auto& c) { return c.complete(); }, held_);
}

}  // namespace bmad::sampling
