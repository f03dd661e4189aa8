#include "worker/sampling/penalties.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace bmad::sampling {

void ApplyPenalties(const Penalties& penalties, const TokenOccurrences& occurrences,
                    std::span<float> logits) {
  // Every seen token occurs in the prompt or the output, so the repetition penalty applies to
  // all of them; presence and frequency only to those in the output.
  for (int32_t token : occurrences.seen_tokens()) {
    float& logit = logits[static_cast<size_t>(token)];
    const bool finite = std::isfinite(logit);
    if (penalties.repetition != 1.0f) {
      logit = logit > 0.0f ? logit / penalties.repetition : logit * penalties.repetition;
    }
    const uint32_t count = occurrences.generated_count(token);
    if (count > 0) {
      logit -= penalties.presence + penalties.frequency * static_cast<float>(count);
    }
    if (finite) logit = std::clamp(logit, -FLT_MAX, FLT_MAX);
  }
}

}  // namespace bmad::sampling
