#include "common/effective_priority.h"

#include <algorithm>

namespace bmad {

double EffectivePriority(const WaitingRequest& request, int64_t now_ms, double priority_decay) {
  const double waited_s = static_cast<double>(request.waited_ms) / 1000.0;
  const double slo = std::max<double>(1.0, static_cast<double>(request.deadline_ms - request.arrival_ms));
  const double gone = std::clamp(1.0 - static_cast<double>(request.deadline_ms - now_ms) / slo, 0.0, 1.0);
  const double overdue_s = static_cast<double>(std::max<int64_t>(0, now_ms - request.deadline_ms)) / 1000.0;
  return -static_cast<double>(request.priority_class) + priority_decay * waited_s + gone + overdue_s;
}

}  // namespace bmad
