#include "worker/sampling/output_constraint.h"

#include <algorithm>
#include <limits>

namespace bmad::sampling {

Status OutputConstraint::Sync(std::span<const int32_t> generated) {
  std::span<const int32_t> formatted = generated;
  if (gate_.end_token >= 0) {
    // A shorter output is read again from its start; a longer one from where the last read
    // stopped: the block's end is looked for in each token once, not in every step's output.
    if (generated.size() < scanned_ || (formatted_from_ && generated.size() < *formatted_from_)) {
      scanned_ = 0;
      formatted_from_.reset();
    }
    if (!formatted_from_ && gate_.start_token >= 0) {
      if (generated.empty()) {
        phase_ = Phase::kFirstToken;
        return Status::Ok();
      }
      if (generated.front() != gate_.start_token) formatted_from_ = 0;  // no block: formatted at once
      scanned_ = std::max<size_t>(scanned_, 1);  // the block's end comes after its opening
    }
    if (!formatted_from_) {
      const auto end = std::find(generated.begin() + static_cast<ptrdiff_t>(scanned_), generated.end(),
                                 gate_.end_token);
      scanned_ = generated.size();
      if (end == generated.end()) {
        phase_ = Phase::kReasoning;
        return Status::Ok();
      }
      formatted_from_ = static_cast<size_t>(end - generated.begin()) + 1;
    }
    formatted = generated.subspan(*formatted_from_);
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
